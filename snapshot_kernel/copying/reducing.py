"""The copier's generic path: an object's own ``__deepcopy__``, or its reduce value
rebuilt as pickle would, with every part going through the copier."""

import copyreg
import itertools
import sys

from . import deepcopy_hook
from .dispatch import same_contents


class Reducing:
    """What ``Copier`` does for types no handler is registered for (a mixin)."""

    def copy_object(self, obj):
        """The generic path: the object's own ``__deepcopy__``, else its reduce value."""
        deep = _special(obj, "__deepcopy__")
        if deep is not None:
            return self.foreign_deepcopy(obj, deep)
        return self.reduce_copy(obj)

    def reduce_copy(self, obj):
        """Copy ``obj`` from its reduce value, as pickle would rebuild it."""
        reducer = copyreg.dispatch_table.get(type(obj))
        rv = reducer(obj) if reducer is not None else obj.__reduce_ex__(4)
        if isinstance(rv, str):
            return obj  # a global looked up by name: the same object
        if _plain(obj, rv):
            return self._plain_instance(obj, rv[2] if len(rv) > 2 else None)
        return self.reconstruct(obj, *rv)

    def _plain_instance(self, obj, state):
        """Generator: ``reconstruct`` for a reduce value that ``_plain`` accepts, without
        copying the class and ``copyreg.__newobj__`` it holds (each a round of the walk).
        When storing, an instance whose state comes out as its origin's is the origin."""
        cls = type(obj)
        new = cls.__new__(cls)
        self.memo[id(obj)] = new
        if state is not None:
            self.inside_object += 1
            try:
                # Not for a class with __del__: it would run on the bare ``new`` dropped here.
                storing = self.storing and _special(new, "__del__") is None
                references = sys.getrefcount(new) if storing else None
                copied = yield state
                # (a copy that reached ``new`` itself, a cycle back here, holds it)
                origin = (self._stored_origin(obj, copied)
                          if storing and sys.getrefcount(new) == references else None)
                if origin is not None:
                    self.memo[id(obj)] = origin
                    return origin
                _set_state(new, copied)
            finally:
                self.inside_object -= 1
        return new

    def _stored_origin(self, obj, copied):
        """The stored object ``obj`` was copied from, if its reduce state holds the very
        objects ``copied`` (the copy of ``obj``'s state) holds: a model a cell only read
        is the stored one, not a new copy to store and save."""
        origin = self.origins.get(id(obj))
        if type(origin) is not type(obj):
            return None
        reducer = copyreg.dispatch_table.get(type(origin))
        try:
            rv = reducer(origin) if reducer is not None else origin.__reduce_ex__(4)
        except Exception:  # a library's __getstate__ on the stored object: then it is a copy
            return None
        if isinstance(rv, str) or not _plain(origin, rv):
            return None
        return origin if _same_state(copied, rv[2] if len(rv) > 2 else None) else None

    def foreign_deepcopy(self, obj, deep):
        """Generator: call ``obj``'s own ``__deepcopy__`` with the memo. Functions and
        classes it meets through ``copy.deepcopy`` are still copied here
        (``deepcopy_hook``), and a copy of a cell's class becomes an instance of the
        copied class."""
        cls = type(obj)
        twin = (yield cls) if cls.__module__ == "__main__" else cls
        mark = len(self.memo)
        with deepcopy_hook.active(self):
            new = deep(self.memo)
        if self.covariables is not None:  # what it added, it copied for this name
            for key in itertools.islice(reversed(self.memo), len(self.memo) - mark):
                self.covariables.copied(key, dict.__getitem__(self.memo, key), self.label, True)
        if type(new) is cls and twin is not cls:
            new.__class__ = twin
        return new

    def reconstruct(self, obj, func, args, state=None, listiter=None, dictiter=None, *_):
        """Generator: rebuild ``obj`` from its reduce value, copying the parts."""
        self.inside_object += 1
        try:
            func = yield func  # a cell's class or function rebuilds as the copied one
            args = yield args
            if id(obj) in self.memo:  # the args (a copied class) led back here and copied it
                return dict.__getitem__(self.memo, id(obj))
            new = func(*args)
            self.memo[id(obj)] = new
            if state is not None:
                _set_state(new, (yield state))
        finally:
            self.inside_object -= 1
        for item in list(listiter or ()):  # list(): one moment, even if a thread is writing
            new.append((yield item))
        for key, value in list(dictiter or ()):
            new[(yield key)] = yield value
        return new


def _plain(obj, rv):
    """True if the reduce value ``rv`` makes a bare instance of ``obj``'s class, a library's,
    then gives it a state: what most objects reduce to."""
    return (rv[0] is _NEWOBJ and len(rv[1]) == 1 and rv[1][0] is type(obj)
            and (len(rv) < 4 or rv[3] is None) and (len(rv) < 5 or rv[4] is None)
            and type(obj).__module__ != "__main__")


_NEWOBJ = copyreg.__newobj__


def _same_state(new, origin):
    """True if the reduce states ``new`` and ``origin`` hold the same objects: dicts, or
    ``(dict, slots)`` pairs of them (``copy._reconstruct``'s forms)."""
    if type(new) is tuple and type(origin) is tuple and len(new) == len(origin) == 2:
        return all(a is b or _same_state(a, b) for a, b in zip(new, origin))
    return type(new) is dict and type(origin) is dict and same_contents(new, origin)


def _set_state(new, state):
    """Apply a reduce ``state`` the way ``copy._reconstruct`` does."""
    setstate = _special(new, "__setstate__")
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        new.__dict__.update(state)
    for key, value in (slots or {}).items():
        setattr(new, key, value)


def _special(obj, name):
    """``obj``'s method ``name`` if its type defines one, else None. Special methods are
    looked up on the type, as Python does, not on the object as ``copy`` does: a
    ``__getattr__`` that hands out another object's attributes (``np.lib.Arrayterator``)
    would make the copy of a wrapper a copy of what it wraps."""
    for base in type(obj).__mro__:  # (a loop: a generator costs more than the lookups)
        if name in base.__dict__:
            return getattr(obj, name)
    return None
