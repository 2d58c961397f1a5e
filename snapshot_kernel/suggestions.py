"""A cell's NameError says "Did you mean", the same on every Python this runs on.

CPython 3.12 and later add ``. Did you mean: 'df'?`` (or ``. Did you forget to
import 'sys'?``) to a NameError's formatted last line, looking the name up among
the frame's globals and builtins; 3.10 and 3.11 print it from the interpreter's
own exception display, which formatted tracebacks never pass through, and 3.9
not at all. A cell's globals are only the names it may touch (the rest of its
state was not copied in), so the kernel offers the state's names as well, with
CPython's own measure of closeness: a Levenshtein distance where a change of
case costs 1 and any other edit 2, within ``(len(a) + len(b) + 3) // 3``.
"""

import re
import sys

MAX_CANDIDATES = 750  # as CPython: past this many names, no suggestion is looked for
MAX_NAME = 40         # nor for a longer name
_MOVE, _CASE = 2, 1   # the costs of an edit and of a change of case
_UNDEFINED = re.compile(r"name '(\w+)' is not defined$")
_HINTED = (". Did you mean", ". Did you forget")


def with_suggestion(error, candidates):
    """``error`` (a cell's error dict), its last traceback line ending with a suggestion
    if it is a NameError for a name close to one of ``candidates()`` (names, called
    only then), or one of the standard library's modules; unchanged otherwise."""
    if error["ename"] != "NameError" or not error["traceback"]:
        return error
    last = error["traceback"][-1]
    missing = _UNDEFINED.search(error["evalue"])
    if missing is None or any(hint in last for hint in _HINTED):
        return error
    name = missing.group(1)
    hint = suggestion(name, candidates())
    if hint is not None:
        added = f". Did you mean: {hint!r}?"
    elif name in getattr(sys, "stdlib_module_names", ()):
        added = f". Did you forget to import {name!r}?"
    else:
        return error
    line = last.rstrip("\n") + added + ("\n" if last.endswith("\n") else "")
    return dict(error, traceback=[*error["traceback"][:-1], line])


def suggestion(wrong, candidates):
    """The name among ``candidates`` nearest to ``wrong``, if near enough; else None."""
    names = {name for name in candidates if isinstance(name, str) and name != wrong}
    if len(names) > MAX_CANDIDATES or len(wrong) > MAX_NAME:
        return None
    best, found = len(wrong), None
    for name in sorted(names):
        bound = min((len(name) + len(wrong) + 3) * _MOVE // 6, best - 1)
        distance = _distance(wrong, name, bound)
        if distance <= bound and (found is None or distance < best):
            found, best = name, distance
    return found


def _distance(a, b, bound):
    """The edit distance of ``a`` and ``b`` (costs above), or more than ``bound``."""
    if a == b:
        return 0
    if abs(len(a) - len(b)) * _MOVE > bound:
        return bound + 1
    row = [index * _MOVE for index in range(len(b) + 1)]
    for i, char in enumerate(a, 1):
        previous, row[0] = row[0], i * _MOVE
        lowest = row[0]
        for j, other in enumerate(b, 1):
            cost = 0 if char == other else _CASE if char.lower() == other.lower() else _MOVE
            previous, row[j] = row[j], min(row[j] + _MOVE, row[j - 1] + _MOVE, previous + cost)
            lowest = min(lowest, row[j])
        if lowest > bound:
            return bound + 1
    return row[-1]
