"""Copying names: the copier's entry points, and the moment and the collector they copy in.

``copy_names`` deep-copies names of one namespace into another with one memo
(``copier.Copier``), and returns the copier: what it shared, the code of the
functions it rebound, the copies it made and, when asked, which names share
objects. ``copy_more`` copies further names with the same memo, so names copied
apart stay aliases. Both run with the cyclic garbage collector off
(``collector_off``), and copy a value that a thread changes while it is copied
again, holding the interpreter long enough for one copy (``_copied_at_one_moment``).
A value shared whole has its parts shared in what is copied next; a part copied for
another name already makes the copy start again with it shared (``_copy_names``).
"""

import gc
import sys
import time

from .copier import Copier
from .dispatch import ATOMIC, ChangedWhileCopied

_RESTARTS = 4  # the most times one copy starts again to share parts (``_copy_names``)


def copy_names(source, names, target, aliases=(), track=False, replace=(), origins=None,
               buffers=None, globals_=None, seed=None, shared=None, find_parts=True):
    """Deep-copy ``source[name]`` into ``target[name]`` for each of ``names``,
    with one memo, and return the Copier (``shared``, ``codes``, ``made``, ``groups()``).

    Functions whose globals are a StoredNamespace or one of ``aliases`` are
    rebound to ``globals_`` (by default ``target``), and references to those
    namespaces become it; ``replace`` pairs ``(original, stand_in)`` name other
    objects to swap. With ``track``, it also records which names share objects
    and their sizes. ``origins`` maps ids of working objects to the stored
    objects they were copied from (a copy-in copier's ``made``, whose memo keeps
    them alive): a copy that comes out identical to its origin is the origin.
    ``buffers`` keeps large buffers copy-on-write (``cow.Buffers``), if given.
    ``seed`` (original's id -> copy) is what earlier copies made: an object they
    copied is not copied again, so names copied apart still share it. ``shared`` is
    ``(values, parts)``: the values that earlier copies shared whole and their parts
    (``Copier.shared_values``, ``Copier.shared_parts``), shared here too. Without
    ``find_parts``, the parts of a value shared whole are looked for only if the copy
    copied something else (no other name may hold one: the caller knows).
    Runs user code (``__deepcopy__``, ``__reduce_ex__``, ``__setstate__``,
    ``__init_subclass__``), so call it where user exceptions are handled.
    """
    namespace = target if globals_ is None else globals_

    def make():
        return Copier(namespace, aliases, track, replace, origins, buffers, seed, shared,
                      find_parts)
    return _written_behind(buffers, collector_off, _copy_names, source, names, target, make,
                           track)


def copy_more(copier, source, names, target):
    """Copy ``source[name]`` into ``target[name]`` for each of ``names`` with ``copier``,
    one that ``copy_names`` returned, as if they had been among its names."""
    return _written_behind(copier.buffers, collector_off, _copy_names, source, names, target,
                           lambda: copier, copier.covariables is not None)


def _written_behind(buffers, function, *args):
    """``function(*args)``, a copy, then a wait for the buffers it stored that are still
    being written to their files (``cow.Buffers.new``): nothing may read or keep them
    before. A copy that fails waits too, and raises its own error."""
    if buffers is None:
        return function(*args)
    copied = False
    try:
        result = function(*args)
        copied = True
    finally:
        buffers.written(raising=copied)
    return result


def collector_off(function, *args):
    """``function(*args)`` with Python's cyclic garbage collector off, for work that makes
    many objects and keeps them (a copy, a pickle's memo, an unpickled state)."""
    # Woken by every 700 new containers, the collector went through the process's objects
    # (every state's) again and again: 35-40% of copying a figure. Switched off inside the
    # try, so an interrupt anywhere after that switches it on again.
    enabled = gc.isenabled()  # (a cell may have switched it off itself: then it stays off)
    try:
        if enabled:
            gc.disable()
        return function(*args)
    finally:
        if enabled:
            gc.enable()


def _copy_names(source, names, target, make, track):
    """``copy_names``, with the collector off; ``make()`` gives the copier. If it shared
    a value whole, the value's parts are shared in what it copies next; if it had copied
    one of them for another name already, it copies everything again with the parts
    shared (``Copier.parts_to_share``, ``restart``)."""
    copier = _copy_each(source, names, target, make, track)
    if copier is _NOTHING_COPIED:
        return copier
    copier.calls.append((source, tuple(names), target))
    for _ in range(_RESTARTS):  # (each round shares more: the last finds nothing new)
        if not copier.shared_whole or not (copier.find_parts or copier.copied_anything()):
            break
        parts, copied = copier.parts_to_share()
        if not copied:
            copier.share_parts(parts)
            break
        copier.restart(parts)
        for source, names, target in copier.calls:
            _copy_each(source, names, target, lambda: copier, track)
    return copier


def _copy_each(source, names, target, make, track):
    """Copy each of ``names`` with the copier ``make()`` gives (made when first needed)."""
    copier = None  # made on the first value that needs one: most cells touch none
    for name in names:
        value = source[name]
        if type(value) in ATOMIC:  # no memo, nothing to track
            target[name] = value
            if track:
                copier = copier or make()
                copier.covariables.atomic(name, value)
            continue
        if copier is None:
            copier = make()
        copier.label = name
        try:
            target[name] = _copied_at_one_moment(copier, value)
        except MemoryError:
            raise MemoryError(f"not enough memory to copy {name!r}; nothing was "
                              "stored") from None
    if copier is None and track:
        copier = make()
    return copier or _NOTHING_COPIED


def _copied_at_one_moment(copier, value):
    """``copier.copy_or_share(value)``. A thread the cell started may change a value while
    its own code (a ``__getstate__`` looping over a dict) copies it: the copy is then made
    again while this thread keeps the interpreter, long enough for a copy like the one
    that failed, so that it is of one moment (other threads wait that long at most, or
    until C code in the copy lets them run, when it may fail again, saying so)."""
    took = 0.0  # how long the failed attempt copied
    for attempt in range(_ATTEMPTS):
        mark, began = len(copier.memo), time.perf_counter()
        interval = sys.getswitchinterval()
        if attempt:
            sys.setswitchinterval(min(_HOLD_SECONDS, max(interval, 4 * took)))
        try:
            return copier.copy_or_share(value)
        except ChangedWhileCopied:
            if attempt == _ATTEMPTS - 1:
                raise
            copier.rollback(mark)
            took = time.perf_counter() - began
        finally:
            sys.setswitchinterval(interval)


_ATTEMPTS = 4
_HOLD_SECONDS = 1.0  # the longest the copying thread keeps the interpreter from others


class _NothingCopied:
    """What ``copy_names`` returns when it copied nothing and tracked nothing."""

    made, codes, shared, memo, shared_parts = {}, (), {}, {}, {}

    def unpin(self):
        pass

    def shared_values(self):
        return {}


_NOTHING_COPIED = _NothingCopied()
