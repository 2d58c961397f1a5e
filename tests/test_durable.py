"""Durable states (--state-dir): what a restart brings back behaves as before the restart.

Kernel-level: a kernel on a state directory, then a new kernel on the same
directory (what a restart does), checked against replays of each state's path
(the differential test's oracle) and against what the user saw before. The
real-process tests, with SIGKILL, are in test_restart.py.
"""

import os
import sqlite3
import sys
import types

import pytest

import test_differential as differential
from helpers import ok, printed, stdout
from snapshot_kernel.states import persist, reductions
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.states.storage import MAX_DEPTH
from snapshot_kernel.states.store import StoreError


@pytest.fixture
def state_dir(tmp_path):
    return str(tmp_path / "states")


def restarted(state_dir, **options):
    return SnapshotKernel(state_dir=state_dir, **options)


@pytest.mark.parametrize("seed", list(range(8)) + list(range(1000, 1012)))
def test_every_state_equals_a_replay_of_its_path_after_a_restart(state_dir, seed):
    if seed >= 1000:
        pytest.importorskip("pandas")
    writer = differential.DataCellWriter if seed >= 1000 else None
    paths = differential.grow_tree(SnapshotKernel(state_dir=state_dir), seed, writer)
    kernel = restarted(state_dir)
    assert kernel.state_names() == list(paths)
    for name, cells in paths.items():
        expected = differential.replay(cells + [differential.PROBE])
        differential.assert_same(seed, name, cells, printed(kernel, differential.PROBE, name),
                                 expected.stdout)


MIXED = """
import threading, functools
SCALE = 2
class Point:
    def __init__(self, x): self.x = x
    def norm(self): return abs(self.x) * SCALE
def counter():
    n = 0
    def inc():
        nonlocal n
        n += 1
        return n
    return inc
inc = counter(); inc()
pts = [Point(1), Point(-3)]
alias = pts
square = lambda v: v * v * SCALE
@functools.lru_cache
def cube(v): return v ** 3 * SCALE
lock = threading.Lock()
gen = (i for i in range(3))
"""


def test_functions_classes_closures_and_aliases_come_back(state_dir):
    ok(SnapshotKernel(state_dir=state_dir), MIXED, new_state_name="mixed")
    kernel = restarted(state_dir)
    code = ("print(pts[1].norm(), alias is pts, isinstance(pts[0], Point), inc(), square(3), "
            "cube(2))\nSCALE = 10\nprint(pts[1].norm(), square(1), cube(1))")
    assert printed(kernel, code, "mixed") == "6 True True 2 18 16\n30 10 10\n"


def test_a_figure_of_a_pandas_time_series_is_saved_and_comes_back(state_dir):
    # pandas' date locators hold a library function behind functools.cache, which the
    # copier copied into a new cache that pickle could not save by name: it was lost.
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "import pandas as pd\nts = pd.Series(range(24), index=pd.date_range("
            "'2020-01', periods=24, freq='MS'))\nfig, ax = plt.subplots()\nts.plot(ax=ax)\n"
            "plt.close(fig)")
    private = SnapshotKernel(state_dir=os.path.join(state_dir, "private"), private_dir=True)
    assert "lost" not in ok(private, code)  # the crash-safe default's directory
    private.close()
    assert "lost" not in ok(SnapshotKernel(state_dir=state_dir), code, new_state_name="ts")
    kernel = restarted(state_dir)
    assert printed(kernel, "fig.canvas.draw()\nprint(len(fig.axes), "
                           "ax.get_xticklabels()[0].get_text() != '')", "ts") == "1 True\n"


def test_a_directory_saved_before_the_package_had_folders_still_loads(state_dir, monkeypatch):
    """Pickles in older state directories name ``snapshot_kernel.persist``."""
    old = "snapshot_kernel.persist"
    monkeypatch.setitem(sys.modules, old, persist)
    for name, value in vars(persist).items():
        if getattr(value, "__module__", None) == persist.__name__:
            monkeypatch.setattr(value, "__module__", old)
    _pickled_as_if_in(persist, old, monkeypatch)  # (where reductions lived then too)
    ok(SnapshotKernel(state_dir=state_dir), MIXED, new_state_name="mixed")
    with sqlite3.connect(os.path.join(state_dir, "catalog.sqlite")) as catalog:
        saved = b"".join(bytes(row[0]) for row in catalog.execute("SELECT data FROM groups"))
    assert old.encode() in saved and persist.__name__.encode() not in saved
    monkeypatch.undo()
    assert printed(restarted(state_dir), "print(pts[1].norm(), inc(), cube(2))", "mixed") == "6 2 16\n"


