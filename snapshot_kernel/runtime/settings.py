"""What a state carries besides its namespace, and how a cell takes it on.

A ``Process`` is what a cell ended with, by how each kind is held (``kinds``): the
values of the kinds held per cell that its lineage changed (``held``), the thread's
own settings (``own``), the process-wide ones (``shared``), and the values of its
``contextvars`` context. A cell starts from its parent's: it takes the held values on
its thread (``take``), the thread's settings and context are made for it, and the
``Gate`` lets it run beside other cells unless their process-wide values cannot share
the process, in which case it waits, visibly, and its timeout has not started.
"""

import contextvars
import copy
import decimal
import sys
import threading
import time

from . import held as _held
from .held import imported
from .fs import SettingError  # noqa: F401 (raised by take: the kernel catches it here)
from .generators import NUMPY, RANDOM
from .kinds import (_LIBRARY_FAILURES, HELD, NOTHING, PROCESS, SCOPES, THREAD, carried,
                    read_all)
from .legacy import converted

SLICE = 0.05  # seconds between checks of a cell waiting for others to be done
VERSION = 2   # of what ``saved`` writes: held kinds keep what cells changed


class Process:
    """Immutable: the settings and context a state's cell ended with. ``context`` is
    None for a state loaded from disk: its ``own`` then holds every thread setting,
    the carried ones too."""

    __slots__ = ("held", "shared", "own", "context")

    def __init__(self, held, shared, own, context=None):
        self.held, self.shared, self.own, self.context = held, shared, own, context

    def new_context(self):
        """A context holding copies of this one's values, for a cell to run in."""
        context = contextvars.Context()
        for var, value in self.context or ():
            context.run(var.set, _copied(value))
        return context

    def claims(self, server):
        """What a cell from this state asks of the process (see ``Gate``): each active
        process-wide kind's value, and the held kinds' that a thread cannot own here."""
        claims = {}
        for each in active(PROCESS):
            claims[each.name] = self.shared.get(each.name, each.baseline())
        for each in _SOMETIMES_SHARED:
            if not each.per_thread():
                claims[each.name] = each.resolved(self.held.get(each.name), server)
        return claims

    def take(self, server, drawing=True):
        """Give the calling thread this state's held settings; the ``Held`` to pass to
        ``after`` and ``release``. Raises SettingError if one cannot be taken. Not
        ``drawing``: the thread will not draw random numbers (a repr in a describe), so
        it takes no generator."""
        taken = _held.Held(self.held, server)
        _held.take(taken)
        kinds = active(HELD)
        entered = {each.name for each in kinds}
        if not drawing:
            entered -= _DRAWING
        try:
            for each in kinds:
                if each.enter is not None and each.name in entered:
                    each.enter(taken, self.held.get(each.name))
            for each in active(THREAD):
                if each.enter is not None:
                    each.enter(taken, None)
        except SettingError:
            release(taken)
            raise
        taken.entered = entered
        return taken

    def enter_thread(self):
        """Give the running thread this state's own settings (run in its new context)."""
        for each in active(THREAD):
            if not (self.context is not None and carried(each)):
                _restore(each, self.own)  # (a carried one, the context has)

    def after(self, taken, context, shared):
        """The Process a cell that started from this one ended with, holding ``taken``,
        in ``context``, leaving the process-wide settings ``shared`` (``Gate.leave``)."""
        held = _held_after(self.held, taken)
        uncarried = [each for each in active(THREAD) if not carried(each)]
        own = context.run(_changed, self.own, uncarried) if uncarried else self.own
        if (held is self.held and shared is self.shared and own is self.own
                and self.context == () and not context):
            return self  # nothing changed and no context: the common cell shares its parent's
        values = tuple((var, _copied(value)) for var, value in context.items())
        return Process(held, shared, own, values)

    def saved(self):
        """What a state directory keeps: the settings, carried ones read from the
        context (whose keys, context variables, cannot be pickled)."""
        own = self.own
        if self.context is not None:
            own = {**own, **self.new_context().run(read_all, THREAD)}
        return {"version": VERSION, "held": self.held, "shared": self.shared, "own": own}

    @classmethod
    def loaded(cls, saved):
        if saved.get("version") != VERSION:
            saved = converted(saved)
        return cls(saved["held"], saved["shared"], saved["own"])


