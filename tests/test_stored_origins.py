"""A value a cell only read is stored as it was: the state it makes holds the very objects
its parent holds, not copies to store and save again.

Objects that copy through a reduce value of new tuples and dicts (pandas' Indexes, blocks
and extension arrays; a class with its own ``__reduce__``) never came out as the stored
object they were copied from, so a cell that only printed ``len(df)`` stored the whole
frame again, and saved it again: 254 ms for a frame of a million rows with a text column
(``python benchmarks/cliffs.py --only text``). Each test also changes the value in each way
a cell can, and checks that the change is kept, on its branch only, and after a restart.
"""

import os

import pytest

from helpers import ok, printed
from snapshot_kernel.kernel import SnapshotKernel

STATE_DIR = pytest.mark.parametrize("on_disk", [False, True],
                                    ids=["in memory", "state directory"])


def kernel_for(tmp_path, on_disk):
    return SnapshotKernel(state_dir=str(tmp_path) if on_disk else None)


def stores_nothing_new(kernel, tmp_path, on_disk, parent, reader_cell):
    """Run ``reader_cell`` on ``parent``: its state holds no object of its own, and (with a
    state directory) it takes no more room on disk than a state that adds one number."""
    def disk():
        return sum(os.path.getsize(os.path.join(folder, name))
                   for folder, _, names in os.walk(tmp_path) for name in names)
    before = disk()
    one_number = ok(kernel, "one = 1", parent)["state_name"]
    room = disk() - before
    reader = ok(kernel, reader_cell, parent)["state_name"]
    assert kernel.describe(reader)["approx_bytes"] == 0
    assert kernel.describe(one_number)["approx_bytes"] < 100
    if on_disk:
        assert disk() - before - room <= room + 4096
    return reader


def check_changes(kernel, tmp_path, on_disk, parent, probe, seen, changes):
    """Each change made on a branch of ``parent`` prints what it should under ``probe``,
    and the parent still prints ``seen``, before and after a restart."""
    made = {label: ok(kernel, cell, parent)["state_name"] for label, (cell, _) in changes.items()}
    for label, (_, expected) in changes.items():
        assert printed(kernel, probe, made[label]) == expected, label
    assert printed(kernel, probe, parent) == seen
    if on_disk:  # the states as a restarted server loads them
        kernel.shutdown()
        kernel = SnapshotKernel(state_dir=str(tmp_path))
        for label, (_, expected) in changes.items():
            assert printed(kernel, probe, made[label]) == expected, label
        assert printed(kernel, probe, parent) == seen
    return kernel


FRAMES = ("import numpy as np, pandas as pd\n"
          "df = pd.DataFrame({'n': np.arange(50_000), 't': [str(i) for i in range(50_000)],\n"
          "                   'x': 1.5, 'c': pd.Categorical(['a', 'b'] * 25_000)},\n"
          "                  index=pd.date_range('2020', periods=50_000, freq='min'))\n"
          "df.attrs['source'] = 'sensor'\n"
          "s = pd.Series(np.arange(3.0), index=['p', 'q', 'r'], name='w')\n"
          "idx = df.index")
FRAME_PROBE = ("print(df.attrs, s.name, df.index.name, idx is df.index, df.columns.name,\n"
               "      df.flags.allows_duplicate_labels, df['n'].iloc[0], s.iloc[0],\n"
               "      df['t'].iloc[-1], df['c'].iloc[1], list(df.columns))")


def frame_line(attrs="{'source': 'sensor'}", name="w", index="None", columns_name="None",
               duplicates="True", n="0", s="0.0", t="49999", c="b",
               columns="['n', 't', 'x', 'c']"):
    """What ``FRAME_PROBE`` prints, with the fields a change gives."""
    return (f"{attrs} {name} {index} True {columns_name} {duplicates} {n} {s} {t} {c} "
            f"{columns}\n")


FRAME_SEEN = frame_line()
FRAME_CHANGES = {
    "attrs": ("df.attrs['source'] = 'lab'", frame_line(attrs="{'source': 'lab'}")),
    "a series' name": ("s.name = 'v'", frame_line(name="v")),
    "the index's name": ("df.index.name = 'when'", frame_line(index="when")),
    "the columns' name": ("df.columns.name = 'fields'", frame_line(columns_name="fields")),
    "a flag": ("df.flags.allows_duplicate_labels = False", frame_line(duplicates="False")),
    "a number": ("df.loc[df.index[0], 'n'] = -1", frame_line(n="-1")),
    "a string": ("df.loc[df.index[-1], 't'] = 'end'", frame_line(t="end")),
    "a category": ("df.loc[df.index[1], 'c'] = 'a'", frame_line(c="a")),
    "a series' value": ("s.iloc[0] = 9.0", frame_line(s="9.0")),
    "a column renamed": ("df.columns = ['n', 't', 'y', 'c']",
                         frame_line(columns="['n', 't', 'y', 'c']")),
}


