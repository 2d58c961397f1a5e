"""Large numpy buffers are kept copy-on-write: what a branch stores follows what it wrote.

These run on kernels whose buffers are copy-on-write from 0 bytes up, so small
arrays take the path large ones take, and on one with the default threshold
and an 8 MB array. ``approx_bytes`` is what a user sees of the cost.
"""

import gc
import os
import subprocess
import sys
import threading
import time

import pytest

from helpers import WAIT, ok, printed, stdout
from snapshot_kernel.states import blobfiles, cow
from snapshot_kernel.kernel import SnapshotKernel

np = pytest.importorskip("numpy")
PAGES = 256  # the test arrays span this many pages
pytestmark = pytest.mark.skipif(cow.Buffers.probe() is None,
                                reason="no memfd, seals or pagemap on this machine")


@pytest.fixture
def cowk():
    return SnapshotKernel(copy_on_write=0)


def make(kernel, extra=""):
    code = f"import numpy as np\na = np.arange({PAGES * cow.PAGE // 8}, dtype=np.int64)\n" + extra
    return ok(kernel, code)["state_name"]


def added(kernel, state):
    return kernel.describe(state)["approx_bytes"]


def test_a_cell_that_only_reads_a_buffer_stores_nothing_for_it(cowk):
    parent = make(cowk)
    child = ok(cowk, "total = int(a.sum())", parent)["state_name"]
    assert added(cowk, child) < 100
    assert printed(cowk, "print(total == a.sum(), a[-1])", child) == f"True {PAGES * 512 - 1}\n"


def test_writing_one_element_stores_about_one_page(cowk):
    parent = make(cowk)
    child = ok(cowk, "a[1000] = -1", parent)["state_name"]
    assert cow.PAGE <= added(cowk, child) < 2 * cow.PAGE + 1000
    assert printed(cowk, "print(a[1000], a[999], a[1001])", child) == "-1 999 1001\n"
    assert printed(cowk, "print(a[1000])", parent) == "1000\n"


def test_branches_writing_the_same_buffer_never_see_each_other(cowk):
    parent = make(cowk)
    left = ok(cowk, "a[0] = -1", parent)["state_name"]
    right = ok(cowk, "a[0] = -2\na[-1] = -2", parent)["state_name"]
    grand = ok(cowk, "a[5000] = -3", left)["state_name"]
    shown = "print(a[0], a[5000], a[-1])"
    last = PAGES * 512 - 1
    assert printed(cowk, shown, parent) == f"0 5000 {last}\n"
    assert printed(cowk, shown, left) == f"-1 5000 {last}\n"
    assert printed(cowk, shown, right) == "-2 5000 -2\n"
    assert printed(cowk, shown, grand) == f"-1 -3 {last}\n"


def test_a_branch_rewriting_most_of_a_buffer_gets_a_buffer_of_its_own(cowk):
    parent = make(cowk)
    child = ok(cowk, "a[:] = 7", parent)["state_name"]
    assert added(cowk, child) >= PAGES * cow.PAGE
    again = ok(cowk, "a[0] = 8", child)["state_name"]
    assert printed(cowk, "print(a[:3], a[-1])", again) == "[8 7 7] 7\n"
    assert printed(cowk, "print(a[:3])", parent) == "[0 1 2]\n"


def test_rewriting_a_page_with_its_own_contents_still_reads_right(cowk):
    parent = make(cowk)
    child = ok(cowk, "a[10] = 10", parent)["state_name"]
    assert printed(cowk, "print(a[8:12])", child) == "[ 8  9 10 11]\n"


def test_views_of_a_mapped_buffer_stay_views(cowk):
    parent = make(cowk, "v = a[10:20]\nw = a[::-512]")
    child = ok(cowk, "v[0] = -5\nw[0] = -6", parent)["state_name"]
    code = "print(a[10], a[-1], v.base is a, w.base is a, np.shares_memory(v, a))"
    assert printed(cowk, code, child) == "-5 -6 True True True\n"
    assert printed(cowk, "print(a[10], a[-1])", parent) == f"10 {PAGES * 512 - 1}\n"


