"""Memory comes back: deleting states returns what they held to the system.

Each case runs in a fresh process, as a server runs: its RSS (``VmRSS``) after
the states are deleted is compared with its RSS before they were made."""

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="RSS comes back through glibc's malloc_trim")

# Cells run on threads started after the kernel, as a server's workers are, each
# thread making states of 5 MB of source and 5 MB of data; then all are deleted.
SCRIPT = """
import json, os, sys, tempfile, threading
from snapshot_kernel.kernel import SnapshotKernel

def rss():
    with open(f"/proc/{os.getpid()}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))

options = json.loads(sys.argv[1])
if options:
    options["state_dir"] = tempfile.mkdtemp()
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
def test_deleting_states_gives_their_memory_back(options):
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(options)],
                          capture_output=True, text=True, timeout=120, check=True)
    before, peak, after = json.loads(done.stdout)
    assert peak - before > 100 * 2 ** 20  # the states did take memory
    assert after - before < 0.1 * before, (before, peak, after)