@STATE_DIR
def test_a_cell_that_only_reads_frames_stores_nothing_new(tmp_path, on_disk):
    pytest.importorskip("pandas")
    kernel = kernel_for(tmp_path, on_disk)
    parent = ok(kernel, FRAMES)["state_name"]
    assert kernel.describe(parent)["approx_bytes"] > 1_000_000
    reader = stores_nothing_new(kernel, tmp_path, on_disk, parent,
                                "print(len(df), df['t'].iloc[2], s['q'], df.attrs, idx[0])")
    assert printed(kernel, FRAME_PROBE, reader) == FRAME_SEEN
    kernel = check_changes(kernel, tmp_path, on_disk, reader, FRAME_PROBE, FRAME_SEEN,
                           FRAME_CHANGES)
    assert printed(kernel, FRAME_PROBE, parent) == FRAME_SEEN


GROUPED = ("import numpy as np, pandas as pd\n"
           "df = pd.DataFrame({'c': pd.Categorical(['a', 'b', 'c'] * 20_000),\n"
           "                   'h': np.arange(60_000) % 24, 'v': np.arange(60_000.0)})\n"
           "g = df.groupby(['c', 'h'], observed=True).v.sum()\n"
           "levels = g.index.levels")
GROUPED_PROBE = ("print(list(g.index.names), g.iloc[1], [str(key) for key in g.index[1]], len(g),\n"
                 "      levels[1][:2].tolist())")
GROUPED_SEEN = "['c', 'h'] 74977500.0 ['a', '3'] 24 [0, 1]\n"
GROUPED_CHANGES = {
    "its names, in place": ("g.index.names = ['kind', 'hour']",
                            "['kind', 'hour'] 74977500.0 ['a', '3'] 24 [0, 1]\n"),
    "a value": ("g.iloc[1] = -1.0", "['c', 'h'] -1.0 ['a', '3'] 24 [0, 1]\n"),
    "a level": ("g.index = g.index.set_levels([hour * 10 for hour in range(24)], level=1)",
                "['c', 'h'] 74977500.0 ['a', '30'] 24 [0, 1]\n"),
}


@STATE_DIR
def test_a_cell_that_only_reads_a_grouped_series_stores_nothing_new(tmp_path, on_disk):
    """A MultiIndex's constructor makes each level a new Index over the values it is
    given: its copy is its origin if the levels hold the origin's values."""
    pytest.importorskip("pandas")
    kernel = kernel_for(tmp_path, on_disk)
    parent = ok(kernel, GROUPED)["state_name"]
    reader = stores_nothing_new(kernel, tmp_path, on_disk, parent,
                                "print(g.loc[('b', 4)], g.index.nlevels)")
    assert printed(kernel, GROUPED_PROBE, reader) == GROUPED_SEEN
    check_changes(kernel, tmp_path, on_disk, reader, GROUPED_PROBE, GROUPED_SEEN,
                  GROUPED_CHANGES)


# ``helpers.Holder`` reduces to a call of itself with what it holds; ``q`` holds the list
# ``h`` holds.
HOLDER = ("from helpers import Holder\n"
          "h = Holder([[i] for i in range(5000)], ('a', 1))\n"
          "q = h.items")
HOLDER_PROBE = "print(len(h.items), q is h.items, len(q), h.label, q[0] is h.items[0], q[0])"
HOLDER_SEEN = "5000 True 5000 ('a', 1) True [0]\n"
HOLDER_CHANGES = {
    "an item added": ("h.items.append([1])", "5001 True 5001 ('a', 1) True [0]\n"),
    # an equal list, but not the one q holds: they are two lists from now on
    "its list replaced by an equal one": ("h.items = [list(item) for item in h.items]",
                                          "5000 False 5000 ('a', 1) False [0]\n"),
    "an item replaced by an equal one": ("h.items[0] = [0]\nq[0].append('q')",
                                         "5000 True 5000 ('a', 1) True [0, 'q']\n"),
    "its label": ("h.label = ('b', 1)", "5000 True 5000 ('b', 1) True [0]\n"),
    "a label of an equal value": ("h.label = tuple(['a', 1])", HOLDER_SEEN),
}


