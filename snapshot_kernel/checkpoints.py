"""Checkpoints inside a cell: ``checkpoint()`` stores the cell's globals as a state now.

    from snapshot_kernel import checkpoint, checkpoint_every, progress   # builtins in cells
    for i, path in enumerate(paths):
        results.append(work(path))
        checkpoint_every(20, progress=f"{i + 1}/{len(paths)} files")

Each checkpoint is a state, child of the cell's source state, named
``<new_state_name or exec_id>@<n>`` unless a name is given, with the progress
hint in its metadata. The cell goes on; whatever happens to it next, the
checkpoints stay, so a long job can resume from the last one. ``progress()``
only reports a hint (``GET /executions`` shows the latest).
"""

import builtins
import contextvars

from .runtime import capture, settings
from .errors import StateExists, check_name

def _hook(what):
    """The kernel's function for the calls below, which it puts on the capture of the
    execution while its cell runs (threads the cell starts share that capture)."""
    current = capture.current_capture()
    hook = getattr(current, "checkpoint", None)
    if hook is None:
        raise RuntimeError(f"{what}() works only in a snapshot-kernel cell, while it runs")
    return hook


def checkpoint(progress=None, name=None):
    """Store the cell's globals as a state now; return its name."""
    return _hook("checkpoint")("checkpoint", progress=progress, name=name)


def checkpoint_every(n, progress=None, name=None):
    """``checkpoint(...)`` on every ``n``-th call in this cell; the name, or None."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"checkpoint_every takes a positive whole number, not {n!r}")
    return _hook("checkpoint_every")("every", n=n, progress=progress, name=name)


def progress(hint):
    """Report how far the cell is (``GET /executions`` shows the latest hint)."""
    _hook("progress")("progress", progress=hint)


def install():
    """Make ``checkpoint``, ``checkpoint_every`` and ``progress`` builtins; a state's own
    names shadow them."""
    builtins.checkpoint = checkpoint
    builtins.checkpoint_every = checkpoint_every
    builtins.progress = progress


class Checkpointing:
    """The kernel's side of the calls above (a mixin of ``SnapshotKernel``)."""

    def _checkpoint(self, run, call, progress=None, name=None, n=None):
        """What ``checkpoints.checkpoint``/``checkpoint_every``/``progress`` ask of ``run``."""
        if progress is not None:
            run.progress = str(progress)
        if call == "progress":
            return None
        if call == "every":
            run.every_calls += 1
            if run.every_calls % n:
                return None
        if run.working is None:
            raise RuntimeError("checkpoint() can only store a cell's globals while it runs")
        changes = run.working.commit()  # before taking the lock: copying runs user code
        before = self._process(run.source)
        process = before.after(run.taken, contextvars.copy_context(),
                               settings.shared_now(before.shared))
        with self._lock:
            if run.generation != self._generation:
                raise RuntimeError("the kernel was reset; checkpoints are not stored")
            name = name or f"{run.new_state_name or run.exec_id}@{len(run.checkpoints) + 1}"
            check_name(name, "checkpoint name")
            if name in self._states or name in self._reserved:
                raise StateExists(f"state {name!r} already exists; name the checkpoint otherwise")
            state = self._child(name, run, changes, process, checkpoint=True,
                                progress=run.progress)
            self._reserved[name] = run
        listed = {"state_name": name, "progress": run.progress, "timestamp": state.timestamp}
        saved = False
        try:
            if self._store is not None:  # with the record a restart reports, which lists it
                summary = dict(run.summary(), checkpoints=[*run.checkpoints, listed])
                self._store.save(state, run.exec_id, summary)
            saved = True
        finally:
            with self._lock:  # at once: the name is never free between reserved and stored
                del self._reserved[name]
                if saved:
                    self._states[name] = state
                    run.checkpoints.append(listed)
        return name
