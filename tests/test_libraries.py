"""numpy, pandas and matplotlib objects keep every promise of docs/promises.md.

Each scenario is a list of cells. The kernel runs each cell on the state the
previous one stored; plain Python runs the same cells in one namespace (the
oracle); what each cell prints must be the same. Branch tests then check that
siblings and parents never see a branch's mutations. Every test runs in both
copy modes (the ``kernel`` fixture). The libraries are optional: a module whose
wheels are missing on this Python skips its tests.
"""

import contextlib
import io

import pytest

from helpers import ok, printed, stdout

from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.states.working import TOUCHED, WHOLE

np = pytest.importorskip("numpy")


def plain_python(cells):
    """What each cell prints when the cells run one after another in one namespace."""
    namespace, shown = {"__name__": "__main__"}, []
    for code in cells:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<cell>", "exec"), namespace)
        shown.append(out.getvalue())
    return shown


def through_kernel(kernel, cells, state="initial"):
    shown = []
    for code in cells:
        reply = ok(kernel, code, state)
        state = reply["state_name"]
        shown.append(stdout(reply))
    return shown, state


NUMPY = {
    "a view writes through to its base": [
        "import numpy as np\na = np.zeros(4)\nv = a[:2]",
        "v[0] = 99",
        "print(a, v.base is a, np.shares_memory(a, v))"],
    "a strided, reversed and reshaped view": [
        "import numpy as np\na = np.arange(12.)\nr = a[::-3]\nm = a.reshape(3, 4).T",
        "r[0] = -1\nm[0, 1] = -2",
        "print(a, r.base is a, m.base is a, m.flags.f_contiguous)"],
    "a view with another dtype": [
        "import numpy as np\na = np.zeros(2)\nb = a.view(np.uint8)",
        "b[7] = 0x3f",
        "print(a[0] != 0, b.base is a)"],
    "a read-only view stays read-only": [
        "import numpy as np\na = np.arange(3)\nv = a[1:]\nv.flags.writeable = False",
        "print(v.flags.writeable, a.flags.writeable)"],
    "a field of a structured array": [
        "import numpy as np\nrec = np.zeros(3, dtype=[('x', 'f8'), ('n', 'i4')])\nxs = rec['x']",
        "xs[1] = 5",
        "print(rec, xs.base is rec)"],
    "an object array shares its items with names": [
        "import numpy as np\nitem = [1]\narr = np.empty(2, dtype=object)\narr[0] = item\narr[1] = arr",
        "arr[0].append(2)",
        "print(item, arr[0] is item, arr[1] is arr)"],
    "an object array of strings and numbers (copied at once) and its views": [
        "import numpy as np\n"
        "text = np.array(['a', None, 1.5, 2, b'x', 1j, True, 'b'], dtype=object)\nalias = text\n"
        "grid = np.asfortranarray(np.array([['x', 'y'], ['u', 7]], dtype=object))\n"
        "row = grid[1]\nmixed = np.array(['s', [1]], dtype=object)",
        "text[0] = 'changed'\nrow[0] = 'w'\nmixed[1].append(2)",
        "print(text.tolist(), alias is text, grid.tolist(), grid.flags.f_contiguous,"
        " row.base is grid, mixed.tolist())"],
    "cells' classes inside an object array": [
        "import numpy as np\nclass Point:\n    def __init__(self, x): self.x = x\n"
        "pts = np.array([Point(1), Point(2)], dtype=object)",
        "print(isinstance(pts[0], Point), type(pts[1]) is Point, pts[1].x)"],
    "a Fortran-ordered array keeps its layout": [
        "import numpy as np\nf = np.asfortranarray(np.arange(6).reshape(2, 3))",
        "print(f.flags.f_contiguous, f.strides == (8, 16), f.sum())"],
    "numpy scalars and dtypes": [
        "import numpy as np\nx = np.float32(1.5)\nd = np.dtype([('a', 'i2')])",
        "print(type(x).__name__, x * 2, d.names)"],
    "an object holding an empty array keeps its aliases": [
        "import numpy as np\nfrom types import SimpleNamespace\n"
        "box = SimpleNamespace(empty=np.zeros(0), items=[])\nalias = box",
        "box.items.append(1)",
        "print(alias.items, alias is box)"],
    "a sliding window stays a view of its array": [
        "import numpy as np\nx = np.arange(6.)\nw = np.lib.stride_tricks.sliding_window_view(x, 3)",
        "x[2] = -1",
        "print(w[0], np.shares_memory(w, x), w.flags.writeable)"],
    "an array made unaligned by code stays so": [
        "import numpy as np\na = np.arange(3.)\na.setflags(align=False)",
        "print(a.flags.aligned)"],
    "a flat iterator iterates its array from where it was": [
        "import numpy as np\nx = np.arange(6).reshape(2, 3)\nfl = x.flat\nnext(fl)",
        "print(next(fl), fl.index, fl.base is x)"],
    "an Arrayterator, whose __getattr__ hands out its array's attributes": [
        "import numpy as np\na = np.arange(24).reshape(2, 3, 4)\nit = np.lib.Arrayterator(a, 4)",
        "print(type(it).__name__, [chunk.shape for chunk in it], it.var is a)"],
}


