"""The kernel's side of what a state carries besides its namespace (``runtime.settings``).

A cell starts from its state's ``Process`` and ends with one its new state keeps;
``initial``'s is the server's own, read when the first cell runs.
"""

from .runtime import settings


class Following:
    """Mixed into SnapshotKernel: the settings a state's cells start from, and the gate."""

    def _process(self, state):
        """What ``state`` carries besides its namespace; for ``initial``, the server's
        settings as the first cell found them (a host such as pytest changes its
        environment between making a kernel and running a cell), whatever state
        that cell ran on (a restarted server's first cell may write a saved state's)."""
        if self._initial_process is None:
            with self._initial_lock:  # not the kernel lock: reading them runs library code
                if self._initial_process is None:
                    self._initial_process = settings.initial()
        return self._initial_process if state.process is None else state.process

    def _leave_settings(self, run, before, taken, alongside):
        """What the cell's thread and process ended with; the gate learns it, and the
        thread holds nothing of the cell any more."""
        changed = ()
        try:
            shared, changed = self._gate.leave(run, before.shared, alongside)
            return before.after(taken, run.context, shared)
        finally:  # even if the cell failed: the process holds what it left
            settings.release(taken)
            run.context = run.taken = None
            if changed:
                run.capture.add(_mixed_note(changed))


def _mixed_note(changed):
    """A stderr note: this cell changed process-wide settings while others ran."""
    return {"output_type": "stream", "name": "stderr",
            "text": f"snapshot-kernel: this cell changed {'; '.join(changed)} while other "
                    "cells were running, and they saw the change: these settings are one "
                    "per process (docs/promises.md lists them). Run cells that change them "
                    "alone to keep states exact.\n"}
