"""Which names share objects (co-variables, as Kishu calls them), found while copying.

A copy's memo knows which name first reached each object it copied; when
another name reaches the same object, the two names belong together. Such
names must later be copied with one memo, or their aliasing would come apart.
"""

import sys
from itertools import chain, compress, repeat
from operator import is_


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


def _footprint(objects):
    """The bytes of ``objects``, new objects, with the strings and numbers each list, tuple
    or dict of them holds. A few C loops over them all (``map``, ``compress``): counted one
    by one as they were copied, a figure's 120,000 objects took 120 ms of its copy out."""
    kinds = list(map(type, objects))
    try:
        if _shallow and any(issubclass(kind, _shallow) for kind in set(kinds)):
            raise TypeError  # (rare: a pandas frame) each counted as ``sizeof`` says
        total = sum(map(sys.getsizeof, objects))
    except Exception:  # or a user __sizeof__ failed: ``sizeof`` counts it as 0
        total = sum(map(sizeof, objects))
    dicts = compress(objects, map(is_, kinds, repeat(dict)))
    sequences = compress(objects, map(_SEQUENCES.__contains__, kinds))
    items = [*chain.from_iterable(map(dict.values, dicts)), *chain.from_iterable(sequences)]
    payloads = compress(items, map(_PAYLOADS.__contains__, map(type, items)))
    return total + sum(map(sys.getsizeof, payloads))


_SEQUENCES = frozenset({list, tuple})


class CoVariables:
    """Union-find over names, fed by a copier, with the bytes each name stored anew."""

    def __init__(self):
        self._owner = {}  # id of each original copied -> first name to reach it
        self._links = {}  # union-find parents
        self._weights = {}  # name -> bytes of the objects it reached
        self._fresh = {}  # name -> bytes of those that are new objects
        self._made = {}  # name -> (stored objects reached, new ones), not counted yet
        self._name, self._lists = None, None  # the last name copied, and its lists

    def copied(self, key, obj, name, fresh):
        """``name`` copied the original whose id is ``key`` to ``obj``, which is
        ``fresh`` if it is a new object rather than one stored already."""
        self._owner[key] = name
        if name != self._name:
            self._name, self._lists = name, self._made.setdefault(name, ([], []))
        self._lists[fresh].append(obj)  # counted when asked: ``_count``

    def _count(self):
        """Add the bytes of the objects ``copied`` listed to their names' counts, stored
        and new apart, and forget them: once per copy, in a few C loops (``_footprint``)."""
        for name, (stored, new) in self._made.items():
            self.add_bytes(name, _footprint(stored), False)
            self.add_bytes(name, _footprint(new), True)
        self._made.clear()
        self._name = None

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
        self._count()
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
