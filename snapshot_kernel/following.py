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

    def _leave_gate(self, run, before, alongside):
        """What the cell's thread and process ended with; the gate learns it too."""
        after = None
        try:
            after = before.after(run.context)
        finally:  # even if the cell failed: the process holds what it left
            others = self._gate.leave(None if after is None else after.shared)
            run.context = None
        if (alongside or others) and after.shared is not before.shared:
            run.capture.add(_mixed_note(before.shared, after.shared))
        return after


def _mixed_note(before, after):
    """A stderr note: this cell changed process-wide settings while others ran."""
    names = ", ".join(sorted(name for name in set(before) | set(after)
                             if before.get(name) != after.get(name)))
    return {"output_type": "stream", "name": "stderr",
            "text": f"snapshot-kernel: this cell changed process-wide settings ({names}) "
                    "while other cells were running; they may have seen the change. Run "
                    "cells that change them alone to keep states exact.\n"}