@STATE_DIR
def test_a_cell_that_only_reads_an_object_with_its_own_reduce_stores_nothing_new(tmp_path,
                                                                                  on_disk):
    kernel = kernel_for(tmp_path, on_disk)
    parent = ok(kernel, HOLDER)["state_name"]
    assert kernel.describe(parent)["approx_bytes"] > 5000 * 56
    reader = stores_nothing_new(kernel, tmp_path, on_disk, parent, "print(len(h.items), h.label)")
    assert printed(kernel, HOLDER_PROBE, reader) == HOLDER_SEEN
    check_changes(kernel, tmp_path, on_disk, reader, HOLDER_PROBE, HOLDER_SEEN, HOLDER_CHANGES)


def test_a_list_the_object_holds_replaced_by_an_equal_one_is_not_its_old_list(tmp_path):
    """The stored object is not the one to keep when what it holds was replaced by an equal
    container: a name still holding the old container must not see the object's writes."""
    kernel = SnapshotKernel()
    parent = ok(kernel, HOLDER)["state_name"]
    child = ok(kernel, "h.items = [list(item) for item in h.items]", parent)["state_name"]
    assert printed(kernel, "h.items.append(0)\nprint(len(q), len(h.items))", child) == "5000 5001\n"


@STATE_DIR
def test_a_stored_array_of_strings_copied_in_fast_is_still_copied_when_a_cell_writes_it(
        tmp_path, on_disk):
    """A stored object array of strings and numbers is known to hold only those (stored
    arrays are never written), so copying it in skips reading its elements' types; a
    cell's copy that then holds a list is not, and the list is copied for each state."""
    pytest.importorskip("numpy")
    kernel = kernel_for(tmp_path, on_disk)
    words = ok(kernel, "import numpy as np\na = np.array(['x', 'y', 3], dtype=object)")["state_name"]
    read = ok(kernel, "n = len(a)", words)["state_name"]
    listed = ok(kernel, "a[0] = [1]", read)["state_name"]
    ok(kernel, "a[0].append(2)\na[1] = 'z'", listed)
    probe = "print(a.tolist())"
    if on_disk:
        kernel.shutdown()
        kernel = SnapshotKernel(state_dir=str(tmp_path))
        ok(kernel, "a[0].append(5)", listed)
        ok(kernel, "a[0] = [9]\na[0].append(0)", read)
    assert printed(kernel, probe, words) == "['x', 'y', 3]\n"
    assert printed(kernel, probe, read) == "['x', 'y', 3]\n"
    assert printed(kernel, probe, listed) == "[[1], 'y', 3]\n"


# Plain data a cell only read is kept as stored without a copy out (``copying/plain.py``):
# each change below leaves it equal, or nearly, and must still be stored.
RECORDS = ("data = [{'id': i, 'name': f'n{i}', 'score': i * 0.5, 'tags': ['a', 'b']}\n"
           "        for i in range(5000)]\n"
           "data[1]['tags'] = data[0]['tags']")
RECORDS_PROBE = ("print(repr(data[0]['id']), repr(data[0]['score']), list(data[2]),\n"
                 "      data[1]['tags'] is data[0]['tags'], len(data), data[2]['tags'])")


def records_line(id_="0", score="0.0", keys="['id', 'name', 'score', 'tags']", shared="True",
                 length="5000", tags="['a', 'b']"):
    return f"{id_} {score} {keys} {shared} {length} {tags}\n"


RECORDS_SEEN = records_line()
RECORDS_CHANGES = {
    "an int made an equal float": ("data[0]['id'] = 0.0", records_line(id_="0.0")),
    "an int made False": ("data[0]['id'] = False", records_line(id_="False")),
    "0.0 made -0.0": ("data[0]['score'] = -0.0", records_line(score="-0.0")),
    "keys reordered": ("data[2]['id'] = data[2].pop('id')",
                       records_line(keys="['name', 'score', 'tags', 'id']")),
    "a shared list unshared": ("data[1]['tags'] = list(data[1]['tags'])",
                               records_line(shared="False")),
    "an item appended": ("data.append({})", records_line(length="5001")),
    "a list made a tuple": ("data[2]['tags'] = tuple(data[2]['tags'])",
                            records_line(tags="('a', 'b')")),
}


@STATE_DIR
def test_a_cell_that_only_reads_plain_records_stores_nothing_new(tmp_path, on_disk):
    kernel = kernel_for(tmp_path, on_disk)
    parent = ok(kernel, RECORDS)["state_name"]
    reader = stores_nothing_new(kernel, tmp_path, on_disk, parent,
                                "print(sum(len(item['tags']) for item in data))")
    assert printed(kernel, RECORDS_PROBE, reader) == RECORDS_SEEN
    check_changes(kernel, tmp_path, on_disk, reader, RECORDS_PROBE, RECORDS_SEEN,
                  RECORDS_CHANGES)


