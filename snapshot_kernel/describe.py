"""What GET /states/<name> says of a state: its metadata and each variable's type and repr.

Type names and reprs are the stored objects' own code, so they run behind the
user-code boundary, on a cell thread, reading the globals of the state. What
fails is reported in that variable's entry; what has not finished within the
time budget is reported as such, and the request answers anyway (the thread
goes on: a ``__repr__`` that never returns cannot be stopped, only not awaited).
"""

import threading

from . import cell
from .copying.dispatch import is_dunder
from .copying.stored import reading
from .states.storage import GONE

BUDGET = 10.0  # seconds the reprs of one state may take before the reply goes without them


def describe_state(state, repr_limit, threads, budget=BUDGET, as_cell=None):
    """The dict GET /states/<name> answers for ``state``. ``as_cell(fn, retry)`` runs
    ``fn()`` as a cell of the state would run (its settings, ``__main__``);
    ``retry(key)`` gives a repr failed on the stored object another chance, on a
    working copy whose functions read the state's globals as a cell's do."""
    entries = {cell.plain_name(key): entry for key, entry in state.names.entries().items()
               if isinstance(key, str) and not is_dunder(cell.plain_name(key))}
    variables = _variables(state, entries, repr_limit, threads, budget, as_cell)
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


def _variables(state, entries, repr_limit, threads, budget, as_cell):
    done = threading.Event()
    described = {}

    def describe_all(retry=None):
        with reading(state.names):
            for key, entry in entries.items():
                value, failed = cell.call_user(lambda: entry.value)
                if failed is not None:  # a group that could not be loaded from disk
                    described[key] = {"type": "?", "repr": f"<could not be loaded: "
                                                          f"{type(failed).__name__}>"}
                    cell.drop_tracebacks(failed)
                    continue
                text = cell.safe_repr(value, repr_limit)
                if retry is not None and text.startswith(cell.REPR_FAILED):
                    text = retry(key)
                described[key] = {"type": cell.safe_type_name(value), "repr": text}
        done.set()

    threads.submit((lambda: describe_all()) if as_cell is None else
                   (lambda: as_cell(describe_all)), f"snapshot-kernel describe {state.name}")
    done.wait(budget)
    late = {"type": "?", "repr": f"<repr did not finish within {budget:g} s>"}
    return {key: dict(described.get(key, late)) for key in entries}