# Each of ``reductions.NAMED_IN_PICKLES``: a weak reference, a memoryview, and a closure cell
# still empty when the state is saved.
REDUCED = MIXED + """
import weakref
ref = weakref.ref(pts[0])
view = memoryview(bytearray(b'abc'))[1:]
def outer():
    def read():
        return later
    if False:
        later = 1
    return read
unbound = outer()
"""


def test_a_directory_saved_before_the_reductions_had_a_module_still_loads(state_dir,
                                                                          monkeypatch):
    """Pickles written before ``reductions`` existed name its functions in ``persist``."""
    _pickled_as_if_in(persist, persist.__name__, monkeypatch)
    ok(SnapshotKernel(state_dir=state_dir), REDUCED, new_state_name="reduced")
    with sqlite3.connect(os.path.join(state_dir, "catalog.sqlite")) as catalog:
        saved = b"".join(bytes(row[0]) for row in catalog.execute("SELECT data FROM groups"))
    assert b"_make_function" in saved and b"_EMPTY" in saved and b"_make_weakref" in saved
    assert reductions.__name__.encode() not in saved
    monkeypatch.undo()
    code = ("try:\n    unbound()\nexcept NameError:\n    print('empty')\n"
            "print(pts[1].norm(), inc(), cube(2), ref() is pts[0], bytes(view))")
    assert printed(restarted(state_dir), code, "reduced") == "empty\n6 2 16 True b'bc'\n"


def _pickled_as_if_in(module, module_name, monkeypatch):
    """Make pickles name what ``reductions`` holds as ``module_name`` names ``module``'s."""
    for name in reductions.NAMED_IN_PICKLES:
        value = getattr(reductions, name)
        monkeypatch.setattr(module, name, value, raising=False)
        named = value if isinstance(value, types.FunctionType) else type(value)
        monkeypatch.setattr(named, "__module__", module_name)


def test_what_cannot_be_saved_is_reported_and_fails_clearly_after_a_restart(state_dir):
    reply = ok(SnapshotKernel(state_dir=state_dir), MIXED, new_state_name="mixed")
    assert sorted(reply["lost"]) == ["gen", "lock"]
    assert "_thread.lock" in reply["lost"]["lock"]
    kernel = restarted(state_dir)
    assert sorted(kernel.describe("mixed")["lost"]) == ["gen", "lock"]
    assert "lock" not in kernel.describe("mixed")["variables"]
    failed = kernel.execute("lock.acquire()", "mixed")
    assert failed["error"]["ename"] == "NameError"
    assert "could not be saved, so the restart lost it" in failed["error"]["evalue"]
    assert "cannot pickle '_thread.lock'" in failed["error"]["traceback"][-1]


PARTS = {  # a value that cannot be saved, and a name holding a part of it
    "shared whole": "class C:\n    pass\nc = C()\nc.lock = threading.Lock()\nc.data = [1]",
    "in a dict": "c = {'lock': threading.Lock(), 'data': [1]}",
}


@pytest.mark.parametrize("max_memory", [None, 1], ids=["no budget", "a budget evicting"])
@pytest.mark.parametrize("setup", PARTS.values(), ids=PARTS.keys())
def test_a_name_sharing_with_a_value_that_cannot_be_saved_shares_with_it_until_a_restart(
        state_dir, setup, max_memory):
    part = "c.data" if "class" in setup else "c['data']"
    kernel = SnapshotKernel(state_dir=state_dir, max_memory=max_memory)
    reply = ok(kernel, f"import threading\n{setup}\nalias = {part}", new_state_name="s")
    assert list(reply["lost"]) == ["c"]
    # With a budget, each group loaded evicts the others: but not this one, whose saved
    # objects lack c's (it would come back as an alias of a copy of c's data).
    assert printed(kernel, "other = [0] * 1000\nprint(len(other))", "initial") == "1000\n"
    shown = f"alias.append(2)\nprint(alias is {part}, {part})"
    assert printed(kernel, shown, "s") == "True [1, 2]\n"  # as in one process
    # After a restart, the name is what was saved of it, the value gone as it says.
    assert printed(restarted(state_dir), "print(alias, 'c' in dir())", "s") == "[1] False\n"


