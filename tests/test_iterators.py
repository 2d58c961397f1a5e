"""Iterators and dict views keep their type and their place in every state.

Each kind of iterator is made in one cell, advanced in the next (not at all, part of
the way, to its last item, past its end) and probed in a third: its type and what it
has left. The oracle is a fresh ``python`` process replaying each lineage cell by
cell; the states are checked in both copy modes, after a restart and in an export
archive. An iterator that cannot be made again is shared, and the state says so.
"""

import io
import json
import subprocess
import sys

import pytest

from helpers import ok, printed
from snapshot_kernel.kernel import SnapshotKernel

pytest.importorskip("numpy")

SEQ = "class Seq:\n    def __getitem__(self, i):\n        if i < 3:\n            return i\n" \
      "        raise IndexError(i)\n"
DICT = "d = {'a': [1], 'b': [2], 'c': [3]}\n"
ORDERED = "import collections\nd = collections.OrderedDict(a=[1], b=[2], c=[3])\n"

# kind -> the cell that makes ``it``
MADE = {
    "list": "c = [1, 2, 3]\nit = iter(c)",
    "reversed list": "c = [1, 2, 3]\nit = reversed(c)",
    "tuple": "it = iter((1, 2, 3))",
    "reversed tuple": "it = reversed((1, 2, 3))",
    "range": "it = iter(range(3))",
    "str": "it = iter('abc')",
    "non-ASCII str": "it = iter('\\u00e9ab')",
    "bytes": "it = iter(b'abc')",
    "bytearray": "it = iter(bytearray(b'abc'))",
    "array.array": "import array\nit = iter(array.array('i', [1, 2, 3]))",
    "__getitem__ sequence": SEQ + "it = iter(Seq())",
    "numpy array": "import numpy as np\nit = iter(np.arange(3))",
    "callable and sentinel": "src = iter([1, 2, 3, None])\nit = iter(src.__next__, None)",
    "dict": DICT + "it = iter(d)",
    "dict values": DICT + "it = iter(d.values())",
    "dict items": DICT + "it = iter(d.items())",
    "reversed dict": DICT + "it = reversed(d)",
    "reversed dict values": DICT + "it = reversed(d.values())",
    "reversed dict items": DICT + "it = reversed(d.items())",
    "set": "it = iter({1, 2, 3})",
    "frozenset": "it = iter(frozenset({1, 2, 3}))",
    "OrderedDict": ORDERED + "it = iter(d)",
    "OrderedDict values": ORDERED + "it = iter(d.values())",
    "reversed OrderedDict items": ORDERED + "it = reversed(d.items())",
    "zip over a dict and a str": DICT + "it = zip(d, 'xyz')",
    "enumerate over a set": "it = enumerate({4, 5, 6})",
}
ADVANCED = {"fresh": "pass", "one taken": "next(it)",
            "all taken": "for _ in range(3):\n    next(it)",
            "past its end": "list(it)\nprint(next(it, 'end'))"}
PROBE = "print(type(it).__name__, list(it), next(it, 'end'), type(it).__name__)"
CASES = [(kind, advanced) for kind in MADE for advanced in ADVANCED]

# Lineages of their own: what a state's iterators and views still see of their container.
LINEAGES = {
    "a list iterator sees its list grow": [
        "c = [1]\nit = iter(c)", "c.append(2)\nprint(list(it))"],
    "a dict iterator fails as its dict grows": [
        DICT + "it = iter(d)\nnext(it)",
        "d['z'] = [0]\ntry:\n    next(it)\nexcept RuntimeError as exc:\n    print(exc)"],
    "an exhausted list iterator stays exhausted": [
        "c = [1]\nit = iter(c)\nlist(it)", "c.append(2)\nprint(list(it))"],
    "dict views follow their dict": [
        DICT + "k, v, i = d.keys(), d.values(), d.items()",
        "d['z'] = [0]\nd['a'].append(9)\nprint(list(k), list(v), len(k), list(i))"],
    "an iterator's items are its container's": [
        DICT + "it = iter(d.values())",
        "first = next(it)\nfirst.append(7)\nprint(d, first is d['a'])"],
}