NUMPY.update({
    "masked array views": [
        "import numpy as np\na = np.arange(6.0)\nc = np.ma.masked_where(a <= 2, a, copy=False)\n"
        "v = c[1:4]\nd = c.data",
        "c[3] = 99\nv[2] = 55\nv[0] = np.ma.masked\nd[5] = -5",
        "print(a, c, v, v.mask, c.mask, d, type(v).__name__, v.base is c, d.base is c, "
        "np.shares_memory(c, a), np.shares_memory(v.mask, c.mask))"],
    "matrix views": [
        "import numpy as np\nx = np.array([[1, 2], [3, 4]])\nm = np.asmatrix(x)\n"
        "z = np.matrix([[1, 2], [3, 4]])\nr = z[0]\nt = z.T",
        "x[0, 0] = 5\nz[0, 1] = 7\nt[1, 1] = 9",
        "print(m, r, t, z, type(r).__name__, r.base is z, t.base is z, m.base is x)"],
    "record array views": [
        "import numpy as np\nrec = np.rec.fromrecords([(1, 2.0), (3, 4.0)], names='a,b')\n"
        "first = rec[:1]\ncolumn = rec.a",
        "first.a[0] = 10\ncolumn[1] = 30",
        "print(rec, first, column, type(first).__name__, np.shares_memory(first, rec), "
        "first.base is rec)"],
})


@pytest.mark.parametrize("cells", NUMPY.values(), ids=NUMPY.keys())
def test_numpy_cells_print_what_plain_python_prints(kernel, cells):
    assert through_kernel(kernel, cells)[0] == plain_python(cells)


def test_a_branch_writing_a_view_changes_neither_its_parent_nor_a_sibling(kernel):
    _, parent = through_kernel(kernel, ["import numpy as np\na = np.zeros(4)\nv = a[1:3]"])
    ok(kernel, "v[:] = 7", parent)
    ok(kernel, "a[1] = -1", parent)
    assert printed(kernel, "print(a, v)", parent) == "[0. 0. 0. 0.] [0. 0.]\n"


def test_a_branch_writing_a_masked_view_changes_neither_its_parent_nor_a_sibling(kernel):
    _, parent = through_kernel(kernel, [
        "import numpy as np\na = np.arange(4.0)\nc = np.ma.masked_where(a < 1, a, copy=False)\n"
        "v = c[1:3]"])
    ok(kernel, "v[:] = 7\nv[0] = np.ma.masked", parent)
    ok(kernel, "a[1] = -1", parent)
    assert printed(kernel, "print(a, c, v)", parent) == "[0. 1. 2. 3.] [-- 1.0 2.0 3.0] [1.0 2.0]\n"


def test_a_branch_changing_an_object_array_item_leaves_the_parent_alone(kernel):
    _, parent = through_kernel(kernel, ["import numpy as np\nbox = [1]\n"
                                        "arr = np.array([box, None], dtype=object)"])
    ok(kernel, "arr[0].append(2)\nbox.append(3)", parent)
    assert printed(kernel, "print(box, arr[0] is box)", parent) == "[1] True\n"


@pytest.mark.parametrize("mode", [TOUCHED, WHOLE])
def test_an_array_from_an_earlier_cell_resizes_in_place(mode):
    # The kernel held a reference to every copy it made, and ndarray.resize refuses
    # while anything but the code's own name refers to the array. (Arrays kept
    # copy-on-write cannot resize at all: docs/promises.md "Limitations"; these are small.)
    kernel = SnapshotKernel(copy_mode=mode)
    parent = ok(kernel, "import numpy as np\na = np.arange(3)")["state_name"]
    assert printed(kernel, "a.resize(5)\nprint(a)", parent) == "[0 1 2 0 0]\n"
    assert printed(kernel, "print(a)", parent) == "[0 1 2]\n"