def test_a_thread_writing_after_its_cell_ended_changes_no_state(cowk, signal_name):
    parent = make(cowk)
    code = (f"import threading, helpers\ndef later():\n"
            f"    helpers.{signal_name}.wait({WAIT})\n    a[:] = -9\n"
            "t = threading.Thread(target=later)\nt.start()")
    child = ok(cowk, code, parent)["state_name"]
    import helpers
    getattr(helpers, signal_name).set()
    ok(cowk, "t.join()", child)
    assert printed(cowk, "print(a[:2], a[-1])", child) == f"[0 1] {PAGES * 512 - 1}\n"


def test_reading_again_and_then_writing_leaves_the_parent_alone(cowk):
    parent = make(cowk)
    for _ in range(3):  # the second and third cells get the first one's unwritten mapping
        ok(cowk, "s = int(a.sum())", parent)
    child = ok(cowk, "a[0] = 123", parent)["state_name"]
    assert printed(cowk, "print(a[0])", child) == "123\n"
    assert printed(cowk, "print(a[0])", parent) == "0\n"


def test_frames_store_only_their_new_columns(pandas_big):
    kernel, parent = pandas_big
    child = ok(kernel, "shape = df.shape\nmean = df['c0'].mean()", parent)["state_name"]
    assert added(kernel, child) < 5000
    wider = ok(kernel, "df['new'] = 1", parent)["state_name"]
    assert 8 * 10 ** 6 <= added(kernel, wider) < 8 * 10 ** 6 + 50_000
    assert printed(kernel, "print(df.columns.tolist()[-1])", wider) == "new\n"
    assert printed(kernel, "print(df.columns.tolist())", parent) == "['c0', 'c1']\n"


@pytest.fixture
def pandas_big():
    pytest.importorskip("pandas")
    kernel = SnapshotKernel()  # the default threshold: these blocks are 16 MB
    code = ("import numpy as np, pandas as pd\nrng = np.random.default_rng(0)\n"
            "df = pd.DataFrame({'c0': rng.random(10 ** 6), 'c1': rng.random(10 ** 6)})")
    return kernel, ok(kernel, code)["state_name"]


def memfds():
    """The inodes of the kernels' memfds open in this process (other tests' kernels,
    freed whenever the collector gets to them, may hold some)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:snapshot-kernel"):
                found.add(os.stat(f"/proc/self/fd/{fd}").st_ino)
        except OSError:  # the fd closed while we looked
            pass
    return found


def test_deleting_states_frees_their_buffers(cowk):
    gc.collect()
    before = memfds()
    parent = make(cowk)
    children = [ok(cowk, f"a[{i * 4096}] = -1", parent)["state_name"] for i in range(5)]
    made = memfds() - before
    assert made
    for name in children + [parent]:
        cowk.delete(name)
    gc.collect()
    assert not memfds() & made


FORKED = """
import gc, os, sys
from snapshot_kernel.states import cow
blob = cow.Blob.unnamed(b"x" * 4096, sys.argv[1])
child = os.fork()
if child == 0:  # a process a cell forked, ending as Python ends: its finalizers run
    del blob
    gc.collect()
    sys.exit(0)
