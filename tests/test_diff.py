"""GET /states/<a>/diff/<b>: what a branch did, name by name, with type and repr each side."""

import pytest
import webtest

from conftest import TOKEN
from helpers import ok
from snapshot_kernel.errors import UnknownState
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app


def branch(kernel, code, state="initial", name=None):
    return ok(kernel, code, state, new_state_name=name)["state_name"]


def variable(type_name, text):
    return {"type": type_name, "repr": text}


def test_a_branch_shows_what_it_added_removed_and_changed(kernel):
    base = branch(kernel, "a = 1\nb = [1]\nc = 'gone'\nkeep = 2")
    after = branch(kernel, "a = 2\ndel c\nd = {'k': 3}\nb.append(2)", base)
    assert kernel.diff(base, after) == {
        "from": base, "to": after,
        "added": {"d": variable("dict", "{'k': 3}")},
        "removed": {"c": variable("str", "'gone'")},
        "changed": {"a": {"before": variable("int", "1"), "after": variable("int", "2")},
                    "b": {"before": variable("list", "[1]"),
                          "after": variable("list", "[1, 2]")}}}


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
}


@pytest.mark.parametrize("code", UNCHANGING.values(), ids=UNCHANGING)
def test_a_name_a_cell_only_touched_is_not_changed(kernel, code):
    """The store copies a function or class anew when a cell touches it: still the same."""
    base = branch(kernel, DEFINITIONS)
    diff = kernel.diff(base, branch(kernel, code, base))
    assert diff["changed"] == {} and diff["removed"] == {}
    assert set(diff["added"]) <= {"alias", "D", "_"}  # _: the last expression's value


REDEFINITIONS = {
    "a function": ("def f(n=1):\n    return n", "f"),
    "a function, the same text on the same line": ("pass\npass\ndef f(n=1):\n    return n", "f"),
    "a method": ("class C:\n    k = 1\n    def m(self):\n        return 3", "C"),
    "a class with another name": ("class C:\n    pass\nC.__qualname__ = 'E'", "C"),
    "a function bound to a class's name": ("C = f", "C"),
}


@pytest.mark.parametrize("code, name", REDEFINITIONS.values(), ids=REDEFINITIONS)
def test_a_redefinition_is_a_change_even_of_the_same_text(kernel, code, name):
    base = branch(kernel, DEFINITIONS)
    assert set(kernel.diff(base, branch(kernel, code, base))["changed"]) == {name}


def test_a_rebinding_to_an_equal_object_is_a_change_with_equal_reprs(kernel):
    base = branch(kernel, "b = [1]")
    diff = kernel.diff(base, branch(kernel, "b = [1]", base))
    assert diff["changed"] == {"b": {"before": variable("list", "[1]"),
                                     "after": variable("list", "[1]")}}


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
    assert (diff["added"], diff["removed"]) == ({"z": variable("str", "'r'")},
                                                {"y": variable("str", "'l'")})
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
    assert diff["changed"] == {"slow": {"before": late, "after": late}}  # Bad, Slow: same
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