def test_branches_drawing_from_a_numpy_generator_leave_their_parent_alone(kernel):
    parent = ok(kernel, "import numpy as np\nrng = np.random.default_rng(42)")["state_name"]
    ok(kernel, "rng.random()", parent)
    ok(kernel, "rng.random()", parent)
    first = np.random.default_rng(42).random()
    assert printed(kernel, "print(rng.random())", parent) == f"{first}\n"


def test_a_value_whose_type_has_no_module_name_is_copied_not_shared(kernel):
    # Cython 3.1's function type has a descriptor as its __module__, not a string
    # (numpy 2.2's Generators reach such functions): values holding one were shared.
    parent = ok(kernel, "class Box:\n    pass\nBox.__module__ = Box.__dict__['__weakref__']\n"
                        "box = Box()\nbox.items = []")["state_name"]
    ok(kernel, "box.items.append(1)", parent)
    assert printed(kernel, "print(box.items)", parent) == "[]\n"


@pytest.fixture
def pandas():
    return pytest.importorskip("pandas")


PANDAS = {
    "a MultiIndex shared by a name and a Series stays one object": [
        "import pandas as pd\nindex = pd.MultiIndex.from_tuples([('a', 1), ('a', 2)])\n"
        "s = pd.Series([1, 2], index=index)",
        "print(s.index is index)",
        "s.index.names = ['letter', 'number']",
        "print(list(index.names), list(s.index.names))"],
    "an Index shared by two frames": [
        "import pandas as pd\nidx = pd.Index(['x', 'y'], name='k')\n"
        "a = pd.DataFrame({'v': [1, 2]}, index=idx)\nb = pd.DataFrame({'w': [3, 4]}, index=idx)",
        "print(a.index is b.index, a.index is idx)"],
    "object columns hold the objects names hold": [
        "import pandas as pd\nitem = [1]\ndf = pd.DataFrame({'a': [item, [2]]})",
        "df.loc[0, 'a'].append(99)",
        "print(item, df.loc[0, 'a'] is item)"],
    "cells' classes inside a frame": [
        "import pandas as pd\nclass Tag:\n    pass\ndf = pd.DataFrame({'t': [Tag(), Tag()]})",
        "print(all(isinstance(t, Tag) for t in df['t']))"],
    "a frame, its columns and its dtypes": [
        "import pandas as pd\nimport numpy as np\n"
        "df = pd.DataFrame({'f': [1.5, 2.5], 'i': [1, 2], 's': ['a', 'b'],\n"
        "                   'c': pd.Categorical(['u', 'v'], categories=['v', 'u'], ordered=True),\n"
        "                   't': pd.to_datetime(['2024-01-01', '2024-02-01']).tz_localize('UTC')})",
        "df['g'] = df['f'] * 2\ndf.loc[1, 'i'] = 5",
        "print(df.to_string())\nprint(df.dtypes.astype(str).to_dict())\nprint(df['c'].cat.ordered)"],
    "a Series with a name and attrs": [
        "import pandas as pd\ns = pd.Series([3, 1, 2], name='n')\ns.attrs['unit'] = 'kg'",
        "s2 = s.sort_values()",
        "print(s.name, s.attrs, s2.tolist(), s.tolist())"],
    "a Categorical": [
        "import pandas as pd\ncat = pd.Categorical(['a', 'b', 'a'], categories=['a', 'b', 'c'])",
        "cat[0] = 'c'",
        "print(list(cat), list(cat.categories), cat.codes.tolist())"],
    "a groupby result and a pivot": [
        "import pandas as pd\ndf = pd.DataFrame({'k': ['x', 'y', 'x'], 'v': [1, 2, 3]})",
        "g = df.groupby('k')['v'].sum()\np = df.pivot_table(index='k', values='v', aggfunc='mean')",
        "print(g.to_dict(), p.to_dict())"],
}


@pytest.mark.parametrize("cells", PANDAS.values(), ids=PANDAS.keys())
def test_pandas_cells_print_what_plain_python_prints(kernel, pandas, cells):
    assert through_kernel(kernel, cells)[0] == plain_python(cells)


def test_a_branch_mutating_an_object_column_leaves_parent_and_sibling_alone(kernel, pandas):
    _, parent = through_kernel(kernel, ["import pandas as pd\ndf = pd.DataFrame({'a': [[1], [2]]})"])
    ok(kernel, "df.loc[0, 'a'].append(99)", parent)
    assert printed(kernel, "print(df.loc[0, 'a'])", parent) == "[1]\n"
    sibling = ok(kernel, "x = 1", parent)["state_name"]
    assert printed(kernel, "print(df.loc[0, 'a'])", sibling) == "[1]\n"