@pytest.fixture(scope="module")
def replayed():
    """``{lineage key: what a fresh process prints running its cells}``, from one process
    that runs every lineage in a namespace of its own."""
    lineages = {f"{kind}/{advanced}": [MADE[kind], ADVANCED[advanced], PROBE]
                for kind, advanced in CASES}
    lineages.update(LINEAGES)
    program = ("import contextlib, io, json, sys\nshown = {}\n"
               "for key, cells in json.load(sys.stdin).items():\n"
               "    namespace, out = {'__name__': '__main__'}, io.StringIO()\n"
               "    for cell in cells:\n        out = io.StringIO()\n"
               "        with contextlib.redirect_stdout(out):\n"
               "            exec(compile(cell, '<cell>', 'exec'), namespace)\n"
               "    shown[key] = out.getvalue()\n"
               "print(json.dumps(shown))\n")
    done = subprocess.run([sys.executable, "-c", program], input=json.dumps(lineages),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def made_and_advanced(kernel, kind, advanced):
    """The state where ``it`` of ``kind`` was made, then ``advanced``."""
    made = ok(kernel, MADE[kind])["state_name"]
    return ok(kernel, ADVANCED[advanced], made)["state_name"]


@pytest.mark.parametrize("kind", MADE)
def test_an_iterator_keeps_its_type_and_place_in_every_state(kernel, replayed, kind):
    for advanced in ADVANCED:
        state = made_and_advanced(kernel, kind, advanced)
        assert kernel.describe(state)["shared"] == {}
        assert printed(kernel, PROBE, state) == replayed[f"{kind}/{advanced}"], advanced


def test_the_numpy_iterator_of_the_report_stays_an_iterator(kernel):
    state = ok(kernel, "import numpy as np\nit = iter(np.arange(2))\nlist(it)")["state_name"]
    assert printed(kernel, "print(type(it).__name__)", state) == "iterator\n"


@pytest.mark.parametrize("cells", LINEAGES.values(), ids=LINEAGES.keys())
def test_iterators_and_views_see_their_states_own_container(kernel, replayed, cells):
    state = ok(kernel, cells[0])["state_name"]
    key = next(key for key, value in LINEAGES.items() if value is cells)
    assert printed(kernel, cells[1], state) == replayed[key]


def test_a_branch_advancing_an_iterator_moves_neither_its_parent_s_nor_a_sibling_s(kernel):
    parent = ok(kernel, DICT + "it = iter(d.items())\nnext(it)")["state_name"]
    left = ok(kernel, "next(it)", parent)["state_name"]
    ok(kernel, "list(it)", parent)
    assert printed(kernel, "print(list(it))", parent) == "[('b', [2]), ('c', [3])]\n"
    assert printed(kernel, "print(list(it))", left) == "[('c', [3])]\n"


UNREBUILDABLE = {
    "a dict iterator whose dict changed size": (
        "d = {1: 1}\nit = iter(d)\nd[2] = 2", "dict_keyiterator that cannot go on"),
    "an OrderedDict iterator whose keys and values are the same objects": (
        "import collections\nd = collections.OrderedDict([(1, 1), (2, 2)])\n"
        "it = iter(d.values())\nnext(it)", "cannot be told apart"),
}


@pytest.mark.parametrize("made, reason", UNREBUILDABLE.values(), ids=UNREBUILDABLE.keys())
def test_an_iterator_that_cannot_be_made_again_is_shared_and_listed(kernel, made, reason):
    state = ok(kernel, made)["state_name"]
    assert reason in kernel.describe(state)["shared"]["it"]


def test_iterators_keep_their_type_and_place_after_a_restart(tmp_path, replayed):
    state_dir = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=state_dir)
    states = {case: made_and_advanced(kernel, *case) for case in CASES}
    assert all(kernel.describe(state)["lost"] == {} for state in states.values())
    kernel = SnapshotKernel(state_dir=state_dir)
    for (kind, advanced), state in states.items():
        assert printed(kernel, PROBE, state) == replayed[f"{kind}/{advanced}"], (kind, advanced)


def test_iterators_keep_their_type_and_place_in_an_export_archive(replayed):
    source, target = SnapshotKernel(), SnapshotKernel()
    for kind, advanced in CASES:
        state = made_and_advanced(source, kind, advanced)
        writer, lost = source.export_state(state)
        assert lost == {}
        target.import_state(state, io.BytesIO(b"".join(writer.chunks())))
        assert printed(target, PROBE, state) == replayed[f"{kind}/{advanced}"], (kind, advanced)
