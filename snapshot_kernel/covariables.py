"""Which names share objects (co-variables, as Kishu calls them), found while copying.

A copy's memo knows which name first reached each object it copied; when
another name reaches the same object, the two names belong together. Such
names must later be copied with one memo, or their aliasing would come apart.
"""

import sys


class CoVariables:
    """Union-find over names, fed by a copier, with the bytes each name copied."""

    def __init__(self):
        self._owner = {}  # id of each original copied -> first name to reach it
        self._links = {}  # union-find parents
        self._weights = {}  # name -> bytes of the objects it copied

    def copied(self, key, obj, name):
        """``name`` made the copy of ``obj`` (whose id is ``key``)."""
        self._owner[key] = name
        try:
            size = sys.getsizeof(obj)
        except Exception:  # a user __sizeof__ failed: the estimate is only smaller
            size = 0
        self._weights[name] = self._weights.get(name, 0) + size

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
        """``{name: (frozenset of the names sharing objects with it, their bytes)}``."""
        members = {}
        for name in names:
            members.setdefault(self._root(name), set()).add(name)
        result = {}
        for group in members.values():
            weight = sum(self._weights.get(name, 0) for name in group)
            for name in group:
                result[name] = (frozenset(group), weight)
        return result
