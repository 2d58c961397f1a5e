"""Deep-copy a namespace so that the copy behaves like an independent process.

``copy.deepcopy`` treats functions and classes as atomic, so a function copied
with it keeps reading the globals of the namespace that defined it. The copier
here follows deepcopy's protocol (``__deepcopy__``, copyreg, ``__reduce_ex__``)
with one memo for the whole namespace, so aliases stay aliases at any depth,
and in addition

* rebinds functions defined by cells (their ``__globals__`` is a stored state's
  namespace or the running one) to the target namespace, copying their closure
  cells, defaults and ``__dict__`` (``handlers.py``);
* copies classes defined by cells (``__module__ == "__main__"``, metaclass
  ``type`` or ``ABCMeta``), so class attributes are private to the copy and
  copied instances are instances of the copied class;
* dispatches on type to handlers registered in a table, the library ones
  (numpy, pandas, matplotlib) registered the first time a type of that
  library is met, so importing them stays optional;
* walks with an explicit stack: every handler is a generator that yields the
  objects it needs copied and receives their copies, so depth is unbounded;
* when storing, gives back the stored original instead of a copy that came out
  identical to it (``origins``), so a cell stores only what it changed;
* records, when asked, which names reach the same objects (co-variables);
* shares by reference what it cannot copy: modules always, and any value whose
  copy fails (locks, generators, open files, threads). A failure is contained
  at the nearest top-level name, class attribute or element of a list, dict or
  tuple; the reason is recorded under the top-level name, and a part of a value
  shared whole that another name holds is shared too (``sharing.py``). Lack of
  memory is not a reason to share: MemoryError propagates and fails the cell.
"""

import gc
import itertools
import sys
import threading
import time
import types
import weakref

from . import handlers, iterators  # noqa: F401 (each registers its handlers)
from .dispatch import (ATOMIC, UNPINNED, ChangedWhileCopied, Pending, Uncopyable, handler_for,
                       same_contents)
from .covariables import CoVariables
from .reducing import Reducing
from .sharing import Sharing

# These deep-copy "successfully" into something that no longer works.
_LIVE_TYPES = (threading.Thread,)
_MISS = object()
_INLINE_DEPTH = 32  # ``attempt`` copies elements recursively up to this depth
_CONTAINERS = (list, dict, tuple, type)  # a failed element or class attribute is shared alone
_RESTARTS = 4  # the most times one copy starts again to share parts (``_copy_names``)


# -- copying names ---------------------------------------------------------------------


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
    return collector_off(_copy_names, source, names, target, make, track)


def copy_more(copier, source, names, target):
    """Copy ``source[name]`` into ``target[name]`` for each of ``names`` with ``copier``,
    one that ``copy_names`` returned, as if they had been among its names."""
    return collector_off(_copy_names, source, names, target, lambda: copier,
                         copier.covariables is not None)


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
            copier._rollback(mark)
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


class Memo(dict):
    """The memo: id of an original -> its copy. ``get`` is what ``copy.deepcopy``
    calls from foreign ``__deepcopy__`` methods; it reports the hit, so names
    sharing objects only through such a method are still grouped."""

    def __init__(self, copier):
        super().__init__()
        self._copier = weakref.ref(copier)  # not a cycle: the memo would outlive the copy

    def get(self, key, default=None):
        value = dict.get(self, key, _MISS)
        if value is _MISS:
            return default
        self._copier().hit(key)
        return value


