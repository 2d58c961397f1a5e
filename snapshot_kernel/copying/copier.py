"""Deep-copy a namespace so that the copy behaves like an independent process.

``copy.deepcopy`` treats functions and classes as atomic, so a function copied
with it keeps reading the globals of the namespace that defined it. The copier
here follows deepcopy's protocol (``__deepcopy__``, copyreg, ``__reduce_ex__``)
with one memo for the whole namespace, so aliases stay aliases at any depth,
and in addition (its entry points, ``copy_names`` and ``copy_more``, are in
``names.py``)

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

import itertools
import threading
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

    def rollback(self, mark):
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