@pytest.mark.parametrize("holder", [
    "first = data[3]",                        # a new name holds a part of them
    "box = {'inner': [data[3]]}",             # ... deeper
    "import threading, types\n"               # a value shared whole holds a part
    "box = types.SimpleNamespace(lock=threading.Lock(), inner=data[3])",
    "import threading, types\n"               # ... or them
    "box = types.SimpleNamespace(lock=threading.Lock(), inner=data)\nfirst = data[3]",
])
def test_records_a_cell_read_stay_one_with_what_another_name_holds_of_them(holder):
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS)["state_name"]
    child = ok(kernel, holder, parent)["state_name"]
    held = "first" if holder.startswith("first") or holder.endswith("first = data[3]") else (
        "box['inner'][0]" if "'inner': [" in holder else "box.inner")
    code = f"{held}['name'] = 'changed'\nprint(data[3]['name'])"
    assert printed(kernel, code, child) == "changed\n"
    assert printed(kernel, "print(data[3]['name'])", parent) == "n3\n"


def test_a_name_rebound_to_records_equal_to_its_own_is_not_one_with_a_name_holding_the_old():
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS)["state_name"]
    child = ok(kernel, "import copy\nold = data\ndata = copy.deepcopy(data)", parent)["state_name"]
    assert printed(kernel, "old[0]['id'] = -1\nprint(old is data, data[0]['id'])",
                   child) == "False 0\n"


def test_records_two_names_came_to_share_stay_shared():
    """Each list is still equal to what it was, but now they share a dict."""
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS + "\nimport copy\nother = copy.deepcopy(data)")["state_name"]
    child = ok(kernel, "other[5] = data[5]", parent)["state_name"]
    assert printed(kernel, "data[5]['name'] = 'x'\nprint(other[5] is data[5], other[5]['name'])",
                   child) == "True x\n"


def test_a_record_replaced_by_an_equal_one_is_not_one_with_a_name_holding_the_old():
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS)["state_name"]
    child = ok(kernel, "import copy\nkeep = data[4]\ndata[4] = copy.deepcopy(data[4])",
               parent)["state_name"]
    assert printed(kernel, "keep['name'] = 'x'\nprint(keep is data[4], data[4]['name'])",
                   child) == "False n4\n"


def test_plain_data_a_cell_read_or_wrote_keeps_its_cycles_and_sharing(tmp_path):
    """Plain data that refers to itself and shares parts, read (kept as stored) and written
    three ways, before and after a restart."""
    kernel = SnapshotKernel(state_dir=str(tmp_path))
    parent = ok(kernel, "L = [1, {'k': [2]}, -0.0]\nL.append(L)\nL[1]['again'] = L[1]['k']\n"
                        "t = (L, L[1])")["state_name"]
    probe = "print(L[3] is L, L[1]['again'] is L[1]['k'], t[0] is L, t[1] is L[1], L[2])"
    seen = "True True True True -0.0\n"
    assert printed(kernel, probe, parent) == seen
    check_changes(kernel, tmp_path, True, parent, probe, seen, {
        "a list inside written": ("L[1]['k'].append(3)\nprint(L[1]['again'])",
                                  "True True True True -0.0\n"),
        "the cycle broken": ("L[3] = 'end'", "False True True True -0.0\n"),
        "a part unshared": ("L[1]['again'] = list(L[1]['k'])", "True False True True -0.0\n"),
    })


def test_records_read_beside_a_new_value_are_not_stored_again():
    """Another name copied out does not make the records a cell only read be copied out."""
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS)["state_name"]
    whole = kernel.describe(parent)["approx_bytes"]
    reader = ok(kernel, "summary = {'n': len(data), 'first': dict(data[0])}",
                parent)["state_name"]
    assert kernel.describe(reader)["approx_bytes"] < whole / 100
    assert printed(kernel, RECORDS_PROBE, reader) == RECORDS_SEEN


def test_records_a_cell_wrote_store_only_what_it_changed():
    """Written plain data is copied out against what it was copied in from, so the records
    the cell left alone are the stored ones, not new copies."""
    kernel = SnapshotKernel()
    parent = ok(kernel, RECORDS)["state_name"]
    whole = kernel.describe(parent)["approx_bytes"]
    writer = ok(kernel, "data[0]['id'] = -1\nfirst = data[3]\nfirst['name'] = 'f'",
                parent)["state_name"]
    assert kernel.describe(writer)["approx_bytes"] < whole / 10
    assert printed(kernel, "print(data[0]['id'], data[3]['name'], first is data[3])",
                   writer) == "-1 f True\n"
    assert printed(kernel, "print(data[0]['id'], data[3]['name'])", parent) == "0 n3\n"
