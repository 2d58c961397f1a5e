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
import json, os, threading
from snapshot_kernel.kernel import SnapshotKernel

def rss():
    with open(f"/proc/{os.getpid()}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))

kernel = SnapshotKernel()
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
peak = rss()
for name in names:
    kernel.delete(name)
kernel.reset()
print(json.dumps([before, peak, rss()]))
"""


def test_deleting_states_gives_their_memory_back():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)
    before, peak, after = json.loads(done.stdout)
    assert peak - before > 100 * 2 ** 20  # the states did take memory
    assert after - before < 0.1 * before, (before, peak, after)
