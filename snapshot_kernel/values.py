"""Whether two stored objects hold the same value: what ``GET /states/<a>/diff/<b>``
calls unchanged.

A copy of a value is equal to it: the store makes new objects for what a cell copies
in and out, an export and an import make new objects of everything, and a cell may
bind a name again to an equal value. So values are compared by what they hold,
never by identity alone, and never with the objects' ``==`` (user code, which may
not give a bool): numbers, strings and bytes by value (a NaN equals a NaN),
containers element by element, functions and classes by their code and what they
carry (defaults, closures, attributes; never their globals, the state's own),
library types by the comparer their support module registers (numpy arrays and
pandas objects: type, shape, dtype and content), and anything else by its
reduction, the value pickle and the copier rebuild it from: the same callable,
arguments and state. An object with no reduction (a lock, a generator) equals
only itself.

The work is bounded (``Budget``): past a number of objects or of bytes of array
data, ``equal`` raises ``NotCompared``, and the diff says so rather than guess.
Reductions run user code, on the diff's cell thread, behind the user-code
boundary: one that raises leaves that name not compared.
"""

import copyreg
import math
import types

from . import cell
from .copying import dispatch

MAX_OBJECTS = 1_000_000      # objects one diff may visit on each side
MAX_BYTES = 1 << 30          # bytes of array data one diff may compare on each side
_VALUE_TYPES = frozenset({type(None), bool, int, complex, str, bytes, bytearray, range,
                           type(Ellipsis), type(NotImplemented), types.CodeType})
# Not part of a class's definition: its own descriptors, made anew for each class, and
# the cache copyreg adds the first time an instance is reduced.
_CLASS_OWN = frozenset({"__dict__", "__weakref__", "__slotnames__"})
_MEMBERS = ("__defaults__", "__kwdefaults__", "__dict__")
_comparers = {}   # type -> comparer(a, b, budget): pairs to compare, or None if unequal
_inherited = {}   # type -> comparer, for it and its subclasses
_resolved = {}    # type -> the comparer found for it (not cells' classes: they never end)


class NotCompared(Exception):
    """Two values could not be compared within the budget, or at all: ``str()`` says why."""


class Budget:
    """What one diff may still spend: objects visited and bytes of array data."""

    def __init__(self, objects=MAX_OBJECTS, data=MAX_BYTES):
        self.objects, self.data = objects, data
        self.objects_limit, self.data_limit = objects, data
        self.kept = {}  # what comparers keep for the rest of the diff (a figure's image)

    def spend(self, objects=0, data=0):
        """Spend the work about to be done, or raise ``NotCompared`` without spending it
        if it would pass a limit (what it would have cost stays for smaller values)."""
        if objects > self.objects:
            raise NotCompared(f"it holds more objects than the diff compares "
                              f"({self.objects_limit:,} in all)")
        if data > self.data:
            raise NotCompared(f"it holds more array data than the diff compares "
                              f"({_megabytes(self.data_limit)} in all)")
        self.objects -= objects
        self.data -= data


def _megabytes(count):
    return f"{count / 2 ** 20:,.1f} MB" if count < 2 ** 30 else f"{count / 2 ** 30:,.1f} GB"


def register_comparer(cls, comparer, subclasses=False):
    """Compare instances of ``cls`` (and its subclasses, if asked) with
    ``comparer(a, b, budget)``: an iterable of pairs that must all be equal too, or
    None if ``a`` and ``b`` differ. Support modules of libraries call it."""
    (_inherited if subclasses else _comparers)[cls] = comparer
    _resolved.clear()


def equal(first, second, budget):
    """True if ``first`` and ``second`` hold the same value (see the module's doc);
    raises ``NotCompared`` past ``budget`` or for values that cannot be told apart."""
    todo, seen, kept = [(first, second)], set(), []
    while todo:
        a, b = todo.pop()
        if a is b or (id(a), id(b)) in seen:
            continue  # a pair met again is equal unless something else says otherwise
        seen.add((id(a), id(b)))
        kept.append((a, b))  # temporaries (reductions) must keep their ids till the end
        budget.spend(objects=1)
        pairs = _pairs(a, b, budget)
        if pairs is None:
            return False
        todo.extend(pairs)
    return True


def _pairs(a, b, budget):
    """The pairs ``a`` and ``b`` are equal if all of them are; None if they differ."""
    kind = type(a)
    first = ()
    if type(b) is not kind:
        if not _named_alike(kind, type(b)):
            return None
        first = [(kind, type(b))]  # copies of one class: equal if their definitions are
    pairs, failed = cell.call_user(_comparer(kind), a, b, budget)  # library code runs
    if failed is not None:
        cell.drop_tracebacks(failed)
        if isinstance(failed, NotCompared):
            raise failed
        raise NotCompared(f"comparing a {cell.safe_type_name(a)} failed "
                          f"({type(failed).__name__})") from None
    return None if pairs is None else [*first, *pairs]


def _comparer(kind):
    found = _comparers.get(kind) or _resolved.get(kind)
    if found is None:
        dispatch.load_support(kind)
        found = _comparers.get(kind) or next(
            (_inherited[base] for base in kind.__mro__ if base in _inherited), _reduced)
        if kind.__module__ != "__main__":
            _resolved[kind] = found
    return found


# -- Python's types --------------------------------------------------------------------

def _by_value(a, b, budget):
    return () if a == b else None


def _floats(a, b, budget):
    return () if a == b or (math.isnan(a) and math.isnan(b)) else None


