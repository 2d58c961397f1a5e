"""The redo log of a private state directory (the crash-safe default): states saved before
the process died come back, whatever the log held then, and nothing else does.

The crash is real: a child process builds a tree of states and ends with ``os._exit``,
so the catalogue is never closed and the log never applied at a shutdown; then a
kernel in this process starts on its directory, as the supervisor's next server would.
"""

import errno
import gc
import json
import os
import subprocess
import sys
import time

import pytest

import test_differential as differential
from helpers import ok, printed
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.states import catalogue, redo

TESTS = os.path.dirname(os.path.abspath(__file__))

# Builds a random tree (the differential test's) on a private directory, printing each
# state's path of cells, then dies. ``records`` small: some saves reach the catalogue
# (applied in batches) and the last ones are only in the log.
CHILD = """
import json, os, sys
sys.path.insert(0, {tests!r})
import test_differential as differential
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.states import catalogue
catalogue._LOG_RECORDS = {records}
{before}
kernel = SnapshotKernel(state_dir={directory!r}, private_dir=True)
paths = differential.grow_tree(kernel, {seed})
print(json.dumps(paths), flush=True)
os._exit(0)
"""


def died_after_building(directory, seed, records=5, before=""):
    """The paths of the states a child process built on ``directory`` before it died."""
    code = CHILD.format(tests=TESTS, records=records, directory=directory, seed=seed,
                        before=before)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("seed,records", [(0, 5), (1, 5), (2, 1000)])
def test_every_state_saved_before_the_process_died_is_back_as_it_was(tmp_path, seed,
                                                                      records):
    directory = str(tmp_path / "states")
    paths = died_after_building(directory, seed, records)
    assert any(name.startswith("log-") for name in os.listdir(directory))  # not applied
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    assert kernel.state_names() == list(paths)
    assert not any(name.startswith("log-") for name in os.listdir(directory))
    for name, cells in paths.items():
        expected = differential.replay(cells + [differential.PROBE])
        differential.assert_same(seed, name, cells, printed(kernel, differential.PROBE, name),
                                 expected.stdout)
    ok(kernel, "after_restart = 1", list(paths)[-1], new_state_name="after")
    assert printed(kernel, "print(after_restart)", "after") == "1\n"


# Runs cells on a private directory (which may hold states already), then dies.
CELLS_CHILD = """
import os, time
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.states import catalogue
catalogue._LOG_RECORDS = {records}
kernel = SnapshotKernel(state_dir={directory!r}, private_dir=True)
for code, parent, name in {cells!r}:
    reply = kernel.execute(code, parent, new_state_name=name)
    assert reply["error"] is None, reply
while {settle} and any(name.startswith("log-") for name in os.listdir({directory!r})):
    time.sleep(0.01)  # until the applier has applied and deleted every log file
os._exit(0)
"""


@pytest.mark.parametrize("settle", [False, True], ids=["logs left", "logs applied"])
def test_states_survive_crashes_after_restarts(tmp_path, settle):
    # Each restart applies and deletes the log files it finds. Logs written after it
    # must count as new even if the process died with none left (all applied).
    directory = str(tmp_path / "states")
    for round_ in range(3):
        cells = [(f"r{round_}_{i} = {i}", "initial", f"r{round_}_{i}") for i in range(5)]
        code = CELLS_CHILD.format(directory=directory, cells=cells, settle=settle,
                                  records=1 if settle else 2)
        subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                       check=True)
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    assert kernel.state_names() == ["initial"] + [f"r{round_}_{i}" for round_ in range(3)
                                                  for i in range(5)]
    assert printed(kernel, "print(r2_4)", "r2_4") == "4\n"


def test_a_log_file_applied_just_before_the_crash_is_not_applied_again(tmp_path):
    # The process dies between the transaction that applied a log file and the file's
    # deletion: the next start finds the file, and the catalogue's note that it is in.
    directory = str(tmp_path / "states")
    before = ("import os\n"
              "from snapshot_kernel.states import catalogue\n"
              "def dies(path):\n"
              "    if os.path.basename(path).startswith('log-'):\n"
              "        os._exit(0)\n"
              "    os.unlink(path)\n"
              "catalogue.os = type(os)('os_dying_at_unlink')\n"
              "catalogue.os.__dict__.update(os.__dict__, unlink=dies)\n")
    code = CHILD.format(tests=TESTS, records=3, directory=directory, seed=0, before=before)
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=600, check=False)
    left = sorted(name for name in os.listdir(directory) if name.startswith("log-"))
    assert left  # the file applied, and not deleted
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    names = kernel.state_names()
    assert len(names) == len(set(names)) and "initial" in names
    assert not any(name.startswith("log-") for name in os.listdir(directory))


