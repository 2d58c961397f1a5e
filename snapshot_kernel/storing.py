"""The kernel's side of a cell that ended: its new state stored (saved first, with a
state directory), then its reply given (``Storing``, a mixin of ``SnapshotKernel``).

Runs on the cell thread. A state is named (``state-N`` unless the request named it) and
reserved under the kernel lock, saved outside it, and put in the table under it again,
unless a reset came in between (``generation``): then the reply says so and nothing is
stored. A failed save is the cell's error, and nothing is stored either.
"""

import sys
import sqlite3
import traceback

from .execution import Outcome, judged, kernel_error, reply_for
from .states.storage import Namespace, State, sizes
from .states.store import StoreError


class Storing:
    """Stores what a cell made and replies; the kernel gives ``_lock``, ``_states``,
    ``_reserved``, ``_store``, ``_journal``, ``_runs``, ``_generation`` and
    ``_auto_names``."""

    def _finish(self, run, outcome):
        """Store the new state if the cell succeeded (saved first, with a state
        directory), then give the reply. Runs on the cell thread, after ``_disarm``."""
        state = None
        with self._lock:
            outcome = judged(run, outcome, self._generation)
            if outcome.error is None and not run.stuck and run.store:
                name = run.new_state_name or self._auto_name()
                self._reserved[name] = run
                state = self._child(name, run, outcome.stored, outcome.process)
        if self._store is not None:
            # Noted as running in the state directory if there is no journal, or once it
            # stored a checkpoint: then noted as ended in the transaction saving its state.
            noted = self._journal is None or bool(run.checkpoints)
            if state is not None:
                if self._journal is not None:  # a crash while saving: was it saved?
                    self._journal.saving(run.exec_id, state.name)
                failure = self._save(state, run.exec_id if noted else None)
                if failure is not None:
                    state, outcome = None, Outcome(error=failure)
            if state is None and noted and not self._closed:  # before the reply: a
                self._store.ended(run.exec_id)  # restart cannot report it; a stop does
        if self._journal is not None:  # likewise: a crash after the reply ended nothing
            run.capture.stop_mirror()  # before its slot is free for another execution
            self._journal.ended(run.exec_id)
        lost = state.names.lost() if state is not None else None  # inherited ones too
        with self._lock:
            if self._reserved.get(run.new_state_name) is run:
                del self._reserved[run.new_state_name]
            if state is not None:
                self._reserved.pop(state.name, None)
                if run.generation == self._generation:
                    self._states[state.name] = state
                else:
                    state, outcome = None, judged(run, outcome, self._generation)
            if not run.done.is_set():
                run.reply = reply_for(run, outcome, state and state.name,
                                      lost if state is not None else None)
                run.done.set()
            self._runs.end(run)

    def _save(self, state, exec_id):
        """None once ``state`` is in the state directory (its names that could not be
        saved marked ``lost``) and execution ``exec_id`` no longer noted as running
        there; else the error to reply."""
        try:
            self._store.save(state, exec_id)
        except (OSError, sqlite3.Error, StoreError) as exc:  # the disk is full
            return kernel_error("StoreError", f"the new state could not be saved to the "
                                f"state directory ({exc}); nothing was stored")
        except Exception as exc:  # a bug of ours, or a value's method failing twice: the
            traceback.print_exc(file=sys.__stderr__)  # cell still gets its reply
            return kernel_error("StoreError", f"the new state could not be saved to the "
                                f"state directory ({type(exc).__name__}: {exc}); nothing "
                                "was stored; the server log has the traceback")
        return None

    @staticmethod
    def _child(name, run, changes, process, **meta):
        """The state that ``changes`` (from ``Working.commit``) and the settings
        ``process`` make of the run's source."""
        parent = run.source
        names = Namespace(parent.names, changes) if changes else parent.names
        new_bytes, total_bytes = sizes(parent, changes)
        return State(name, names, run.state_name, run.code, new_bytes, total_bytes, meta=meta,
                     process=process or parent.process)

    def _auto_name(self):
        while True:
            name = f"state-{next(self._auto_names)}"
            if name not in self._states and name not in self._reserved:
                return name