def test_a_value_whose_pickling_raises_anything_is_lost_not_a_failed_request(state_dir):
    """A ``multiprocessing.Queue`` refuses pickling with RuntimeError, which the store
    once let through: the request got a 500, the state was never made, and the deadlines
    thread died on the closed connection. Any exception a value's ``__getstate__`` or
    ``__reduce__`` raises makes that one name lost; the others, and the state, are kept."""
    kernel = SnapshotKernel(state_dir=state_dir)
    reply = ok(kernel, "import multiprocessing as mp\nq = mp.Queue()\nq.put(7)\n"
                       "class Odd:\n    def __reduce__(self): raise KeyError('mine')\n"
                       "odd = Odd()\nkept = [1, 2]", new_state_name="queue")
    assert sorted(reply["lost"]) == ["odd", "q"]
    assert reply["lost"]["q"].startswith("RuntimeError: Queue objects should only be shared")
    assert reply["lost"]["odd"] == "KeyError: 'mine'"
    assert printed(kernel, "print(q.get(timeout=5), kept)", "queue") == "7 [1, 2]\n"
    assert printed(restarted(state_dir), "print(kept, 'q' in dir())", "queue") == "[1, 2] False\n"


def test_a_reply_lists_the_lost_names_a_child_inherits_as_its_description_does(state_dir):
    """A state's ``lost`` is every name of it that could not be saved, not only those its
    own cell set: before, a child of a state holding a lock replied ``lost`` empty."""
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "import threading\nlock = threading.Lock()\ngen = (i for i in [1])",
       new_state_name="parent")
    child = ok(kernel, "x = 1", "parent", new_state_name="child")
    assert sorted(child["lost"]) == ["gen", "lock"]
    assert child["lost"] == kernel.describe("child")["lost"]
    same = ok(kernel, "len('nothing changes')", "child", new_state_name="same")
    assert same["lost"] == kernel.describe("same")["lost"] == child["lost"]
    fewer = ok(kernel, "del lock\ngen = 1", "child", new_state_name="fewer")
    assert "lost" not in fewer and kernel.describe("fewer")["lost"] == {}
    again = ok(kernel, "lock = threading.Lock()", "fewer", new_state_name="again")
    assert sorted(again["lost"]) == ["lock"] == sorted(kernel.describe("again")["lost"])
    assert sorted(ok(restarted(state_dir), "y = 2", "child")["lost"]) == ["gen", "lock"]


def test_arrays_views_and_frames_come_back_from_blob_files(state_dir):
    pytest.importorskip("pandas")
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "import numpy as np, pandas as pd\na = np.arange(10 ** 6) * 1.0\nv = a[10:20]\n"
               "df = pd.DataFrame({'x': a, 'o': [[i] for i in range(10 ** 3)] * 1000})",
       new_state_name="data")
    ok(kernel, "a[0] = -1\ndf.loc[0, 'o'].append(5)", "data", new_state_name="changed")
    kernel = restarted(state_dir)
    code = "print(a[0], a[15], v.base is a, v[5], df.loc[0, 'o'], df.x.iloc[1])"
    assert printed(kernel, code, "data") == "0.0 15.0 True 15.0 [0] 1.0\n"
    assert printed(kernel, code, "changed") == "-1.0 15.0 True 15.0 [0, 5] 1.0\n"


