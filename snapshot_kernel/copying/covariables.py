"""Which names share objects (co-variables, as Kishu calls them), found while copying.

A copy's memo knows which name first reached each object it copied; when
another name reaches the same object, the two names belong together. Such
names must later be copied with one memo, or their aliasing would come apart.
"""

import sys


# immutable items a container holds by value, in effect
_PAYLOADS = frozenset({str, bytes, int, float})


_shallow = ()  # classes whose __sizeof__ counts what they reference (pandas frames)


def count_shallow(cls):
    """Count instances of ``cls`` (and subclasses) by their own size: their ``__sizeof__``
    adds the arrays they hold, which the copy counts once already, as arrays."""
    global _shallow
    _shallow = (*_shallow, cls)


def sizeof(obj):
    """``sys.getsizeof(obj)``, or 0 if a user ``__sizeof__`` fails."""
    try:
        if _shallow and isinstance(obj, _shallow):
            return object.__sizeof__(obj)
        return sys.getsizeof(obj)
    except Exception:  # a user __sizeof__ failed: the estimate is only smaller
        return 0


def footprint(obj):
    """The bytes of a new object, with the strings and numbers a list, tuple or dict holds."""
    kind = type(obj)
    if kind is dict:
        items = obj.values()
    elif kind is list or kind is tuple:
        items = obj
    else:
        return sizeof(obj)
    # (a list, not a generator: this runs for every object a state stores)
    return sizeof(obj) + sum([sys.getsizeof(item) for item in items if type(item) in _PAYLOADS])


class CoVariables:
    """Union-find over names, fed by a copier, with the bytes each name stored anew."""

    def __init__(self):
        self._owner = {}  # id of each original copied -> first name to reach it
        self._links = {}  # union-find parents
        self._weights = {}  # name -> bytes of the objects it reached
        self._fresh = {}  # name -> bytes of those that are new objects

    def copied(self, key, obj, name, fresh):
        """``name`` copied the original whose id is ``key`` to ``obj``, which is
        ``fresh`` if it is a new object rather than one stored already."""
        self._owner[key] = name
        self.add_bytes(name, footprint(obj), fresh)

    def owned(self, key, name):
        """``name`` reached the object whose id is ``key`` first, unless another did."""
        self._owner.setdefault(key, name)

    def atomic(self, name, value):
        """``name`` is bound to an immutable ``value`` (a str, an int): count its bytes."""
        self.add_bytes(name, sizeof(value), True)

    def add_bytes(self, name, size, fresh):
        """Count ``size`` bytes for ``name``, as new bytes if ``fresh``."""
        self._weights[name] = self._weights.get(name, 0) + size
        if fresh:
            self._fresh[name] = self._fresh.get(name, 0) + size

    def reached(self, key, name):
        """``name`` reached the already copied object whose id is ``key``."""
        first = self._owner.get(key)
        if first is not None and first != name:
            self._links[self._root(name)] = self._root(first)

    def _root(self, name):
        while self._links.get(name, name) != name:
            name = self._links[name]
        return name

    def groups(self, names):
        """``{name: (frozenset of the names sharing objects with it, their bytes, the
        bytes of those that are new)}``."""
        members = {}
        for name in names:
            members.setdefault(self._root(name), set()).add(name)
        result = {}
        for group in members.values():
            spec = (frozenset(group), sum(self._weights.get(name, 0) for name in group),
                    sum(self._fresh.get(name, 0) for name in group))
            for name in group:
                result[name] = spec
        return result
