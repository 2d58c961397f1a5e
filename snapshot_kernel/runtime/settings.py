"""What a state carries besides its namespace, and how it is put back before a cell.

A ``Process`` is what a cell's thread ended with: the process-wide settings
(``kinds.PROCESS``: working directory, environment, ``sys.path``, random
generators, library options ...), the thread's own (``kinds.THREAD``: the
``decimal`` context, numpy's print and error options, scikit-learn's config),
and the values of its ``contextvars`` context. A child's cell starts from its
parent's: the thread's settings and context are made for it on its thread, and
the process-wide ones are written by the ``Gate``, which lets cells run at once
only while they start from the same process-wide settings.
"""

import contextvars
import copy
import decimal
import threading

from .kinds import _LIBRARY_FAILURES, PROCESS, SCOPES, THREAD, carried, read_all

SLICE = 0.05  # seconds between checks of a cell waiting for other settings to be done
_MISSING = object()  # a setting the state has no value for (its library came later)


class ProcessSettingError(RuntimeError):
    """A setting of the state could not be put back (its working directory is gone, say)."""


class Process:
    """Immutable: the settings and context a state's cell ended with. ``context``
    is None for a state loaded from disk: its ``own`` then holds every thread
    setting, the carried ones too."""

    __slots__ = ("shared", "own", "context")

    def __init__(self, shared, own, context=None):
        self.shared, self.own, self.context = shared, own, context

    def new_context(self):
        """A context holding copies of this one's values, for a cell to run in."""
        context = contextvars.Context()
        for var, value in self.context or ():
            context.run(var.set, _copied(value))
        return context

    def enter_thread(self):
        """Give the running thread this state's own settings (run in its new context)."""
        for each in SCOPES[THREAD]:
            if each.active() and not (self.context is not None and carried(each)):
                _restore(each, self.own)  # (a carried one, the context has)

    def after(self, context):
        """The Process a cell that started from this one ended with, in ``context``."""
        shared = _changed(self.shared, PROCESS)
        own = context.run(_changed, self.own, THREAD, True)
        if shared is self.shared and own is self.own and self.context == () and not context:
            return self  # nothing changed and no context: the common cell shares its parent's
        values = tuple((var, _copied(value)) for var, value in context.items())
        return Process(shared, own, values)

    def saved(self):
        """What a state directory keeps: the settings, carried ones read from the
        context (whose keys, context variables, cannot be pickled)."""
        own = self.own
        if self.context is not None:
            own = {**own, **self.new_context().run(read_all, THREAD)}
        return {"shared": self.shared, "own": own}

    @classmethod
    def loaded(cls, saved):
        return cls(saved["shared"], saved["own"])


def initial():
    """The Process of a state made now, on this thread: the server's own settings, and
    an empty context (whose carried settings are the defaults a new thread has)."""
    return Process(read_all(PROCESS), read_all(THREAD), ())


def _changed(before, scope, skip_carried=False):
    """``before`` itself if no setting of ``scope`` changed, else a new dict."""
    after = None
    for each in SCOPES[scope]:
        if not each.active() or (skip_carried and carried(each)):
            continue
        try:
            if each.name in before and each.unchanged(before[each.name]):
                continue
            value = each.read()
        except _LIBRARY_FAILURES:
            continue
        if after is None:
            after = dict(before)
        after[each.name] = value
    return before if after is None else after


_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes})
_UNCOPYABLE = set()  # types deepcopy failed on: their values are shared without a new try


def _copied(value):
    """A private copy of a context value; shared if it cannot be copied (a lock, say)."""
    kind = type(value)
    if kind in _ATOMS or kind in _UNCOPYABLE:
        return value
    if kind is dict and all(type(item) in _ATOMS for item in value.values()):
        return dict(value)  # numpy's print options: 0.2 µs, where deepcopy takes 5
    if kind is decimal.Context:
        return value.copy()
    try:
        return copy.deepcopy(value)
    except (TypeError, ValueError, AttributeError, copy.Error, RecursionError):
        _UNCOPYABLE.add(kind)
        return value


def _restore(each, values):
    """Write kind ``each``'s value in ``values`` (a fresh import's, if it has none) where the
    current one differs."""
    value = values.get(each.name, _MISSING)
    if value is _MISSING:
        if each.fresh is None:
            return
        value = each.fresh()
    if not each.unchanged(value):
        each.write(value)


def apply_shared(target):
    """Write the process-wide settings ``target`` wherever the process differs."""
    for each in SCOPES[PROCESS]:
        if not each.active():
            continue
        try:
            _restore(each, target)
        except OSError as exc:
            raise ProcessSettingError(f"the state's {each.name} could not be restored "
                                      f"({exc}); run the cell on another state, or make it "
                                      "valid again from a cell on another state") from None


class Gate:
    """Process-wide settings are one per process: cells run at once only while they
    start from equal ones. A cell from other settings waits (in slices, so an
    interrupt reaches it) until the running cells end, then its settings are
    written."""

    def __init__(self, current):
        self._condition = threading.Condition()
        self._current = current  # what the process holds, as far as the gate knows
        self._running = 0
        self._alone = False  # the running cell must run alone (``_alone``)

    def enter(self, wanted, run=None):
        """Wait until the process can hold ``wanted``, make it so, and count the cell in.
        Returns True if other cells are running beside it; None, counting nothing in,
        if execution ``run`` is asked to stop while it waits."""
        alone = _alone(wanted)
        with self._condition:
            while self._running and (alone or self._alone or not _same(self._current, wanted)):
                if run is not None and run.interrupt_requested:
                    return None
                self._condition.wait(SLICE)
            if not _same(self._current, wanted):
                self._current = None  # unknown until the writes are done
                apply_shared(wanted)
                self._current = wanted
            self._running += 1
            self._alone = alone
            return self._running > 1

    def forget(self):
        """Code outside cells changed the process's settings: check them at the next cell."""
        with self._condition:
            self._current = None

    def apply_if_idle(self, wanted):
        """Make the process hold ``wanted`` if no cell runs; counts nothing in, so what
        then runs (a repr that never returns, say) holds no cell back."""
        with self._condition:
            if not self._running:
                self._current = None
                apply_shared(wanted)
                self._current = wanted

    def leave(self, after):
        """Count a cell out; ``after`` is what the process held when it ended."""
        with self._condition:
            self._running -= 1
            self._alone = False
            self._current = after
            others = self._running > 0
            self._condition.notify_all()
        return others


def _alone(wanted):
    """True if settings ``wanted`` hold a value that cannot be shared by two cells at once
    (a function of a cell in a module attribute, which reads the running cell's globals)."""
    for each in _ALONE:
        value = wanted.get(each.name)
        if value is not None and each.alone(value):
            return True
    return False


_ALONE = [each for each in SCOPES[PROCESS] if each.alone is not None]


def _same(current, wanted):
    return current is not None and (current is wanted or current == wanted)


GATE = Gate(None)  # one per process, as the settings it guards: every kernel in it shares it