def test_text_columns_come_back_whole_and_each_state_its_own(state_dir):
    """An object array of strings and numbers is saved as a pickle of its own, without the
    state pickler's per-element hooks (``persist._reduce_plain_objects``), and a view of
    one comes back a view of it (it came back a copy, and so did a view copied in)."""
    pytest.importorskip("pandas")
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "import numpy as np, pandas as pd\n"
               "df = pd.DataFrame({'n': range(6), 'word': ['a', 'b', None, 'a', 'c', 'b']},"
               " dtype=object)\ncol = df['word']\n"
               "plain = np.array(['x', 2, 2.5, None, b'y', True], dtype=object)\n"
               "tail = plain[3:]\n"
               "grid = np.asfortranarray(np.array([['p', 'q'], ['r', 's']], dtype=object))",
       new_state_name="text")
    ok(kernel, "df.loc[1, 'word'] = 'changed'\nplain[0] = 'z'\ngrid[0, 1] = 9\ntail[1] = 'w'",
       "text", new_state_name="changed")
    code = ("print(df['word'].tolist(), col.tolist(), df.dtypes.tolist(), plain.tolist(),"
            " [type(x).__name__ for x in plain], grid.tolist(), grid.flags.f_contiguous,"
            " tail.base is plain)")
    before = {name: printed(kernel, code, name) for name in ("text", "changed")}
    assert "'changed'" in before["changed"] and "'changed'" not in before["text"]
    assert "'w', True] [" in before["changed"] and before["text"].endswith("True\n")
    kernel = restarted(state_dir)
    assert {name: printed(kernel, code, name) for name in ("text", "changed")} == before


def test_an_object_array_holding_its_own_view_comes_back_as_it_was(state_dir):
    """numpy's pickle makes an object array empty and gives it memory once its elements are
    loaded: a view among them, made over the empty array, would have pointed at freed
    memory (a first version of saving views crashed the process so). The array is now
    made with its memory first, then filled."""
    pytest.importorskip("numpy")
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "import numpy as np\nx = np.empty(3, dtype=object)\nx[0] = [1]\nr = x[::-1]\n"
               "x[1] = r\nx[2] = x\nf = np.asfortranarray(np.empty((2, 2), dtype=object))\n"
               "f[0, 0] = f[:, 1]\nf[1, 1] = 's'\nf.flags.writeable = False",
       new_state_name="own")
    code = ("print(x[1] is r, r.base is x, x[2] is x, r[2], f[0, 0].base is f, f[0, 0][1],"
            " f.flags.writeable, f.flags.f_contiguous)")
    assert printed(kernel, code, "own") == "True True True [1] True s False True\n"
    assert printed(restarted(state_dir), code, "own") == "True True True [1] True s False True\n"


VIEWS = ("import numpy as np\na = np.arange(64_000.0)\nrows = list(a.reshape(500, 128))\n"
         "pairs = list(zip(rows, range(500)))")
CHECK_VIEWS = ("print(all(r.base is rows[0].base for r in rows), np.shares_memory(rows[3], a),"
               " rows[7][1], pairs[9][0] is rows[9])")


def test_many_views_of_one_array_save_its_bytes_once_and_come_back_as_views(state_dir):
    """Each view's reference once held its base's bytes again: 500 rows of a 512 KB array
    took 256 MB of disk (and time to match)."""
    pytest.importorskip("numpy")
    ok(SnapshotKernel(state_dir=state_dir), VIEWS, new_state_name="views")
    with sqlite3.connect(os.path.join(state_dir, "catalog.sqlite")) as catalog:
        saved = catalog.execute("SELECT sum(length(data)) FROM groups").fetchone()[0]
    assert saved < 2 * 64_000 * 8
    assert printed(restarted(state_dir), CHECK_VIEWS, "views") == "True True 897.0 True\n"


def test_the_tree_and_its_metadata_come_back(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "x = 1", new_state_name="one")
    ok(kernel, "y = x + 1", "one", new_state_name="two")
    ok(kernel, "checkpoint(progress='half')\nz = 3", "two", new_state_name="three")
    before = {name: kernel.describe(name) for name in kernel.state_names()}
    kernel = restarted(state_dir)
    after = {name: kernel.describe(name) for name in kernel.state_names()}
    assert after == before
    assert after["three@1"]["checkpoint"] is True and after["three@1"]["progress"] == "half"


def test_children_made_after_a_restart_count_shared_bytes_as_before(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "a = list(range(10_000))\nb = a\nc = list(range(5_000))", new_state_name="base")
    ok(kernel, "a = 1\nb = 2", "base", new_state_name="before")  # a and b: one group
    kernel = restarted(state_dir)
    ok(kernel, "a = 1\nb = 2", "base", new_state_name="after")
    before, after = ({key: kernel.describe(name)[key] for key in ("approx_bytes", "shared_bytes")}
                     for name in ("before", "after"))
    assert after == before and before["shared_bytes"] > 40_000  # c's list is still shared


