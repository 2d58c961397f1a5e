"""GET /states/<a>/diff/<b>: what a branch did, name by name, values compared by what they
hold, with type, shape or length, and repr each side."""

import io

import pytest
import webtest

from conftest import TOKEN
from helpers import ok
from snapshot_kernel.errors import UnknownState
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app


def branch(kernel, code, state="initial", name=None):
    return ok(kernel, code, state, new_state_name=name)["state_name"]


def variable(type_name, text, **extent):
    return {"type": type_name, **extent, "repr": text}


def test_a_branch_shows_what_it_added_removed_and_changed(kernel):
    base = branch(kernel, "a = 1\nb = [1]\nc = 'gone'\nkeep = 2")
    after = branch(kernel, "a = 2\ndel c\nd = {'k': 3}\nb.append(2)", base)
    assert kernel.diff(base, after) == {
        "from": base, "to": after,
        "added": {"d": variable("dict", "{'k': 3}", length=1)},
        "removed": {"c": variable("str", "'gone'", length=4)},
        "changed": {"a": {"before": variable("int", "1"), "after": variable("int", "2")},
                    "b": {"before": variable("list", "[1]", length=1),
                          "after": variable("list", "[1, 2]", length=2)}}}


DEFINITIONS = ("b = [1, 2]\nx = 5\ndef f(n=1):\n    return n\n"
               "class C:\n    k = 1\n    def m(self):\n        return f()\n"
               "    @property\n    def p(self):\n        return 2\n"
               "    @staticmethod\n    def s():\n        pass")
UNCHANGING = {
    "reading": "print(b, x)",
    "rebinding to the same object": "b = b\nx = x",
    "sharing it with a new name": "alias = b",
    "an error caught inside": "try:\n    b.missing\nexcept AttributeError:\n    pass",
    "calling a function": "f(2)",
    "making an instance": "alias = C()\nalias.m() + alias.p",
    "subclassing": "class D(C):\n    pass",
    "naming a class": "alias = C",
    "rebinding to an equal value": "b = [1, 2]\nx = 5",
    "defining a function again with the same text": "def f(n=1):\n    return n",
    "... on the same line": "pass\npass\ndef f(n=1):\n    return n",
    "a cell without a result, after one with": "y = 1",
}


@pytest.mark.parametrize("code", UNCHANGING.values(), ids=UNCHANGING)
def test_a_name_a_cell_only_touched_is_not_changed(kernel, code):
    """The store copies a function or class anew when a cell touches it: still the same."""
    base = branch(kernel, DEFINITIONS)
    diff = kernel.diff(base, branch(kernel, code, base))
    assert diff["changed"] == {} and diff["removed"] == {}
    assert set(diff["added"]) <= {"alias", "D", "_", "y"}  # _: the last expression's value


