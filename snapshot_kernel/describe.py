"""What GET /states/<name> says of a state (its metadata and each variable's type and
repr), and GET /states/<a>/diff/<b> of two (the names added, removed and changed,
values compared by ``values``).

Type names and reprs are the stored objects' own code, so they run behind the
user-code boundary, on a cell thread, reading the globals of the state. What
fails is reported in that variable's entry; what has not finished within the
time budget is reported as such, and the request answers anyway (the thread
goes on: a ``__repr__`` that never returns cannot be stopped, only not awaited).
"""

import builtins
import threading

from . import cell, values
from .copying.dispatch import is_dunder
from .copying.stored import reading
from .runtime import mainmodule, settings
from .states.storage import GONE
from .states.working import TOUCHED, Working

BUDGET = 10.0  # seconds the reprs of one state may take before the reply goes without them


def describe_state(state, repr_limit, threads, budget=BUDGET, as_cell=None):
    """The dict GET /states/<name> answers for ``state``. ``as_cell(describe)`` runs
    ``describe(retry)`` as a cell of the state would run (its settings, ``__main__``);
    ``retry(key)`` gives a repr that failed on the stored object another chance, on
    a working copy whose functions read the state's globals as a cell's do."""
    entries = _entries(state)

    def describe_all(found, retry=None):
        with reading(state.names):
            for key, entry in entries.items():
                found[key] = _described(_loaded(entry), repr_limit)
                if retry is not None and found[key]["repr"].startswith(cell.REPR_FAILED):
                    found[key] = dict(found[key], repr=retry(key))

    work = describe_all if as_cell is None else (
        lambda found: as_cell(lambda retry: describe_all(found, retry)))
    done = _on_cell_thread(threads, f"describe {state.name}", budget, work)
    variables = {key: done.get(key, _late(budget)) for key in entries}
    shared = {key: entry.shared for key, entry in entries.items() if entry.shared}
    lost = {key: entry.lost for key, entry in entries.items() if entry.lost}
    for key in lost:
        if variables.get(key, {}).get("repr") == repr(GONE):
            del variables[key]  # not in the state since the restart
    described = {"name": state.name, "timestamp": state.timestamp, "parent": state.parent,
                 "code": state.code, "variables": variables, "shared": shared, "lost": lost,
                 "approx_bytes": state.new_bytes,
                 "shared_bytes": state.total_bytes - state.new_bytes}
    described.update(state.meta)
    return described


def diff_states(before, after, repr_limit, threads, budget=BUDGET, work=None):
    """The dict GET /states/<a>/diff/<b> answers: the names ``after`` adds to
    ``before``, removes, and holds another value under, each side's type, shape or
    length, and repr.

    Values are compared by what they hold (``values.equal``), within ``work`` (a
    ``values.Budget``): a name bound again to an equal value, or copied by the store
    or by an export and an import, is unchanged. A name whose values could not be
    compared is listed as changed, with ``not_compared`` saying why.
    """
    old, new = _present(before), _present(after)
    removed = [key for key in old if key not in new]
    added = [key for key in new if key not in old]
    both = [key for key in new if key in old and old[key] is not new[key]]
    work = values.Budget() if work is None else work

    def compare(found):
        changing = []  # first which names changed (no reprs), so none waits on a slow repr
        for key in both:
            with reading(before.names):
                was = _loaded(old[key])
            with reading(after.names):
                now = _loaded(new[key])
            found["same", key], reason = _compared(was, now, work)
            if not found["same", key]:
                changing.append((key, was, now, reason))
        for side, state, entries, keys in (("removed", before, old, removed),
                                           ("added", after, new, added)):
            with reading(state.names):
                for key in keys:
                    found[side, key] = _described(_loaded(entries[key]), repr_limit, True)
        for key, was, now, reason in changing:
            with reading(before.names):
                was_described = _described(was, repr_limit, True)
            with reading(after.names):
                found["changed", key] = {"before": was_described,
                                         "after": _described(now, repr_limit, True),
                                         **({"not_compared": reason} if reason else {})}

    done = _on_cell_thread(threads, f"diff {before.name} {after.name}", budget, compare)
    late = {"before": _late(budget), "after": _late(budget),
            "not_compared": f"the comparison did not finish within {budget:g} s"}
    return {"from": before.name, "to": after.name,
            "added": {key: done.get(("added", key), _late(budget)) for key in added},
            "removed": {key: done.get(("removed", key), _late(budget)) for key in removed},
            "changed": {key: done.get(("changed", key), late) for key in both
                        if not done.get(("same", key), False)}}