def test_frames_that_shared_memory_behave_as_in_python_and_the_parent_keeps_its_values(kernel, pandas):
    # pandas >= 3 (copy-on-write) keeps df, shallow and col apart; pandas 2 writes through.
    # Either way the branch must see what one Python process sees, and the parent nothing.
    setup = ("import pandas as pd\ndf = pd.DataFrame({'a': [1.0, 2.0]})\n"
             "shallow = df.copy(deep=False)\ncol = df['a']")
    write = "shallow.iloc[0, 0] = 50.0\ncol.iloc[1] = 60.0"
    look = "print(df['a'].tolist(), shallow['a'].tolist(), col.tolist())"
    _, parent = through_kernel(kernel, [setup])
    child = ok(kernel, write, parent)["state_name"]
    assert printed(kernel, look, child) == plain_python([setup, write, look])[-1]
    assert printed(kernel, look, parent) == "[1.0, 2.0] [1.0, 2.0] [1.0, 2.0]\n"


def test_a_frame_made_from_records_with_a_text_column_is_copied_not_shared(kernel, pandas):
    # pandas 3 keeps the text column of ``DataFrame(list of dicts)`` as a strided view of a
    # 2-D object array, which the copier could not flatten (``reshape(order="K")`` raises):
    # the frame was shared by every state, and a branch's write reached its parent (found
    # by the gallery's plot_classification_probability, its last result ``_``).
    parent = ok(kernel, "import pandas as pd\n"
                        "df = pd.DataFrame([{'name': 'a', 'x': 0.5}, {'name': 'b', 'x': 0.7}])"
                        )["state_name"]
    assert "df" not in kernel.describe(parent)["shared"]
    ok(kernel, "df.loc[0, 'name'] = 'changed'", parent)
    assert printed(kernel, "print(df['name'].tolist())", parent) == "['a', 'b']\n"


@pytest.fixture
def pyplot():
    pytest.importorskip("matplotlib")
    return "import matplotlib.pyplot as plt\n"


def test_a_grouper_keeps_its_joins(kernel, pyplot):
    # Its __getstate__ gives each joined object a set of its own (figures keep their
    # aligned labels in Groupers), so a copy made the way pickle rebuilds forgot the joins.
    cells = ["from matplotlib.cbook import Grouper\nclass Item:\n    pass\n"
             "a, b, c = Item(), Item(), Item()\ngrp = Grouper()\ngrp.join(a, b)",
             "grp.join(b, c)",
             "print(grp.joined(a, c), len(list(grp)))"]
    assert through_kernel(kernel, cells)[0] == plain_python(cells) == ["", "", "True 1\n"]


def test_axes_in_an_object_array_keep_their_figure(kernel, pyplot):
    cells = [pyplot + "fig, ax = plt.subplots(2, 3)\nplt.close(fig)",
             "ax[0, 0].text(.5, .5, 'hi')",
             "print(len(fig.axes[0].texts), ax[0, 0].figure is fig, ax.shape)"]
    assert through_kernel(kernel, cells)[0] == plain_python(cells)


def test_copying_a_figure_never_registers_it_with_pyplot(kernel, pyplot):
    parent = ok(kernel, pyplot + "fig = plt.figure()\nfig.add_subplot()")["state_name"]
    child = ok(kernel, "x = 1", parent)["state_name"]
    assert printed(kernel, "print(plt.get_fignums(), len(fig.axes))", child) == "[] 1\n"
    ok(kernel, "plt.plot([1, 2])", child)  # draws on a new figure, not the stored one
    assert printed(kernel, "print(len(fig.axes), len(fig.axes[0].lines))", parent) == "1 0\n"


def test_a_stored_figure_still_works_and_renders_as_the_last_expression(kernel, pyplot):
    parent = ok(kernel, pyplot + "fig, ax = plt.subplots()\nax.plot([1, 2, 3])")["state_name"]
    reply = ok(kernel, "ax.set_title('again')\nfig", parent)
    result = [item for item in reply["output"] if item["output_type"] == "execute_result"]
    assert result[0]["data"]["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    assert result[0]["data"]["image/png"]
    assert printed(kernel, "print(ax.get_title() or 'untitled')", parent) == "untitled\n"


def test_a_lru_cache_function_reads_the_globals_of_its_state(kernel):
    parent = ok(kernel, "import functools\nX = 1\n@functools.lru_cache\ndef f():\n    return X")
    child = ok(kernel, "X = 2", parent["state_name"])["state_name"]
    assert printed(kernel, "print(f(), f.cache_info().currsize)", child) == "2 1\n"
    assert printed(kernel, "print(f())", parent["state_name"]) == "1\n"
