"""Memory comes back: deleting states returns what they held to the system; and a cell
that grows past --max-cell-memory stops with a MemoryError instead of the OOM killer.

Each give-back case runs in a fresh process, as a server runs: its RSS (``VmRSS``)
after the states are deleted is compared with its RSS before they were made."""

import json
import platform
import re
import subprocess
import sys

import pytest

from helpers import ok
from snapshot_kernel import cli, memory
from snapshot_kernel.kernel import SnapshotKernel

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="RSS comes back through glibc's malloc_trim")

# Cells run on threads started after the kernel, as a server's workers are, each
# thread making states of 5 MB of source and 5 MB of data; then all are deleted.
SCRIPT = """
import json, os, sys, threading
from snapshot_kernel.kernel import SnapshotKernel

def rss():
    with open(f"/proc/{os.getpid()}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))

options = json.loads(sys.argv[1])
kernel = SnapshotKernel(**options)
kernel.execute("n = 0", "initial")
before = rss()
names = []

def make(thread):
    for number in range(4):
        code = f"# {'x' * 5_000_000}\\ndata = bytes(5_000_000) + b'{thread}-{number}'"
        names.append(kernel.execute_here(code, "initial")["state_name"])

threads = [threading.Thread(target=make, args=(thread,)) for thread in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for name in list(names):  # each used once: with a state directory, read back from it
    names.append(kernel.execute_here("len(data)", name)["state_name"])
peak = rss()
for name in names:
    kernel.delete(name)
kernel.reset()
print(json.dumps([before, peak, rss()]))
"""


# A server's modes: --in-memory; the default, a private state directory; --state-dir, which
# reads objects back from the directory (and once kept every group it read, for good).
MODES = {"in memory": {}, "private directory": {"private_dir": True}, "state directory": {
    "private_dir": False}}


@pytest.mark.parametrize("options", MODES.values(), ids=MODES)
def test_deleting_states_gives_their_memory_back(options, tmp_path):
    if options:  # in the test's directory: the catalogue keeps its 160 MB of free pages
        options = dict(options, state_dir=str(tmp_path / "states"))
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(options)],
                          capture_output=True, text=True, timeout=120, check=True)
    before, peak, after = json.loads(done.stdout)
    assert peak - before > 100 * 2 ** 20  # the states did take memory
    assert after - before < 0.1 * before, (before, peak, after)


# -- the memory limit of cells (--max-cell-memory) ---------------------------------------------

GROWER = "x = []\nwhile True:\n    x.append(bytearray(10 ** 6))"


def test_a_cell_growing_past_the_limit_gets_a_memory_error_and_the_next_cell_runs():
    kernel = SnapshotKernel(max_cell_memory=memory.anonymous_bytes() + 200_000_000)
    try:
        reply = kernel.execute(GROWER, "initial", exec_id="grower")
        error = reply["error"]
        assert error["ename"] == "MemoryError" and reply["state_name"] is None
        assert "past its --max-cell-memory of" in error["evalue"]
        # where the loop was when the interrupt landed: its test (3.13) or its body
        assert re.search(r'File "<cell-\d+>", line [23], in <module>', "".join(error["traceback"]))
        record = kernel.execution("grower")
        assert (record["status"], record["interrupt_reason"]) == ("interrupted", "memory")
        assert memory.anonymous_bytes() < kernel.max_cell_memory  # the list went with the cell
        assert kernel.execute("1 + 1", "initial")["output"][0]["data"]["text/plain"] == "2"
    finally:
        kernel.close()


def test_buffers_states_share_copy_on_write_do_not_count():
    """A limit on virtual memory would refuse these branches: each maps the 200 MB array."""
    pytest.importorskip("numpy")
    kernel = SnapshotKernel()
    try:
        ok(kernel, "import numpy as np\na = np.ones(25_000_000)", new_state_name="big")
        ok(kernel, "a.sum()", "big")  # the stored array now lies in shared memory
        kernel.max_cell_memory = memory.anonymous_bytes() + 100_000_000
        for number in range(5):
            reply = ok(kernel, f"a[{number}] = 2\nb = a[:10].copy()\nfloat(a.sum())", "big")
            assert reply["output"][-1]["data"]["text/plain"] == "25000001.0"  # siblings apart
        assert kernel.execute(GROWER, "big")["error"]["ename"] == "MemoryError"
    finally:
        kernel.close()


def test_the_limit_defaults_to_a_share_of_the_machine_or_the_cgroup(tmp_path):
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal:       1000000 kB\nMemFree:  5 kB\n")
    (proc / "self" / "cgroup").write_text("0::/box\n")
    assert memory.available_bytes(str(proc), str(cgroups)) == 1_024_000_000  # no cgroup file
    (cgroups / "box").mkdir(parents=True)
    (cgroups / "box" / "memory.max").write_text("max\n")
    assert memory.available_bytes(str(proc), str(cgroups)) == 1_024_000_000
    (cgroups / "box" / "memory.max").write_text("500000000\n")
    assert memory.available_bytes(str(proc), str(cgroups)) == 500_000_000
    assert memory.default_limit(str(proc), str(cgroups)) == 400_000_000
    assert memory.default_limit(str(tmp_path / "nothing"), str(cgroups)) is None
    assert cli.cell_memory_limit(0) is None and cli.cell_memory_limit(123) == 123
    assert cli.cell_memory_limit(None) == memory.default_limit()
