"""The copier's type table: which handler copies a type, and how a copy is known to be
identical to the stored object it came from.

Handlers are registered by type (``register``), library ones by the support
module of their library, imported the first time a type of that library is
met (``LIBRARY_SUPPORT``), so numpy, pandas and matplotlib stay optional.
"""

import importlib
import threading
import types

_MISS = object()

# Copied as themselves: immutable, or (modules, descriptors) shared by design.
ATOMIC = frozenset({
    type(None), int, float, bool, complex, str, bytes, range, type(Ellipsis),
    type(NotImplemented), types.CodeType, types.ModuleType,
    types.WrapperDescriptorType, types.MethodDescriptorType,
    types.GetSetDescriptorType, types.MemberDescriptorType,
    types.ClassMethodDescriptorType,
})


class Uncopyable(Exception):
    """A value could not be deep-copied."""


class ChangedWhileCopied(RuntimeError):
    """Another thread changed a value while it was being copied."""


class PartShared(str):
    """Why a name is listed under ``shared`` when it holds a part of a value shared whole
    (``alias = obj.items``, ``obj`` holding a generator): it must be copied with that value
    to be the part itself (``states.working``)."""

    __slots__ = ()


class Pending:
    """An element whose copy has begun and needs the walk: yield it."""

    __slots__ = ("obj", "work", "mark")

    def __init__(self, obj, work, mark):
        self.obj, self.work, self.mark = obj, work, mark


_exact = {}          # type -> handler(copier, obj), for that type only
_inherited = {}      # type -> handler, for it and its subclasses
_resolved = {}       # cache of library types' handlers (None: the default path)
_registry_lock = threading.Lock()
# Libraries with a support module (``snapshot_kernel.libraries.<name>``), imported the
# first time a type of that library is met; or of one module of it, where the support is
# for that module's types and importing the module would cost a process that never did
# (scikit-learn's Tree: 50 ms, and ``sklearn.tree`` in its ``sys.modules``).
LIBRARY_SUPPORT = {"numpy": "numpy", "pandas": "pandas", "matplotlib": "matplotlib",
                   "sklearn.tree._tree": "sklearn", "sqlite3": "sqlite3", "_thread": "_thread"}
_loaded = set()


def register(cls, handler, subclasses=False):
    """Copy instances of ``cls`` (and of its subclasses, if asked) with ``handler``.

    ``handler(copier, obj)`` returns the copy, or a generator that yields the
    objects it needs copied, receives each copy, and returns the new object.
    """
    with _registry_lock:
        (_inherited if subclasses else _exact)[cls] = handler
        _resolved.clear()


def handler_for(cls):
    """The handler for instances of ``cls``, or None for the generic path."""
    found = _exact.get(cls, _MISS)
    if found is not _MISS:
        return found
    found = _resolved.get(cls, _MISS)
    if found is not _MISS:
        return found
    load_support(cls)
    found = _exact.get(cls)
    if found is None:
        found = next((_inherited[base] for base in cls.__mro__ if base in _inherited), None)
    if cls.__module__ != "__main__":  # cells make classes without end: don't pin them
        _resolved[cls] = found
    return found


def load_support(cls):
    """Import the support module of the library ``cls`` (or a base) comes from, once: it
    registers the library's copy handlers (and its comparers, ``values``)."""
    for base in cls.__mro__:
        module = getattr(base, "__module__", None)
        if not isinstance(module, str):  # Cython 3.1's function type has a descriptor there
            continue
        for key in (module.partition(".")[0], module):
            if key in LIBRARY_SUPPORT and key not in _loaded:
                _loaded.add(key)
                importlib.import_module(f"..libraries.{LIBRARY_SUPPORT[key]}", __package__)


def same_contents(new, origin):
    """True if ``new`` (just built) holds exactly the objects ``origin`` holds."""
    check = _SAME.get(type(new))
    return check is not None and check(new, origin)


def _same_sequence(new, origin):
    return len(new) == len(origin) and all(a is b for a, b in zip(new, origin))


def _same_dict(new, origin):
    return len(new) == len(origin) and all(
        k1 is k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(new.items(), origin.items()))


_SAME = {list: _same_sequence, tuple: _same_sequence, dict: _same_dict}


# Values whose copies are equal when they are the same: a same-check compares them with ==.
VALUES = frozenset({int, float, complex, str, bytes, bool, type(None)})


def equal_values(a, b):
    """``a == b`` for two ``VALUES`` of one type, NaN equal to NaN."""
    return a == b or a != a and b != b


def has_same_check(cls):
    """True if ``cls`` has a check of its own (``register_same``)."""
    return cls in _SAME


def register_same(cls, check):
    """Let ``check(new, origin)`` tell a stored copy of a ``cls`` from its origin."""
    _SAME[cls] = check


UNPINNED = set()  # types whose working copies the kernel must not keep alive


def register_unpinned(cls):
    """Instances of ``cls`` refuse some changes while anything else refers to them
    (``ndarray.resize``): running code must hold the only references to their copies."""
    UNPINNED.add(cls)


def is_dunder(name):
    """True for names like ``__name__``: Python's and libraries' own."""
    return isinstance(name, str) and name.startswith("__") and name.endswith("__")