os.waitpid(child, 0)
print(os.path.exists(blob.path), end=" ")
path = blob.path
del blob
gc.collect()
print(os.path.exists(path))
"""


def test_a_buffer_file_not_yet_saved_goes_with_its_blob_but_not_with_a_forked_child(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORKED, str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == "True False\n", done.stderr


def test_copy_on_write_falls_back_to_copies_where_the_machine_cannot(monkeypatch):
    monkeypatch.setattr(cow._pagemap, "read", lambda *args: (_ for _ in ()).throw(OSError()))
    assert cow.Buffers.probe() is None
    kernel = SnapshotKernel(copy_on_write=0)
    assert kernel.buffers is None
    parent = make(kernel)
    child = ok(kernel, "a[0] = -1", parent)["state_name"]
    assert stdout(ok(kernel, "print(a[0])", parent)) == "0\n"
    assert stdout(ok(kernel, "print(a[0])", child)) == "-1\n"


def test_concurrent_cells_on_one_buffer(cowk):
    parent = make(cowk)
    replies = _at_once(cowk, lambda i: f"a[{i}] = -{i}\nprint(int((a < 0).sum()))", parent)
    assert all(stdout(reply) == "1\n" for reply in replies.values())
    assert printed(cowk, "print(int((a < 0).sum()))", parent) == "0\n"


def _at_once(kernel, code, state):
    """``{i: reply}`` of the cells ``code(i)`` for i from 1 to 6, run at once on
    ``state``, each of which must succeed."""
    replies, errors = {}, []

    def run(i):
        try:
            replies[i] = ok(kernel, code(i), state)
        except AssertionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not errors and len(replies) == 6
    return replies


BEHIND = ("import hashlib, numpy as np\nrng = np.random.default_rng(0)\n"
          "a = rng.random(1_000_000)\nb = np.arange(700_000)\nc = a[a > 0.25]\n"
          "digests = [hashlib.sha256(x.tobytes()).hexdigest() for x in (a, b, c)]")
SAME_DIGESTS = ("import hashlib\n"
                "print([hashlib.sha256(x.tobytes()).hexdigest() for x in (a, b, c)] == digests)")


def test_new_buffers_written_behind_hold_their_bytes_now_and_after_a_restart(
        tmp_path, monkeypatch):
    # Buffers of 4 MB and more are written to their files on threads of their own while
    # the copy goes on (``cow.Buffers.new``): three here, two of them side by side.
    directory = str(tmp_path / "states")
    writers = []
    run = blobfiles.Writer.run
    monkeypatch.setattr(blobfiles.Writer, "run", lambda self: (writers.append(self), run(self)))
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    state = ok(kernel, BEHIND)["state_name"]
    assert len(writers) == 3
    assert printed(kernel, SAME_DIGESTS, state) == "True\n"
    child = ok(kernel, "a[0] = -1.0\nd = a * 2", state)["state_name"]
    assert printed(kernel, "print(a[0], d[0], d[1] == 2 * a[1])", child) == "-1.0 -2.0 True\n"
    assert printed(kernel, SAME_DIGESTS, state) == "True\n"  # the parent's bytes as they were
    blobs = os.listdir(os.path.join(directory, "blobs"))
    assert blobs and not [name for name in blobs if not name.endswith(".bin")]
    kernel._store.close()  # what the process's end does to the catalogue's lock
    again = SnapshotKernel(state_dir=directory, private_dir=True)
    assert printed(again, SAME_DIGESTS, state) == "True\n"
    assert printed(again, "print(a[0], d[0], d[1] == 2 * a[1])", child) == "-1.0 -2.0 True\n"


def test_a_buffer_whose_write_behind_fails_stores_nothing_and_leaves_no_file(
        tmp_path, monkeypatch):
    import errno
    write_at = blobfiles.write_at

    def full(fd, chunk, offset):  # the disk fills up while the 8 MB buffer is written
        if memoryview(chunk).nbytes >= cow.BEHIND:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_at(fd, chunk, offset)

    error = _fails_leaving_no_file(tmp_path, monkeypatch, blobfiles, "write_at", full)
    assert error["ename"] == "OSError"
    assert "No space left on device" in error["evalue"]


def test_an_interrupt_before_a_buffer_written_behind_is_named_leaves_no_file(
        tmp_path, monkeypatch):
    replace = os.replace

    def interrupted(source, target):  # lands as the copy names the file it wrote behind
        if source.endswith(".bin.tmp"):
            raise KeyboardInterrupt
        return replace(source, target)

    error = _fails_leaving_no_file(tmp_path, monkeypatch, blobfiles.os, "replace", interrupted)
    assert error["ename"] == "KeyboardInterrupt"


def _fails_leaving_no_file(tmp_path, monkeypatch, where, name, stand_in):
    """The error of a cell making an 8 MB buffer while ``where.name`` is ``stand_in``,
    having checked that it stored nothing and left no blob file, and that the same cell
    stores once ``where.name`` is itself again."""
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    code = "import numpy as np\nbig = np.ones(1_000_000)\nsmall = np.ones(200_000)"
    monkeypatch.setattr(where, name, stand_in)
    reply = kernel.execute_here(code, "initial")
    monkeypatch.undo()
    assert reply["state_name"] is None
    assert kernel.state_names() == ["initial"]
    gc.collect()
    assert os.listdir(os.path.join(directory, "blobs")) == []
    state = ok(kernel, code)["state_name"]
    assert printed(kernel, "print(big.sum(), small.sum())", state) == "1000000.0 200000.0\n"
    return reply["error"]


def _reserved(kernel, directory, size):
    """The paths of the files allocated ahead in a state directory, once they hold
    ``size`` bytes (a thread of their own allocates them, as a copy ends)."""
    deadline = time.monotonic() + WAIT
    while kernel.buffers.reserve.size != size and time.monotonic() < deadline:
        time.sleep(0.01)
    reserve = os.path.join(directory, "reserve")
    return sorted(os.path.join(reserve, name) for name in os.listdir(reserve))


def test_a_new_buffer_is_written_into_a_file_allocated_ahead_for_its_size(tmp_path):
    # Writing into pages allocated ahead is a copy; into a new file, an allocation too.
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    state = ok(kernel, "import numpy as np\nbig = np.full(1_000_000, 2.0)")["state_name"]
    [reserved] = _reserved(kernel, directory, 8_000_000)  # for the 8 MB the cell wrote
    assert os.path.getsize(reserved) == 8_000_000
    blobs = os.path.join(directory, "blobs")
    inode, before = os.stat(reserved).st_ino, set(os.listdir(blobs))
    child = ok(kernel, "twice = big * 2", state)["state_name"]
    [new] = set(os.listdir(blobs)) - before
    assert os.stat(os.path.join(blobs, new)).st_ino == inode
    assert not os.path.exists(reserved)
    assert printed(kernel, "print(twice.sum(), big.sum())", child) == "4000000.0 2000000.0\n"
    assert len(_reserved(kernel, directory, 8_000_000)) == 1  # again, for the next
    kernel._store.close()  # what the process's end does to the catalogue's lock
    again = SnapshotKernel(state_dir=directory, private_dir=True)
    assert _reserved(again, directory, 0) == []  # a crash's are swept at start
    assert printed(again, "print(twice.sum(), big.sum())", child) == "4000000.0 2000000.0\n"


def test_branches_storing_new_buffers_at_once_each_get_a_file_of_their_own(tmp_path):
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    state = ok(kernel, "import numpy as np\nx = np.zeros(1_000_000)")["state_name"]
    _reserved(kernel, directory, 8_000_000)  # one file for six buffers of its size
    replies = _at_once(kernel, lambda i: f"x = np.full(1_000_000, {i}.0)", state)
    children = {i: reply["state_name"] for i, reply in replies.items()}
    for i, child in children.items():
        assert printed(kernel, "print(x.min(), x.max())", child) == f"{i}.0 {i}.0\n"
    kernel._store.close()  # what the process's end does to the catalogue's lock
    again = SnapshotKernel(state_dir=directory, private_dir=True)
    for i, child in children.items():
        assert printed(again, "print(x.min(), x.max())", child) == f"{i}.0 {i}.0\n"
    assert printed(again, "print(x.max())", state) == "0.0\n"


def test_files_allocated_ahead_go_with_a_reset_and_a_shutdown(tmp_path):
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    cell = "import numpy as np\nbig = np.ones(600_000)\nsmall = np.ones(200_000)"
    ok(kernel, cell)
    assert len(_reserved(kernel, directory, 6_400_000)) == 2  # 4.8 MB (behind), 1.6 MB
    kernel.reset()
    assert _reserved(kernel, directory, 0) == []
    assert kernel.buffers.reserve.size == 0  # and their memory: no file is open
    ok(kernel, cell)
    assert len(_reserved(kernel, directory, 6_400_000)) == 2
    kernel.shutdown()
    assert _reserved(kernel, directory, 0) == []
    assert "snapshot-kernel-reserve" not in [thread.name for thread in threading.enumerate()]


def test_a_buffer_is_written_as_before_where_files_cannot_be_allocated_ahead(
        tmp_path, monkeypatch):
    import errno

    allocate = os.posix_fallocate

    def full(fd, offset, size):  # for files allocated ahead (the redo log is, too)
        if "/reserve-" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return allocate(fd, offset, size)

    monkeypatch.setattr(blobfiles.os, "posix_fallocate", full)
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    state = ok(kernel, "import numpy as np\nbig = np.full(1_000_000, 2.0)")["state_name"]
    child = ok(kernel, "twice = big * 2", state)["state_name"]
    assert printed(kernel, "print(twice.sum(), big.sum())", child) == "4000000.0 2000000.0\n"
    assert kernel.buffers.reserve.size == 0
    assert [name for name in os.listdir(os.path.join(directory, "blobs"))
            if not name.endswith(".bin")] == []
    assert os.listdir(os.path.join(directory, "reserve")) == []


def test_a_file_allocated_ahead_is_taken_for_sizes_up_to_it_and_down_to_half(tmp_path):
    page, target = cow.PAGE, str(tmp_path / "taken")
    reserve = blobfiles.Reserve(str(tmp_path))
    assert reserve.take(target, 4 * page) is None  # none yet: one is asked for
    _allocated(reserve, 4 * page)
    assert reserve.take(target, 4 * page + 1) is None  # too small
    assert reserve.take(target, 2 * page - 1) is None  # more than twice as big: kept
    fd = reserve.take(target, 3 * page)
    try:
        assert os.fstat(fd).st_size == 3 * page == os.path.getsize(target)
    finally:
        os.close(fd)
    assert reserve.size == 0
    _allocated(reserve, (4 * page + 1) + (2 * page - 1) + 3 * page)  # the three asked for
    reserve.clear()
    assert os.listdir(tmp_path) == ["taken"]


def test_a_file_allocated_ahead_that_cannot_be_taken_is_given_back(tmp_path, monkeypatch):
    import errno
    page, target = cow.PAGE, str(tmp_path / "taken")
    reserve = blobfiles.Reserve(str(tmp_path))
    assert reserve.take(target, page) is None
    _allocated(reserve, page)

    def elsewhere(source, destination):  # the reserve on a file system of its own
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(blobfiles.os, "rename", elsewhere)
    assert reserve.take(target, page) is None  # the caller makes a file of its own
    assert reserve.size == 0 and os.listdir(tmp_path) == []


def test_files_allocated_ahead_past_their_cap_go_oldest_first(tmp_path):
    page, target = cow.PAGE, str(tmp_path / "taken")
    reserve = blobfiles.Reserve(str(tmp_path), cap=5 * page)
    for size in (2 * page, 3 * page, 4 * page):
        assert reserve.take(target, size) is None
    _allocated(reserve, 4 * page)  # 2 + 3 = 5 pages, then 9: the 2 and the 3 go
    deadline = time.monotonic() + WAIT  # (their files are removed outside the lock)
    while len(os.listdir(tmp_path)) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [os.path.getsize(tmp_path / name) for name in os.listdir(tmp_path)] == [4 * page]
    os.close(reserve.take(target, 2 * page))
    assert reserve.size == 0
    assert reserve.take(target + "-big", 6 * page) is None  # over the cap: never asked for
    _allocated(reserve, 2 * page)


FORKED_RESERVE = """
import os, sys, time
from snapshot_kernel.states import blobfiles
reserve = blobfiles.Reserve(sys.argv[1])
reserve.take(os.path.join(sys.argv[1], "x"), 4096)
reserve.refill()
while reserve.size == 0:
    time.sleep(0.01)
child = os.fork()
if child == 0:  # a process a cell forked must not take, or give back, the server's file
    os._exit(reserve.take(os.path.join(sys.argv[1], "y"), 4096) is None
             and (reserve.clear() or True) and 7)
print(os.waitpid(child, 0)[1] >> 8, reserve.size, len(os.listdir(sys.argv[1])))
"""


def test_a_forked_child_neither_takes_nor_gives_back_the_files_allocated_ahead(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORKED_RESERVE, str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "7 4096 1\n", done.stderr


def _allocated(reserve, size):
    """Wait until ``reserve`` holds ``size`` bytes, what ``take`` asked for allocated."""
    reserve.refill()
    deadline = time.monotonic() + WAIT
    while reserve.size != size and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reserve.size == size