class Copier(Reducing, Sharing):
    MISS = _MISS  # what ``lookup`` returns for an object that needs copying

    def __init__(self, target, aliases=(), track=False, replace=(), origins=None,
                 buffers=None, seed=None, shared=None, find_parts=True):
        self.arguments = (target, aliases, track, replace, origins, buffers, seed, shared,
                          find_parts)
        self.find_parts = find_parts
        self.calls = []  # (source, names, target) of each copy made with it, for ``restart``
        self.target = target
        self.aliases = {id(namespace) for namespace in aliases}
        self.memo = Memo(self)
        if seed:
            self.memo.update(seed)
        for key in self.aliases:
            self.memo[key] = target
        self.keep_alive = list(aliases)
        for original, stand_in in replace:
            self.memo[id(original)] = stand_in
            self.keep_alive.append(original)
        self.origins = origins   # id(working object) -> the stored object it came from
        self.made = {}           # id(copy) -> original; the memo keeps the copies alive
        self.buffers = buffers
        self.shared = {}
        self.shared_reasons = {}
        self.shared_whole = {}  # id -> (value, the name copied) of values shared whole
        self.shared_parts = {}  # id -> (part, name, reason): parts of those, shared (``restart``)
        self.held = []  # (id, name): a value shared whole, ``name``, holds the shared ``id``
        self.lenient = False  # share any part that fails alone, even inside an object
        self.as_is = set()  # ids of what a lenient copy found and kept as it is (arrays)
        self.codes = []  # code of every function rebound: it may need more names
        self.label = None
        self.inside_object = 0  # > 0 while copying an object's reduce args and state
        self._depth = 0  # of ``attempt`` calls inside one another
        self.detach_arrays = 0  # > 0 inside pandas' block managers: see libraries/pandas.py
        self.made_classes = set()  # ids of the classes this copy made
        self.covariables = CoVariables() if track else None
        self.memo_from_arguments = len(self.memo)
        if shared:
            self.share_whole(shared[0])
            self.share_parts(shared[1])

    @property
    def storing(self):
        """True when copying out of an execution into a state (``origins`` given)."""
        return self.origins is not None

    # -- entry points ---------------------------------------------------------------

    def copy_or_share(self, value):
        """Copy ``value``; if that fails, forget the partial copy and share it.

        Inside an object's state a failure is the whole object's: an object
        copied with some of its parts shared (a Barrier with its Condition
        shared but its count copied) would be neither the original nor a copy.
        """
        mark = len(self.memo)
        try:
            return self.copy(value)
        except Uncopyable as exc:
            return self.share(value, exc, mark)

    def copy(self, obj):
        """Return the copy of ``obj``, raising Uncopyable if it has none."""
        found = self.lookup(obj)
        if found is not _MISS:
            return found
        return self._walk(obj)

    def lookup(self, obj):
        """The copy of ``obj`` if it needs no work (atomic, or copied already), else _MISS."""
        if type(obj) in ATOMIC:  # never a memo key: the memo holds originals it copied
            return obj
        key = id(obj)
        if key in self.memo:
            self.hit(key)
            return self.memo[key]
        return _MISS

    def attempt(self, obj):
        """For a container's element: its copy if that needs no generator, else a
        ``Pending`` that the container's handler must yield. Shares the element
        if it fails (but not inside an object: see ``_failed``)."""
        found = self.lookup(obj)
        if found is not _MISS:
            return found
        begun = len(self.memo)
        if self._depth >= _INLINE_DEPTH:  # this is recursion: leave deep ones to the walk
            return Pending(obj, None, begun)
        self._depth += 1
        try:
            work = self._start(obj)
        except Uncopyable as exc:
            if self.inside_object and not self.lenient:
                raise
            return self.share(obj, exc, begun)
        finally:
            self._depth -= 1
        if type(work) is types.GeneratorType:
            return Pending(obj, work, begun)
        return self._finish(obj, work)

    def unpin(self):
        """Let go of the copies whose type is unpinned (``register_unpinned``): the memo
        no longer refers to them, though ``made`` still maps their ids to their originals."""
        if UNPINNED:  # (keys only: a list of every item made the collector run, and run)
            for key in [key for key, new in self.memo.items() if type(new) in UNPINNED]:
                del self.memo[key]

    def hit(self, key):
        """Bookkeeping for a memo hit: sharing is contagious, and names reaching it group
        (a value shared whole too: a name may come to hold a part of it, ``sharing.py``)."""
        if self.shared_parts and key in self.shared_parts:
            self.hit_part(key)
            return
        if key in self.shared_reasons:
            self._note_shared(self.shared_reasons[key])
        if self.covariables is not None:
            self.covariables.reached(key, self.label)

    def groups(self, names):
        """``{name: (names sharing objects with it, their bytes)}``; needs ``track``."""
        return self.covariables.groups(names)

    # -- the walk --------------------------------------------------------------------

    def _walk(self, root):
        """Copy ``root`` with an explicit stack of handler generators.

        A handler yields each part it needs copied and gets the copy back. If a
        part fails, an element of a list, dict or tuple or an attribute of a
        class is shared alone (``_contains``); any other part's failure is thrown
        into its handler, which fails in turn.
        """
        stack = []  # (original, its handler's result, memo size when it began), outermost first
        mark = len(self.memo)
        obj, work = root, self._start(root)
        value = error = None
        try:
            while True:
                if type(work) is types.GeneratorType:
                    try:
                        request = work.send(value) if error is None else work.throw(error)
                    except StopIteration as stop:
                        value, error = self._finish(obj, stop.value), None
                    except Uncopyable as exc:
                        value, error = None, exc
                    except (MemoryError, ChangedWhileCopied):
                        raise
                    except RecursionError:  # inside a foreign __deepcopy__ or __reduce__
                        value, error = None, Uncopyable("too deeply nested to copy")
                    except Exception as exc:  # user __reduce_ex__/__setstate__/...: any failure means "cannot be copied"
                        _fail_if_changing(exc, self.label)
                        value, error = None, _uncopyable(exc)
                    else:
                        if type(request) is Pending:  # from ``attempt``
                            if request.work is not None:  # begun there
                                stack.append((obj, work, mark))
                                obj, work, mark, value = request.obj, request.work, request.mark, None
                                continue
                            request = request.obj
                        value, error = self.lookup(request), None
                        if value is not _MISS:
                            continue
                        begun = len(self.memo)
                        try:
                            child = self._start(request)
                        except Uncopyable as exc:
                            value, error = self._failed(obj, request, exc, begun)
                            continue
                        if type(child) is types.GeneratorType:
                            stack.append((obj, work, mark))
                            obj, work, mark, value = request, child, begun, None
                        else:
                            value = self._finish(request, child)
                        continue
                else:  # the root's handler returned its copy at once
                    value, error = self._finish(obj, work), None
                if not stack:
                    if error is not None:
                        raise error
                    return value
                failed, (obj, work, begun) = obj, stack.pop()
                if error is not None:
                    value, error = self._failed(obj, failed, error, mark)
                mark = begun
        finally:
            for _, pending, _ in reversed(stack):  # their cleanups run now, innermost first
                pending.close()

    def _failed(self, parent, part, error, mark):
        """``(value, error)`` to resume ``parent`` with after ``part`` failed."""
        if not self.lenient and (self.inside_object or not isinstance(parent, _CONTAINERS)):
            return None, error
        return self.share(part, error, mark), None

    def _start(self, obj):
        """Begin copying ``obj``: its handler's result, a copy or a generator."""
        cls = type(obj)
        try:
            handler = handler_for(cls)
            if handler is not None:
                return handler(self, obj)
            if isinstance(obj, type):
                return self._copy_class(obj)
            if isinstance(obj, _LIVE_TYPES):
                raise Uncopyable(f"a {cls.__name__} is a live resource")
            return self.copy_object(obj)
        except (Uncopyable, MemoryError, ChangedWhileCopied):
            raise
        except Exception as exc:  # user __deepcopy__/__reduce_ex__ raised before any yield
            _fail_if_changing(exc, self.label)
            raise _uncopyable(exc) from None

    def _finish(self, obj, new):
        """Record that ``new`` is the copy of ``obj`` (or its origin, if identical)."""
        key = id(obj)
        memo = self.memo
        if key in memo:  # a cycle back to obj may have copied it already
            new = memo[key]
        if new is not obj:
            self.keep_alive.append(obj)
            fresh = True
            if self.origins is None:
                self.made[id(new)] = obj
            else:  # storing: a copy identical to the stored object it came from is that object
                origin = self.origins.get(key, _MISS)
                if new is origin or type(origin) is type(new) and same_contents(new, origin):
                    new, fresh = origin, False  # (a handler may find it unchanged itself)
            if self.covariables is not None:
                self.covariables.copied(key, new, self.label, fresh)
        memo[key] = new
        return new

    def _rollback(self, mark):
        """Forget every copy made since the memo had ``mark`` entries."""
        for key in list(itertools.islice(reversed(self.memo), len(self.memo) - mark)):
            del self.memo[key]

    # -- classes ----------------------------------------------------------------------

    def _copy_class(self, cls):
        if cls.__module__ != "__main__":
            return cls  # defined by a module: shared with it
        return handlers.copy_cell_class(self, cls)

def _fail_if_changing(exc, name):
    """A container that changed size while it was iterated is not uncopyable: it is
    being written by another thread. Sharing it would let the stored state change."""
    if isinstance(exc, RuntimeError) and "during iteration" in str(exc):
        raise ChangedWhileCopied(
            f"{name!r} changed while it was being copied (a thread is still writing to "
            f"it: {exc}); nothing was stored. Stop the thread, or copy the value under a "
            "lock of your own, then run the cell again") from None


def _uncopyable(exc):
    return Uncopyable(f"cannot be deep-copied: {type(exc).__name__}: {exc}")