def _held_after(values, taken):
    """The held values a cell holding ``taken`` leaves: ``values`` itself if unchanged."""
    after, working = None, taken.working
    for each in SCOPES[HELD]:
        if each.lazy and each.name not in working and (
                each.first is None or each.name in taken.entered):
            continue  # made no working copy: the cell did not reach it
        value = values.get(each.name)
        if each.name in taken.entered:
            now = each.leave(taken, value)
        elif each.first is not None and each.library in sys.modules and each.active():
            now = each.first(taken, value)  # the cell imported the library: it holds it now
            taken.entered.add(each.name)
        else:
            continue
        if now is not value:
            if after is None:
                after = dict(values)
            if now is None:
                after.pop(each.name, None)
            else:
                after[each.name] = now
    return values if after is None else after


def release(taken):
    """The cell holding ``taken`` is over: its thread holds nothing now."""
    for each in _RELEASING:
        if each.name in taken.entered:
            each.release(taken)
    taken.working.clear()
    _held.take(None)


def process_values():
    """The process-wide settings as they are now (for ``put_back``)."""
    return read_all(PROCESS)


def put_back(values):
    """Make the process hold ``values`` (from ``process_values``) again."""
    for each in SCOPES[PROCESS]:
        if each.name in values and each.active() and not each.unchanged(values[each.name]):
            each.write(values[each.name])
    GATE.forget()


def shared_now(shared):
    """``shared`` with what the process holds now where that differs (a checkpoint's)."""
    return _changed(shared, active(PROCESS))


def initial():
    """The Process of a state made now, on this thread: the random generators as the
    server has them, the thread's settings a new thread has, an empty context; every
    other setting the server's own."""
    drawn = {each.name: each.read(each.shared()) for each in (RANDOM, NUMPY) if each.active()}
    return Process(drawn, {}, read_all(THREAD), ())


def _changed(before, kinds):
    """``before`` itself if no setting of ``kinds`` changed, else a new dict."""
    after = None
    for each in kinds:
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
    value = values.get(each.name)
    if value is None:
        if each.fresh is None:
            return
        value = each.fresh()
    if not each.unchanged(value):
        each.write(value)