def test_a_restart_makes_one_entry_for_a_name_however_many_layers_repeat_it(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "data = list(range(1000))\nn = 0", new_state_name="c0")
    chain = 3 * MAX_DEPTH  # flattened layers repeat the entry of `data`, as in memory
    for i in range(1, chain):
        ok(kernel, "n += 1", f"c{i - 1}", new_state_name=f"c{i}")
    kernel = restarted(state_dir)
    assert len({id(kernel._states[f"c{i}"].names.get("data")) for i in range(chain)}) == 1
    assert printed(kernel, "print(n, len(data))", f"c{chain - 1}") == f"{chain - 1} 1000\n"


def test_deleting_and_resetting_free_their_disk_space(state_dir):
    np = pytest.importorskip("numpy")
    kernel = SnapshotKernel(state_dir=state_dir)
    blobs = os.path.join(state_dir, "blobs")
    ok(kernel, "import numpy as np\nbig = np.ones(10 ** 6)", new_state_name="big")
    ok(kernel, "big[0] = 2", "big", new_state_name="child")
    ok(kernel, "other = np.zeros(10 ** 6)", "big", new_state_name="other")
    assert len(os.listdir(blobs)) == 2
    kernel.delete("other")
    assert len(os.listdir(blobs)) == 1
    kernel.delete("big")  # its child still uses its buffer
    assert len(os.listdir(blobs)) == 1
    assert printed(restarted(state_dir), "print(big[:2])", "child") == "[2. 1.]\n"
    kernel = restarted(state_dir)
    kernel.reset()
    assert os.listdir(blobs) == [] and restarted(state_dir).state_names() == ["initial"]
    assert np is not None


def test_deleted_states_whose_cells_changed_nothing_stay_deleted_after_a_restart(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, "x = 1", new_state_name="base")
    ok(kernel, "print(x)", "base", new_state_name="same")  # holds base's very names
    ok(kernel, "pass", "same", new_state_name="again")
    kernel.delete("same")
    kernel.delete("base")  # `again` still holds its names
    kernel = restarted(state_dir)
    assert kernel.state_names() == ["initial", "again"]
    assert printed(kernel, "print(x)", "again") == "1\n"


def test_a_memory_budget_drops_values_and_loads_them_back(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir, max_memory=2_000_000)
    for i in range(10):
        ok(kernel, f"data{i} = list(range(20_000))", new_state_name=f"s{i}")
    for i in range(10):
        assert printed(kernel, f"print(sum(data{i}))", f"s{i}") == f"{sum(range(20_000))}\n"
    assert kernel._store.budget.bytes <= 2_000_000  # 10 lists of 0.7 MB were loaded in turn


def test_a_cell_that_only_reads_stores_nothing_though_the_budget_reloads_what_it_read(
        state_dir):
    ok(SnapshotKernel(state_dir=state_dir), "data = [[i] for i in range(20_000)]",
       new_state_name="data")
    kernel = restarted(state_dir, max_memory=1)  # each group loaded drops the one before
    catalogue = os.path.join(state_dir, "catalog.sqlite")
    with sqlite3.connect(catalogue) as db:
        before = db.execute("SELECT count(*), sum(length(data)) FROM groups").fetchone()
    reply = ok(kernel, "print(len(data), __name__)", "data")
    assert stdout(reply) == "20000 __main__\n"
    assert kernel.describe(reply["state_name"])["approx_bytes"] == 0
    with sqlite3.connect(catalogue) as db:
        assert db.execute("SELECT count(*), sum(length(data)) FROM groups").fetchone() == before