def test_a_full_disk_fails_the_save_and_stores_nothing(tmp_path, monkeypatch):
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    monkeypatch.setattr(catalogue, "_LOG_RECORDS", 1)  # every save starts a new log file

    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(redo.os, "posix_fallocate", no_space)
    reply = kernel.execute("x = 1", "initial", new_state_name="x")
    assert reply["state_name"] is None
    assert reply["error"]["ename"] == "StoreError"
    assert "No space left on device" in reply["error"]["evalue"]
    assert kernel.state_names() == ["initial"]
    monkeypatch.undo()
    ok(kernel, "y = 2", "initial", new_state_name="y")
    assert printed(kernel, "print(y)", "y") == "2\n"
    names = kernel.state_names()
    assert "x" not in names
    kernel._store.close()  # what the process's end does to the catalogue's lock
    again = SnapshotKernel(state_dir=directory, private_dir=True)
    assert again.state_names() == names
    assert printed(again, "print(y)", "y") == "2\n"


def test_a_failed_save_leaves_no_buffer_file_behind(tmp_path, monkeypatch):
    """A new buffer is written to its blob file as it is stored, before the save; a state
    that is then not stored must take its files with it, not leave them to the next start."""
    pytest.importorskip("numpy")
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    monkeypatch.setattr(catalogue, "_LOG_RECORDS", 1)  # every save starts a new log file
    monkeypatch.setattr(redo.os, "posix_fallocate", _no_space)
    code = "import numpy as np\nbig = np.ones(300_000)\nrows = np.ones((600, 1000))[:, ::2]"
    # here: the reply of kernel.execute can come while its cell thread still holds the state
    assert kernel.execute_here(code, "initial")["error"]["ename"] == "StoreError"
    gc.collect()
    assert os.listdir(os.path.join(directory, "blobs")) == []
    monkeypatch.undo()
    ok(kernel, code, "initial", new_state_name="kept")
    assert len(os.listdir(os.path.join(directory, "blobs"))) == 2  # big, and rows' base
    assert printed(kernel, "print(big.sum(), rows.shape)", "kept") == "300000.0 (600, 500)\n"


def _no_space(fd, offset, length):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_record_cut_short_ends_the_log_and_the_whole_ones_are_read(tmp_path):
    log = redo.RedoLog(str(tmp_path), capacity=4096)
    records = [[("state", (f"s{i}", "x" * 100 * i))] for i in range(1, 30)]
    for rows in records:
        log.append(rows)
    numbers = log.take()
    assert len(numbers) > 1  # records past a file's capacity went to the next file
    read = [rows for number in numbers for rows in redo.read(log.path(number))]
    assert read == [list(rows) for rows in records]
    last = log.path(numbers[-1])
    whole = list(redo.read(last))
    with open(last, "r+b") as file:  # a crash in the middle of copying the last record
        data = file.read()
        end = data.rstrip(b"\0")
        file.seek(len(end) - 10)
        file.write(b"\0" * 10)
    assert list(redo.read(last)) == whole[:-1]


def test_a_record_bigger_than_a_log_file_gets_a_file_of_its_own(tmp_path):
    log = redo.RedoLog(str(tmp_path), capacity=4096)
    big = [("group", (1, b"\x01" * 100_000))]
    log.append([("state", ("a", 1))])
    log.append(big)
    log.append([("state", ("b", 2))])
    numbers = log.take()
    assert [list(redo.read(log.path(number))) for number in numbers] == [
        [[("state", ("a", 1))]], [big], [[("state", ("b", 2))]]]


def test_the_log_goes_to_the_catalogue_once_no_save_comes_for_a_while(tmp_path):
    directory = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=directory, private_dir=True)
    for i in range(5):
        ok(kernel, f"x{i} = {i}", "initial", new_state_name=f"x{i}")

    def logs():
        return [name for name in os.listdir(directory) if name.startswith("log-")]

    assert logs()  # well under the records that make the log full
    deadline = time.monotonic() + 10 * catalogue._IDLE
    while logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert logs() == []
    kernel._store.close()  # the catalogue alone has them now
    assert SnapshotKernel(state_dir=directory, private_dir=True).state_names() == [
        "initial"] + [f"x{i}" for i in range(5)]