def test_the_last_result_is_unchanged_by_a_cell_without_one(kernel):
    base = branch(kernel, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf.describe()")
    diff = kernel.diff(base, branch(kernel, "print(df.shape)\ny = 1", base))
    assert (set(diff["added"]), diff["changed"], diff["removed"]) == ({"y"}, {}, {})


REDEFINITIONS = {
    "a function": ("def f(n=1):\n    return n + 1", "f"),
    "a function's default": ("def f(n=2):\n    return n", "f"),
    "a method": ("class C:\n    k = 1\n    def m(self):\n        return 3", "C"),
    "a class attribute": ("C.k = 2", "C"),
    "a class with another name": ("class C:\n    pass\nC.__qualname__ = 'E'", "C"),
    "a function bound to a class's name": ("C = f", "C"),
}


@pytest.mark.parametrize("code, name", REDEFINITIONS.values(), ids=REDEFINITIONS)
def test_a_redefinition_that_differs_is_a_change(kernel, code, name):
    base = branch(kernel, DEFINITIONS)
    assert set(kernel.diff(base, branch(kernel, code, base))["changed"]) == {name}


VALUES = {  # (before, after, changed?): each bound to v, the second by a cell on the first
    "an int and an equal int": ("10 ** 30", "10 ** 30", False),
    "an int and an equal float": ("1", "1.0", True),
    "True and 1": ("True", "1", True),
    "a NaN and a NaN": ("float('nan')", "float('nan')", False),
    "strings": ("'abc'", "'abd'", True),
    "nested containers": ("{'a': [1, (2, 'x')], 'b': {3}}", "{'a': [1, (2, 'x')], 'b': {3}}",
                          False),
    "nested containers, one leaf": ("{'a': [1, (2, 'x')]}", "{'a': [1, (2, 'y')]}", True),
    "dicts in another order": ("{'a': 1, 'b': 2}", "{'b': 2, 'a': 1}", False),
    "a tuple and a list": ("(1, 2)", "[1, 2]", True),
    "a long list of numbers": ("list(range(100000))", "list(range(100000))", False),
    "a list holding itself": ("[1]\nv.append(v)", "[1]\nv.append(v)", False),
    "instances with equal attributes": ("Point(1, [2])", "Point(1, [2])", False),
    "instances with other attributes": ("Point(1, [2])", "Point(1, [3])", True),
    "closures over equal values": ("adder(1)", "adder(1)", False),
    "closures over other values": ("adder(1)", "adder(2)", True),
    "bound methods": ("Point(1, 2).norm", "Point(1, 2).norm", False),
    "a datetime": ("datetime.datetime(2020, 1, 1)", "datetime.datetime(2020, 1, 1)", False),
    "dicts keyed by tuples, in another order": ("{(1, 'a'): 1, (2, 'b'): 2}",
                                                "{(2, 'b'): 2, (1, 'a'): 1}", False),
    "a list and an equal list holding an int subclass": ("[1]", "[Tricky(1)]", True),
    "a Decimal": ("decimal.Decimal('1.10')", "decimal.Decimal('1.1')", True),
}
VALUE_SETUP = ("import datetime, decimal\nclass Tricky(int):\n    def __eq__(self, other):\n"
               "        raise AssertionError('the diff ran == of a value')\n"
               "    __hash__ = int.__hash__\nclass Point:\n    def __init__(self, x, y):\n"
               "        self.x, self.y = x, y\n    def norm(self):\n        return self.x\n"
               "def adder(k):\n    def add(n):\n        return n + k\n    return add\n")


@pytest.mark.parametrize("before, after, changed", VALUES.values(), ids=VALUES)
def test_values_compare_by_what_they_hold(kernel, before, after, changed):
    base = branch(kernel, VALUE_SETUP + f"v = {before}")
    diff = kernel.diff(base, branch(kernel, f"v = {after}", base))
    assert set(diff["changed"]) == ({"v"} if changed else set())
    assert "not_compared" not in diff["changed"].get("v", {})


def test_a_changed_name_shows_type_length_or_shape_and_repr_each_side(kernel):
    base = branch(kernel, "import numpy as np\nimport pandas as pd\nxs = [1, 2]\n"
                          "a = np.zeros((2, 3))\ndf = pd.DataFrame({'x': [1, 2]})")
    after = branch(kernel, "xs = xs + [3]\na = np.ones((3, 2))\ndf = df.assign(y=0)", base)
    changed = kernel.diff(base, after)["changed"]
    assert changed["xs"] == {"before": variable("list", "[1, 2]", length=2),
                             "after": variable("list", "[1, 2, 3]", length=3)}
    assert (changed["a"]["before"]["shape"], changed["a"]["after"]["shape"]) == ([2, 3], [3, 2])
    assert changed["a"]["after"]["type"] == "ndarray"
    assert changed["df"]["after"]["shape"] == [2, 2] and "y" in changed["df"]["after"]["repr"]


ARRAYS = {  # (setup, cell, changed?)
    "a cell that only reads them": ("", "print(a.sum(), df.shape, s.mean())", set()),
    "equal copies": ("", "a = a.copy()\ndf = df.copy()\ns = s.copy()", set()),
    "NaNs where they were": ("a[0, 0] = np.nan", "a = a.copy()", set()),
    "one element": ("", "a = a.copy()\na[5, 5] = -1", {"a"}),
    "a dtype": ("", "a = a.astype('float32')", {"a"}),
    "a shape": ("", "a = a.reshape(50, 200)", {"a"}),
    "one cell of a frame": ("", "df = df.copy()\ndf.loc[3, 'n'] = -1", {"df"}),
    "a column's name": ("", "df = df.rename(columns={'n': 'm'})", {"df"}),
    "the index's name": ("", "df = df.rename_axis('row')", {"df"}),
    "a series' name": ("", "s = s.rename('other')", {"s"}),
    "an object array": ("o = np.array([{'k': 1}, None], dtype=object)",
                        "o = np.array([{'k': 2}, None], dtype=object)", {"o"}),
}


@pytest.mark.parametrize("setup, code, changed", ARRAYS.values(), ids=ARRAYS)
def test_arrays_and_frames_compare_by_shape_dtype_and_content(kernel, setup, code, changed):
    base = branch(kernel, "import numpy as np\nimport pandas as pd\n"
                          "a = np.arange(10000.0).reshape(100, 100)\n"
                          "df = pd.DataFrame({'n': range(1000), 't': [str(i) for i in range(1000)]})\n"
                          "s = pd.Series([1.5, np.nan], name='s')\n" + setup)
    assert set(kernel.diff(base, branch(kernel, code, base))["changed"]) == changed


def test_past_its_bound_the_diff_says_it_did_not_compare(kernel):
    base = branch(kernel, "import numpy as np\nbig = np.zeros(1000)\nsmall = [1]\n"
                          "many = list(range(50))")
    after = branch(kernel, "big = big.copy()\nsmall = [1]\nmany = list(many)", base)
    kernel.compare_limits = (1000, 4000)  # objects, bytes: the array is 8,000
    changed = kernel.diff(base, after)["changed"]
    assert set(changed) == {"big"}
    assert changed["big"]["not_compared"] == ("it holds more array data than the diff "
                                              "compares (0.0 MB in all)")
    assert changed["big"]["before"] == variable("ndarray", changed["big"]["before"]["repr"],
                                                shape=[1000])
    kernel.compare_limits = (10, 10 ** 6)
    changed = kernel.diff(base, after)["changed"]
    assert "more objects than the diff compares (10 in all)" in changed["many"]["not_compared"]


def test_a_comparison_that_fails_in_library_code_says_so(kernel):
    base = branch(kernel, "import numpy as np\nclass Odd(np.ndarray):\n"
                          "    def __reduce_ex__(self, protocol):\n"
                          "        raise RuntimeError('no reduction')\n"
                          "odd = np.zeros(3).view(Odd)")
    after = branch(kernel, "odd = np.zeros(3).view(Odd)", base)
    changed = kernel.diff(base, after)["changed"]
    assert changed["odd"]["not_compared"].startswith("a Odd has no value to compare "
                                                     "(RuntimeError")


def test_objects_without_a_value_are_not_compared_and_say_why(kernel):
    base = branch(kernel, "import threading\nlock = threading.Lock()")
    after = branch(kernel, "lock = threading.Lock()", base)
    changed = kernel.diff(base, after)["changed"]
    assert changed["lock"]["not_compared"].startswith("a lock has no value to compare")


def test_a_figure_compares_by_what_it_shows(kernel):
    base = branch(kernel, "import matplotlib\nmatplotlib.use('Agg')\n"
                          "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                          "line, = ax.plot([1, 2, 3])\nplt.close(fig)")
    assert kernel.diff(base, branch(kernel, "print(fig, ax, line)", base))["changed"] == {}
    moved = branch(kernel, "line.set_ydata([3, 2, 1])", base)
    assert set(kernel.diff(base, moved)["changed"]) == {"fig", "ax", "line"}


def test_a_state_and_its_exported_and_imported_copy_diff_empty(kernel):
    base = branch(kernel, VALUE_SETUP + "import numpy as np\nimport pandas as pd\n"
                  "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                  "df = pd.DataFrame({'x': np.arange(1000.0), 'c': ['a', 'b'] * 500})\n"
                  "stats = df.describe()\nw = np.linspace(0, 1, 50)\nlr = 0.1\n"
                  "p = Point(1, [2, {'k': (3,)}])\nadd = adder(5)\n"
                  "ts = pd.Series(range(24), index=pd.date_range('2020-01', periods=24, "
                  "freq='MS'))\nfig, ax = plt.subplots()\nts.plot(ax=ax)\nplt.close(fig)",
                  name="before")
    writer, lost = kernel.export_state(base)
    assert lost == {}
    kernel.import_state("after", io.BytesIO(b"".join(writer.chunks())))
    assert kernel.diff("before", "after") == {"from": "before", "to": "after", "added": {},
                                              "removed": {}, "changed": {}}


def test_a_name_an_import_lost_is_removed(kernel):
    base = branch(kernel, "import threading\nlock = threading.Lock()\nx = 1", name="held")
    writer, lost = kernel.export_state(base)
    assert set(lost) == {"lock"}
    kernel.import_state("moved", io.BytesIO(b"".join(writer.chunks())))
    diff = kernel.diff("held", "moved")
    assert (set(diff["removed"]), diff["changed"]) == ({"lock"}, {})


def test_a_state_against_itself_and_against_initial(kernel):
    made = branch(kernel, "import json\nx = 1\n__hidden__ = 2")
    assert kernel.diff(made, made) == {"from": made, "to": made, "added": {}, "removed": {},
                                       "changed": {}}
    backwards = kernel.diff(made, "initial")
    assert set(backwards["removed"]) == {"json", "x"}  # no dunders
    assert backwards["removed"]["json"]["type"] == "module"
    assert backwards["added"] == backwards["changed"] == {}


def test_two_sibling_branches_compare_directly(kernel):
    base = branch(kernel, "x = 1")
    left = branch(kernel, "x = 2\ny = 'l'", base)
    right = branch(kernel, "x = 3\nz = 'r'", base)
    diff = kernel.diff(left, right)
    assert (diff["added"], diff["removed"]) == ({"z": variable("str", "'r'", length=1)},
                                                {"y": variable("str", "'l'", length=1)})
    assert diff["changed"]["x"] == {"before": variable("int", "2"), "after": variable("int", "3")}


@pytest.mark.parametrize("before, after", [("nope", "initial"), ("initial", "nope")])
def test_an_unknown_state_on_either_side_is_refused(kernel, before, after):
    with pytest.raises(UnknownState, match="no state named 'nope'"):
        kernel.diff(before, after)


def test_reprs_that_fail_or_hang_do_not_fail_the_diff(kernel):
    kernel.describe_budget = 0.3
    base = branch(kernel, "import threading\nrelease = threading.Event()\n"
                          "class Bad:\n    def __repr__(self):\n        raise ValueError\n"
                          "class Slow:\n    def __repr__(self):\n        release.wait(5)\n"
                          "        return 'slow'\nslow = 1")
    after = branch(kernel, "bad = Bad()\nslow = Slow()\nlater = 2", base)
    diff = kernel.diff(base, after)
    late = variable("?", "<repr did not finish within 0.3 s>")
    assert diff["added"] == {"bad": variable("Bad", "<repr failed: ValueError>"),
                             "later": variable("int", "2")}
    assert diff["changed"] == {"slow": {"before": late, "after": late,  # Bad, Slow: same
                                        "not_compared": "the comparison did not finish "
                                                        "within 0.3 s"}}
    ok(kernel, "release.set()", base)  # the Event is shared by reference: the repr ends


def test_states_loaded_from_a_state_directory_diff_alike(tmp_path):
    first = SnapshotKernel(state_dir=str(tmp_path))
    base = branch(first, "big = list(range(5))\nx = 1\ndef f():\n    return 1\n"
                         "class C:\n    def m(self):\n        return f()", name="base")
    after = branch(first, "x = 2\nbig.append(5)\nnew = C().m()", base, name="after")
    expected = first.diff(base, after)
    first.close()
    second = SnapshotKernel(state_dir=str(tmp_path))
    assert second.diff(base, after) == expected
    assert set(expected["changed"]) == {"x", "big"} and set(expected["added"]) == {"new"}
    second.close()


# -- over HTTP ----------------------------------------------------------------------------

@pytest.fixture
def app(kernel):
    app = webtest.TestApp(create_app(kernel, TOKEN))
    app.authorization = ("Bearer", TOKEN)
    return app


def test_the_diff_route_answers_the_kernels_diff_for_names_urls_would_mangle(app, kernel):
    name = "a b?c#d%"
    branch(kernel, "x = 1", name=name)
    reply = app.get("/states/initial/diff/a%20b%3Fc%23d%25")
    assert reply.json == kernel.diff("initial", name)
    assert reply.json["added"] == {"x": variable("int", "1")}


@pytest.mark.parametrize("path", ["/states/nope/diff/initial", "/states/initial/diff/nope"])
def test_the_diff_route_of_an_unknown_state_is_404(app, path):
    reply = app.get(path, expect_errors=True)
    assert reply.status_int == 404 and "no state named 'nope'" in reply.json["error"]


def test_the_diff_route_needs_the_token(app):
    app.authorization = None
    assert app.get("/states/initial/diff/initial", expect_errors=True).status_int == 401