def test_a_group_read_in_part_keeps_what_it_read_though_the_budget_reloads_it(state_dir):
    """A cell copies in ``a`` without ``big``, with which it shares ``s``; changing ``s``
    copies ``big`` in at the end, from the objects read with ``a``: the record the budget
    dropped meanwhile (to load ``other``) comes back as new objects."""
    ok(SnapshotKernel(state_dir=state_dir),
       "s = [1]\na = {'s': s}\nbig = [list(range(1000)), s]\nother = [2]\ndel s",
       new_state_name="shared")
    kernel = restarted(state_dir, max_memory=1)  # each group loaded drops the one before
    child = ok(kernel, "a['s'].append(other[0])", "shared")["state_name"]
    code = "print(a['s'] is big[1], big[1], len(big[0]))"
    assert printed(kernel, code, child) == "True [1, 2] 1000\n"
    assert printed(kernel, code, "shared") == "True [1] 1000\n"


DAMAGE = {"overwritten": lambda path: open(path, "r+b").write(b"garbage" * 100),
          "truncated": lambda path: os.truncate(path, os.path.getsize(path) // 2)}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_catalogue_is_refused_at_start(state_dir, damage):
    kernel = SnapshotKernel(state_dir=state_dir)
    for i in range(30):
        ok(kernel, f"x{i} = list(range({i} * 100))")
    kernel._store.close()  # the log folded into the catalogue, as at a clean stop
    damage(os.path.join(state_dir, "catalog.sqlite"))
    with pytest.raises(StoreError, match="cannot be read|damaged"):
        restarted(state_dir)


def test_a_truncated_blob_is_refused_at_start(state_dir):
    pytest.importorskip("numpy")
    ok(SnapshotKernel(state_dir=state_dir), "import numpy as np\nbig = np.ones(10 ** 6)")
    blobs = os.path.join(state_dir, "blobs")
    [name] = os.listdir(blobs)
    path = os.path.join(blobs, name)
    os.chmod(path, 0o644)
    os.truncate(path, 1000)
    with pytest.raises(StoreError, match="missing or truncated"):
        restarted(state_dir)


def test_a_state_directory_of_another_python_is_refused(state_dir):
    ok(SnapshotKernel(state_dir=state_dir), "x = 1")
    with sqlite3.connect(os.path.join(state_dir, "catalog.sqlite")) as db:
        db.execute("UPDATE meta SET value = 'snapshot-kernel-1 cpython-2.7' WHERE key = 'format'")
    with pytest.raises(StoreError, match="cpython-2.7"):
        restarted(state_dir)
    assert persist.FORMAT.startswith("snapshot-kernel-1 cpython-3.")


def test_a_cell_running_when_the_server_stopped_is_reported_after(state_dir):
    kernel = SnapshotKernel(state_dir=state_dir)
    kernel._store.running("job", {"exec_id": "job", "state_name": "initial",
                                  "new_state_name": "out", "timeout": 600,
                                  "progress": "3/10", "checkpoints": [
                                      {"state_name": "out@1", "progress": "3/10",
                                       "timestamp": "t"}]})
    kernel = restarted(state_dir)
    report = kernel.execution("job")
    assert report["status"] == "interrupted" and report["interrupt_reason"] == "restart"
    assert report["reply"]["error"]["ename"] == "KernelRestart"
    assert "'out@1'" in report["reply"]["error"]["evalue"]
    assert stdout(kernel.execute("print(1)", "initial")) == "1\n"


def test_a_full_catalogue_fails_the_save_saying_so_and_stores_nothing(state_dir):
    # How CI saw it: SQLite rolls a full transaction back itself, and the ROLLBACK after
    # it answered "cannot rollback - no transaction is active" in place of why.
    kernel = SnapshotKernel(state_dir=state_dir)
    catalogue = kernel._store._catalogue.db
    pages = catalogue.execute("PRAGMA page_count").fetchone()[0]
    catalogue.execute(f"PRAGMA max_page_count = {pages + 2}")  # its disk full
    reply = kernel.execute("y = 'a' * 100_000", "initial", new_state_name="y")
    assert reply["state_name"] is None and reply["error"]["ename"] == "StoreError"
    assert "database or disk is full" in reply["error"]["evalue"]
    assert "server log" not in reply["error"]["evalue"]  # no bug of ours: room is wanted
    assert kernel.state_names() == ["initial"]
    catalogue.execute("PRAGMA max_page_count = 1073741823")  # room again
    ok(kernel, "z = 2", "initial", new_state_name="z")
    kernel.close()
    again = restarted(state_dir)
    assert again.state_names() == ["initial", "z"]
    assert printed(again, "print(z)", "z") == "2\n"
