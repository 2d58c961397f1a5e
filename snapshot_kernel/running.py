"""A cell on its thread: compiled, let through the gate of process-wide settings, its
state's settings taken, its namespace copied in, run, and copied out; then
``SnapshotKernel._finish`` (``storing.py``) stores what it made and replies.

An interrupt (``PyThreadState_SetAsyncExc``) can land only between ``_arm`` and
``_disarm``: everything outside that window, including the gate and the settings,
only polls the run's flags, so kernel code never sees a stray KeyboardInterrupt.
"""

import builtins
import os
import sys
import threading
import traceback

from .runtime import capture, display, interrupt, mainmodule, monkeypatches, plots, settings
from . import cell, heap, suggestions
from .sandbox import refusals
from .notebook import magics
from .execution import (DONE, RUNNING, Outcome, explain_gone, interrupted_error,
                        kernel_error)
from .states.working import Working


class Running:
    """Mixed into SnapshotKernel: what a cell thread does with an execution."""

    def _run(self, run):
        """Thread body. An interrupt can arrive only between _arm and _disarm. The
        reply comes from ``_finish``, so it runs whatever happened before it."""
        run.capture.checkpoint = lambda call, **args: self._checkpoint(run, call, **args)
        pid = os.getpid()
        try:
            outcome = self._attempt(run)
        except KeyboardInterrupt:  # our interrupt, landed in kernel code just around the cell
            self._disarm(run)      # each run is sent one at most, so none can be pending now
            outcome = Outcome(error=interrupted_error())
        except Exception as exc:  # a bug of ours: the reply says so rather than never coming
            traceback.print_exc(file=sys.__stderr__)
            outcome = Outcome(error=kernel_error(
                "InternalError", f"the kernel failed around this cell ({type(exc).__name__}); "
                "nothing was stored; the server log has the traceback"))
        run.capture.checkpoint = None
        if os.getpid() != pid:  # a process the cell forked, back from the cell, ends here:
            os._exit(0)         # it stores nothing and answers nobody
        if run.interrupt_reason == "memory":  # what it grew went back to malloc only: give
            heap.give_back()                  # it to the system, or the next cell is stopped
        self._finish(run, outcome)
        self._sweeper.cell_ended()

    def _attempt(self, run):
        """Compile the cell, then run it between the gate of process-wide settings,
        outside the window an interrupt can land in: a cell waiting there is only
        flagged, and polls."""
        run.compiled, failed = cell.call_user(cell.compile_cell, run.code, run.filename)
        if failed is not None:  # a SyntaxError, say: nothing to wait for
            cell.Source.done(run.filename)
            return Outcome(error=cell.error_dict(failed))
        before = self._process(run.source)
        found = run.compiled[3]
        patching = monkeypatches.may_patch(found, run.source.peek) if found else ()
        alongside = self._gate.enter(run, before.claims(self.server), patching)
        if alongside is None:  # interrupted (a request, a reset) while it waited
            cell.Source.done(run.filename)
            return Outcome(error=interrupted_error())
        try:
            taken = before.take(self.server)
        except settings.SettingError as exc:
            self._gate.leave(run, before.shared, alongside)
            cell.Source.done(run.filename)
            return Outcome(error=kernel_error("SettingError", str(exc)))
        run.context, run.taken = before.new_context(), taken
        try:
            with capture.capturing(run.capture), interrupt.interruptible():
                self._arm(run)
                try:
                    outcome = self._run_cell(run)
                finally:
                    self._disarm(run)
        finally:
            self._disarm(run)  # again, if an interrupt landed in that one before its lock:
            after = self._leave_settings(run, before, taken, alongside)  # see _resend_locked
        return outcome if outcome.error is not None else Outcome(outcome.stored, process=after)

    def _run_cell(self, run):
        outcome, exc = cell.call_user(self._copy_run_copy, run)
        _, failed = cell.call_user(plots.flush, run.capture)  # figures show even if it raised
        working, run.working = run.working, None
        exc = exc if exc is not None else failed
        if exc is not None:
            error = explain_gone(cell.error_dict(exc), working.gone if working else {})
            outcome = Outcome(error=refusals.explain(suggestions.with_suggestion(
                error, lambda: _names_known(working, run.source))))
        cell.Source.done(run.filename)
        return outcome

    def _copy_run_copy(self, run):
        body, last, notebook, found = run.compiled
        run.compiled = None
        working = Working(run.source, self.copy_mode, self.buffers,
                          provided=magics.CELL_BUILTINS if notebook else None)
        working.open(body, last)
        run.working = working  # for checkpoints
        run.context.run(self._in_context, run, body, last, found)
        plots.flush(run.capture)  # before the commit: the figures it shows are closed
        return Outcome(stored=working.commit() if run.store else None)

    def _in_context(self, run, body, last, found):
        """The cell itself, in its state's context, with ``__main__`` its namespace;
        the modules it may patch (``found``) are watched from now on."""
        self._process(run.source).enter_thread()
        namespace = run.working.namespace
        unknown = monkeypatches.watch(found, run.working.peek) if found else ()
        leave_main = mainmodule.running(namespace)
        try:
            monkeypatches.bind(run.working)  # copies in: runs user code, as the cell
            run.in_code = True  # for ``Deadlines._resend_locked``
            try:
                value = cell.run_code(body, last, namespace)
            finally:
                run.in_code = False
            if value is not None:
                data, metadata = display.bundle(value, run.output_limit, self.image_limit)
                run.capture.add({"output_type": "execute_result", "data": data,
                                 "metadata": metadata})
                namespace["_"] = value  # as IPython: the last result
        finally:
            leave_main()
            if unknown:
                monkeypatches.done(unknown, namespace.get)
            monkeypatches.unbind(run.working)

    def _arm(self, run):
        with self._lock:
            run.thread_id = threading.get_ident()
            run.phase = RUNNING
            requested = run.interrupt_requested
        if requested:
            raise KeyboardInterrupt

    def _disarm(self, run):
        with self._lock:
            run.phase = DONE
            if run.interrupt_sent:
                interrupt.clear_pending(run.thread_id)


def _names_known(working, source):
    """The names a cell on ``source`` could have meant: its state's, its own, the builtins'."""
    names = set(vars(builtins))
    names.update(cell.plain_name(key) for key in source.names.entries() if isinstance(key, str))
    if working is not None:
        names.update(key for key in working.namespace if isinstance(key, str))
    return names