def _sequences(a, b, budget):
    if len(a) != len(b):
        return None
    if _all_values(a) and _all_values(b) and a == b:  # C compares them: no user code runs
        budget.spend(objects=len(a))
        return ()
    return zip(a, b)


def _all_values(items):
    return all(type(item) in _VALUE_TYPES for item in items)


def _plain_key(key):
    """A key hashed and compared by value in C: a value, a float, or a tuple of them."""
    kind = type(key)
    return kind in _VALUE_TYPES or kind is float or (
        kind is tuple and all(map(_plain_key, key)))


def _dicts(a, b, budget):
    """Plain keys looked up (no user code runs); other keys paired in order, which copies
    keep."""
    if len(a) != len(b):
        return None
    if not (all(map(_plain_key, a)) and all(map(_plain_key, b))):
        return [*zip(a, b), *zip(a.values(), b.values())]
    if any(key not in b for key in a):
        return None
    return [(a[key], b[key]) for key in a]


def _sets(a, b, budget):
    if len(a) != len(b):
        return None
    budget.spend(objects=len(a))
    if _all_values(a) and _all_values(b):
        return () if a == b else None
    raise NotCompared("a set of objects that are not plain values")


def _modules(a, b, budget):
    return () if a.__name__ == b.__name__ else None


def _functions(a, b, budget):
    """Copies of one function: the same code wherever it starts (a code object's ==
    leaves out its file, which an import renames) and name, and equal defaults,
    closures and attributes."""
    mine, theirs = a.__closure__ or (), b.__closure__ or ()
    if (_unplaced(a.__code__) != _unplaced(b.__code__) or a.__qualname__ != b.__qualname__
            or len(mine) != len(theirs)):
        return None
    pairs = [(getattr(a, name), getattr(b, name)) for name in _MEMBERS]
    for x, y in zip(mine, theirs):
        if _filled(x) != _filled(y):
            return None
        if _filled(x):
            pairs.append((x.cell_contents, y.cell_contents))
    return pairs


def _unplaced(code):
    """``code`` as if it started on line 1, and the code nested in it too: line numbers
    after the first are kept relative to it, so the same text anywhere compares equal."""
    consts = tuple(_unplaced(const) if isinstance(const, types.CodeType) else const
                   for const in code.co_consts)
    return code.replace(co_firstlineno=1, co_consts=consts)


def _filled(cell_):
    try:
        cell_.cell_contents
    except ValueError:  # an empty cell: a name bound later in the enclosing function
        return False
    return True


def _classes(a, b, budget):
    """Copies of one class: the same name, bases, and what their namespaces hold."""
    if not _named_alike(a, b) or len(a.__bases__) != len(b.__bases__):
        return None
    mine = {key: value for key, value in vars(a).items() if key not in _CLASS_OWN}
    theirs = {key: value for key, value in vars(b).items() if key not in _CLASS_OWN}
    if mine.keys() != theirs.keys():
        return None
    return [*zip(a.__bases__, b.__bases__), *((mine[key], theirs[key]) for key in mine)]


def _named_alike(a, b):
    return (getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
            and getattr(a, "__module__", None) == getattr(b, "__module__", None))


def _wrapped(a, b, budget):
    if type(a) is property:
        return [(a.fget, b.fget), (a.fset, b.fset), (a.fdel, b.fdel)]
    return [(a.__func__, b.__func__)]


def _bound(a, b, budget):
    if getattr(a, "__name__", None) != getattr(b, "__name__", None):
        return None
    return [(a.__self__, b.__self__), *([(a.__func__, b.__func__)]
                                        if isinstance(a, types.MethodType) else ())]


def _reduced(a, b, budget):
    """Any other object: by its reduction, as pickle and the copier see it."""
    mine, theirs = _reduction(a), _reduction(b)
    if isinstance(mine, str) or isinstance(theirs, str):  # a global, named
        return () if mine == theirs else None
    if len(mine) != len(theirs):
        return None
    return zip(mine, theirs)


def _reduction(value):
    """``value``'s reduction, its iterators made lists; NotCompared if it has none."""
    reducer = getattr(type(value), "__reduce_ex__", None)
    reduced, failed = cell.call_user(
        lambda: reducer(value, 4) if reducer is not None else copyreg.__reduce_ex__(value, 4))
    if failed is not None:
        cell.drop_tracebacks(failed)
        raise NotCompared(f"a {cell.safe_type_name(value)} has no value to compare "
                          f"({type(failed).__name__}: {cell.safe_repr(failed, 200)})")
    if isinstance(reduced, str):
        return reduced
    if not isinstance(reduced, tuple):
        raise NotCompared(f"a {cell.safe_type_name(value)} reduces to no tuple")
    listed, failed = cell.call_user(
        lambda: tuple(list(part) if index in (3, 4) and part is not None else part
                      for index, part in enumerate(reduced)))
    if failed is not None:
        cell.drop_tracebacks(failed)
        raise NotCompared(f"the items of a {cell.safe_type_name(value)} could not be listed")
    return listed


for _kind in _VALUE_TYPES:
    register_comparer(_kind, _by_value)
register_comparer(float, _floats)
for _kind in (list, tuple):
    register_comparer(_kind, _sequences)
register_comparer(dict, _dicts)
for _kind in (set, frozenset):
    register_comparer(_kind, _sets)
register_comparer(types.ModuleType, _modules)
register_comparer(types.FunctionType, _functions)
register_comparer(type, _classes, subclasses=True)
for _kind in (staticmethod, classmethod, property):
    register_comparer(_kind, _wrapped)
for _kind in (types.MethodType, types.BuiltinMethodType):
    register_comparer(_kind, _bound)