class Gate:
    """Process-wide settings are one per process: a cell runs beside others only if
    what it claims of the process (``Process.claims``) can share it with what they
    claim (``Kind.why_apart``). Else it waits, in slices so an interrupt reaches it,
    and says for whom and why (``run.waiting``); its timeout starts once it runs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._left = threading.Event()  # set (and replaced) when a cell leaves
        self._waiting = 0   # cells waiting for one to leave
        self._running = {}  # id(run) -> (run, its claims, the attributes its code may set)
        self._current = {}  # kind name -> what the process holds, as far as the gate knows

    def enter(self, run, claims, patching=()):
        """Wait until the process can hold ``claims``, make it so, and count the cell in.
        ``patching``: the module attributes the cell's code may set (it runs alone).
        Returns True if other cells are running beside it; None, counting nothing in,
        if ``run`` is asked to stop while it waits."""
        began = None
        while True:
            with self._lock:
                blockers = self._blockers(claims, patching) if self._running else ()
                if not blockers:
                    if began is not None:
                        run.waited = dict(run.waiting,
                                          seconds=round(time.monotonic() - began, 3))
                    run.waiting = None
                    self._apply(claims)
                    self._running[id(run)] = (run, claims, patching)
                    run.running_since = time.monotonic()
                    return len(self._running) > 1
                if run.interrupt_requested:
                    run.waiting = None
                    return None
                began = began or time.monotonic()
                run.waiting = _waiting(run.waiting, blockers)
                self._waiting += 1
                left = self._left
            left.wait(SLICE)
            with self._lock:
                self._waiting -= 1

    def _blockers(self, claims, patching):
        found = []
        for other, theirs, their_patching in self._running.values():
            for names in (patching, their_patching):
                if names:
                    found.append((other, f"module attributes: {', '.join(names)} (a cell "
                                         "that sets them runs alone)"))
            for each in _CLAIMING:
                if each.name in claims and each.name in theirs:
                    why = each.why_apart(claims[each.name], theirs[each.name])
                    if why is not None:
                        found.append((other, why))
        return found

    def _apply(self, claims):
        """Write the claimed process-wide values where the process differs."""
        for each in SCOPES[PROCESS]:
            if each.name not in claims:
                continue
            wanted = claims[each.name]
            if wanted is NOTHING:
                if each.fresh is None or any(entry[1].get(each.name, NOTHING) is not NOTHING
                                              for entry in self._running.values()):
                    continue  # it claims nothing, and another cell's value stays
                wanted = each.fresh()
            if self._current.get(each.name, _UNKNOWN) is wanted:
                continue
            self._current.pop(each.name, None)  # unknown until the write is done
            try:
                if not each.unchanged(wanted):
                    each.write(wanted)
            except _LIBRARY_FAILURES:
                continue
            self._current[each.name] = wanted

    def leave(self, run, shared, alongside):
        """Count the cell out; ``(its state's process-wide values, what it changed of
        them while other cells ran)``. A kind the process holds as the gate knew it keeps
        ``shared``'s value; one that differs is the cell's doing (or a cell's beside it:
        ``alongside``, or others still running, says that it may be)."""
        with self._lock:
            claims = self._running.pop(id(run), (None, {}, ()))[1]
            others = alongside or bool(self._running)
            after, changed = shared, []
            for each in active(PROCESS):
                known = self._current.get(each.name, _UNKNOWN)
                if known is _UNKNOWN:
                    known = shared.get(each.name, claims.get(each.name, NOTHING))
                try:
                    if known is not NOTHING and each.unchanged(known):
                        continue
                    value = each.read()
                except _LIBRARY_FAILURES:
                    continue
                self._current[each.name] = value
                if after is shared:
                    after = dict(shared)
                baseline = each.baseline()
                if baseline is not NOTHING and value == baseline:
                    after.pop(each.name, None)
                else:
                    after[each.name] = value
                if known is not NOTHING:  # (a library the cell imported changed nothing)
                    changed.append(each.why_apart(known, value) or each.name)
            if self._waiting:
                self._left.set()
                self._left = threading.Event()
        return after, (changed if others else [])

    def forget(self):
        """Code outside cells changed the process's settings: read them at the next cell."""
        with self._lock:
            self._current.clear()

    def apply_if_idle(self, claims):
        """Make the process hold ``claims`` if no cell runs; counts nothing in, so what
        then runs (a repr that never returns, say) holds no cell back."""
        with self._lock:
            if not self._running:
                self._apply(claims)


def _waiting(before, blockers):
    """``Execution.waiting``: every execution and setting the cell has waited for."""
    before = before or {"for": [], "settings": []}
    return {"for": sorted(set(before["for"]) | {other.exec_id for other, _ in blockers}),
            "settings": sorted(set(before["settings"]) | {why for _, why in blockers})}


def active(holding):
    """The kinds of ``holding`` whose libraries are imported: made again once a module was
    imported since (every cell asks, and imports are rare)."""
    size = len(sys.modules)
    found = _ACTIVE.get(holding)
    if found is not None and found[0] == size:
        return found[1]
    kinds = [each for each in SCOPES[holding] if each.active()]
    if not any(each.library in sys.modules and not imported(each.library)
               for each in SCOPES[holding] if each.library is not None):
        _ACTIVE[holding] = (size, kinds)  # (not while one is half imported by a thread)
    return kinds


_ACTIVE = {}  # holding -> (len(sys.modules) then, its active kinds)
_UNKNOWN = object()
_DRAWING = frozenset({"random", "numpy.random"})  # kinds a thread that does not draw skips
_CLAIMING = SCOPES[PROCESS] + SCOPES[HELD]  # kinds that may be claimed of the process
_RELEASING = [each for each in SCOPES[HELD] if each.release is not None]
_SOMETIMES_SHARED = [each for each in SCOPES[HELD] if each.per_thread is not None]

GATE = Gate()  # one per process, as the settings it guards: every kernel in it shares it