def _compared(was, now, work):
    """``(same, why not compared)`` of two values of one name."""
    if isinstance(was, _NotLoaded) or isinstance(now, _NotLoaded):
        return False, "a side could not be loaded from the state directory"
    try:
        return values.equal(was, now, work), None
    except values.NotCompared as exc:
        return False, str(exc)
    except RecursionError:  # a library's comparison that recursed too deep
        return False, "the values nest too deep to compare"


def _entries(state):
    """``{name: Entry}`` of the names a state shows: str names, no dunders."""
    return {cell.plain_name(key): entry for key, entry in state.names.entries().items()
            if isinstance(key, str) and not is_dunder(cell.plain_name(key))}


def _present(state):
    """``_entries`` but for the names the state lost (a restart, an export): not there."""
    return {key: entry for key, entry in _entries(state).items()
            if not (entry.lost and entry.value is GONE)}


class _NotLoaded:
    """A value a state directory could not give back, and why."""

    def __init__(self, failed):
        self.reason = type(failed).__name__


def _loaded(entry):
    """The entry's object, or ``_NotLoaded`` if its group could not be loaded from disk."""
    value, failed = cell.call_user(lambda: entry.value)
    if failed is not None:
        cell.drop_tracebacks(failed)
        return _NotLoaded(failed)
    return value


def _described(value, repr_limit, extent=False):
    """A value's type and repr; with ``extent``, its shape or length too, if it has one."""
    if isinstance(value, _NotLoaded):
        return {"type": "?", "repr": f"<could not be loaded: {value.reason}>"}
    described = {"type": cell.safe_type_name(value)}
    if extent:
        described.update(_extent(value))
    described["repr"] = cell.safe_repr(value, repr_limit)
    return described


_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset, range)


def _extent(value):
    """``{"shape": [...]}`` for an array or a frame, ``{"length": n}`` for a container."""
    if isinstance(value, _SIZED):
        return {"length": len(value)}
    if getattr(type(value), "shape", None) is None:  # read on the type: no user code
        return {}
    shape, failed = cell.call_user(lambda: value.shape)
    if failed is not None:
        cell.drop_tracebacks(failed)
        return {}
    if isinstance(shape, tuple) and all(type(size) is int for size in shape):
        return {"shape": list(shape)}
    return {}


def _late(budget):
    return {"type": "?", "repr": f"<repr did not finish within {budget:g} s>"}


def _on_cell_thread(threads, label, budget, work):
    """Run ``work(found)`` on a cell thread; a copy of the dict ``found`` as it
    stands when it returns or ``budget`` seconds have passed, whichever is first."""
    done = threading.Event()
    found = {}

    def run():
        work(found)
        done.set()

    threads.submit(run, f"snapshot-kernel {label}")
    done.wait(budget)
    return found.copy()  # one C call: atomic with respect to the thread still filling it


class Describing:
    """Mixed into SnapshotKernel: ``describe`` and ``diff``, reprs run as a cell's would."""

    def describe(self, name):
        """What GET /states/<name> answers: see ``describe_state``."""
        state = self._get(name)
        return describe_state(state, self.repr_limit, self._threads, self.describe_budget,
                              lambda describe: self._as_cell(state, describe))

    def _as_cell(self, state, describe):
        """Run ``describe(retry)`` as a cell of ``state`` would run: in its context with
        its settings, and its process-wide ones if no cell runs (a describe never waits
        for cells)."""
        process = self._process(state)
        _, failed = cell.call_user(self._gate.apply_if_idle, process.claims(self.server))
        if failed is not None:
            cell.drop_tracebacks(failed)
        try:
            taken = process.take(self.server, drawing=False)
        except settings.SettingError:  # its working directory is gone, say: the reprs go on
            taken = None
        try:
            process.new_context().run(self._describe_in_context, state, process, describe)
        finally:
            if taken is not None:
                settings.release(taken)

    def _describe_in_context(self, state, process, describe):
        process.enter_thread()
        working = Working(state, TOUCHED, self.buffers)

        def retry(key):  # only for a repr that failed: copying in costs
            working.namespace["__builtins__"] = builtins
            failed = cell.call_user(working.materialize, {key})[1]
            if failed is not None:
                cell.drop_tracebacks(failed)
                return f"{cell.REPR_FAILED}{type(failed).__name__}>"
            leave_main = mainmodule.running(working.namespace)
            try:
                return cell.safe_repr(working.namespace[key], self.repr_limit)
            finally:
                leave_main()

        describe(retry)

    def diff(self, before, after):
        """What GET /states/<a>/diff/<b> answers: see ``diff_states``."""
        return diff_states(self._get(before), self._get(after), self.repr_limit, self._threads,
                           self.describe_budget, values.Budget(*self.compare_limits))
