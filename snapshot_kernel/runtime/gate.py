"""The gate of what a process has only one of: two cells run at once unless what they
claim of the process (``settings.Process.claims``) cannot share it (``Kind.why_apart``),
and a cell that waits says for whom and why."""

import threading
import time

from .kinds import _LIBRARY_FAILURES, HELD, NOTHING, PROCESS, SCOPES, active

SLICE = 0.05  # seconds between checks of a cell waiting for others to be done


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


_UNKNOWN = object()
_CLAIMING = SCOPES[PROCESS] + SCOPES[HELD]  # kinds that may be claimed of the process

GATE = Gate()  # one per process, as the settings it guards: every kernel in it shares it
