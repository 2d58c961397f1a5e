"""The copier's generic path: an object's own ``__deepcopy__``, or its reduce value
rebuilt as pickle would, with every part going through the copier."""

import copyreg
import itertools
import sys

from . import deepcopy_hook
from .dispatch import VALUES, equal_values, has_same_check, same_contents


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
                origin = (self._stored_origin(obj, copied, state)
                          if storing and sys.getrefcount(new) == references else None)
                if origin is not None:
                    self.memo[id(obj)] = origin
                    return origin
                _set_state(new, copied)
            finally:
                self.inside_object -= 1
        return new

    def _stored_origin(self, obj, copied, state):
        """The stored object ``obj`` was copied from, if its reduce state holds the very
        objects ``copied`` (the copy of ``obj``'s reduce ``state``) holds: a model a cell
        only read is the stored one, not a new copy to store and save."""
        origin = self.origins.get(id(obj))
        if type(origin) is not type(obj) or has_same_check(type(obj)):
            return None  # (a check of its own, ``_finish`` runs it)
        rv = _reduce(origin)
        if rv is None or not _plain(origin, rv):
            return None
        theirs = rv[2] if len(rv) > 2 else None
        if _same_state(copied, theirs):
            return origin
        if not _same_reduction(copied, state, theirs, _ANY):  # (spares most a second reduce)
            return None
        again = _reduce(origin)  # (what the reduce makes each time differs between the two)
        if again is None or len(again) != len(rv):
            return None
        return origin if _same_reduction(copied, state, theirs, again[2]) else None

    def _reduced_origin(self, obj, copied, mine):
        """The stored object ``obj`` was copied from and its reduce value twice (a second
        time to tell what its reduce makes each time from what it holds), if the copy of
        ``obj``'s reduce function and arguments (``copied``, of ``mine``) stand for the
        origin's (``_same_reduction``), so it may be the origin: a pandas Index, block or
        extension array a cell only read, which reduce to new tuples and dicts each time.
        None if not, or if ``obj``'s type has a check of its own
        (``dispatch.register_same``, which ``_finish`` runs). Compared before the function
        runs: it may change its arguments (pandas' ``_new_Index`` adds to its dict)."""
        origin = self.origins.get(id(obj))
        if type(origin) is not type(obj) or has_same_check(type(obj)):
            return None
        theirs = _reduce(origin)
        if (theirs is None or isinstance(theirs, str)
                or any(part is not None for part in theirs[3:5])  # (items to add back)
                or not _same_reduction(copied, mine, theirs[:2], _ANY)):
            return None
        again = _reduce(origin)
        if again is None or not _same_reduction(copied, mine, theirs[:2], again[:2]):
            return None
        return origin, theirs[2] if len(theirs) > 2 else None, again[2] if len(again) > 2 else None

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
        """Generator: rebuild ``obj`` from its reduce value, copying the parts. When
        storing, a copy whose reduce value comes out as its origin's is the origin."""
        self.inside_object += 1
        try:
            new_func = yield func  # a cell's class or function rebuilds as the copied one
            new_args = yield args
            if id(obj) in self.memo:  # the args (a copied class) led back here and copied it
                return dict.__getitem__(self.memo, id(obj))
            # (as in _plain_instance: not for a class with __del__, nor if a cycle reached new)
            stored = (self._reduced_origin(obj, (new_func, new_args), (func, args))
                      if self.storing and listiter is None and dictiter is None
                      and id(obj) in self.origins else None)
            new = new_func(*new_args)
            self.memo[id(obj)] = new
            check = stored is not None and _special(new, "__del__") is None
            references = sys.getrefcount(new) if check else None
            new_state = None if state is None else (yield state)
            if check and sys.getrefcount(new) == references:
                origin, theirs, again = stored
                if _same_reduction(new_state, state, theirs, again):
                    self.memo[id(obj)] = origin
                    return origin
            if state is not None:
                _set_state(new, new_state)
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


def _reduce(obj):
    """``obj``'s reduce value as the copier takes it, or None if that raises (a library's
    ``__getstate__`` on a stored object: then it is not compared, and stays a copy)."""
    reducer = copyreg.dispatch_table.get(type(obj))
    try:
        return reducer(obj) if reducer is not None else obj.__reduce_ex__(4)
    except Exception:  # user code (a library's __getstate__) on a stored object
        return None


_FRESH_CONTAINERS = frozenset({tuple, list, dict})
_ANY = object()  # ``again`` not known yet: a first pass that takes any container as made anew


def _same_reduction(copied, mine, theirs, again):
    """True if ``copied``, the copy of ``mine`` (a part of a working object's reduce value),
    stands for ``theirs``, the same part of its stored origin's reduce value: the very
    object (its copy came out as it), one ``mine`` also is (a class's own list both
    reduce to), an equal number or string, or a tuple, list or dict holding such parts
    that the origin's reduce made for the occasion: ``again``, the part from a second
    reduce, is another object (``_ANY``: not known yet, any container may be). A
    container the origin holds must be the very one: a copy equal to it is a new object,
    and another name holding it would come apart."""
    if copied is theirs or mine is theirs:
        return True
    kind = type(copied)
    if kind is not type(theirs) or kind is not type(mine):
        return False
    unknown = again is _ANY
    if not unknown and kind is not type(again):
        return False
    if kind in VALUES:
        return equal_values(copied, theirs)
    if kind is slice:
        return all(_same_reduction(getattr(copied, part), getattr(mine, part),
                                   getattr(theirs, part), _ANY if unknown else getattr(again, part))
                   for part in ("start", "stop", "step"))
    if kind not in _FRESH_CONTAINERS or theirs is again:
        return False
    if not len(copied) == len(mine) == len(theirs) or not unknown and len(again) != len(theirs):
        return False
    agains = itertools.repeat(_ANY) if unknown else again
    if kind is dict:
        again_values = agains if unknown else again.values()
        return all(_same_reduction(*keys) and _same_reduction(*values) for keys, values in
                   zip(zip(copied, mine, theirs, agains),
                       zip(copied.values(), mine.values(), theirs.values(), again_values)))
    return all(_same_reduction(*parts) for parts in zip(copied, mine, theirs, agains))


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
