"""Interrupts and deadlines: how the kernel stops cells, and gives up on those that
do not stop. A mixin of ``SnapshotKernel``, whose methods run under its lock, and the
supervisor thread, which takes that lock for each check."""

import sys
import threading
import time
import traceback
import weakref

from . import memory
from .runtime import interrupt
from .errors import CannotReplace, UnknownExecution, check_name
from .execution import DONE, RUNNING, STARTING, Outcome, reply_for, stuck_error

POLL = 0.1  # seconds between the supervisor's deadline checks
FORCE_GRACE = 0.5  # seconds a forced stop lets a plain interrupt work before it replaces
                   # the server process
RESEND = 0.5  # of the grace: when an interrupt a cell runs on past is sent once more
# Seconds the supervisor stays without a running execution before it ends: starting a
# thread under the kernel lock costs a request 0.1-0.2 ms, and an agent's requests come
# seconds apart. A closed kernel's supervisor ends at its next check.
IDLE_END = 10.0


class Deadlines:
    """Interrupting executions, and the supervisor thread that enforces timeouts."""

    def interrupt(self, exec_id, reason="request"):
        """Raise KeyboardInterrupt in a running execution's cell."""
        with self._lock:
            run = self._runs.running.get(exec_id)
            if run is None or run.phase == DONE:
                check_name(exec_id, "exec_id")
                raise UnknownExecution(f"no running execution {exec_id!r}; it may have "
                                       "finished already")
            self._interrupt_locked(run, reason)

    def stop_by_force(self, exec_id):
        """Stop a running execution that an interrupt may not reach (a long call in C):
        interrupt it, and wait up to FORCE_GRACE s for its cell to end; True if it did.

        False if it did not: the journal then names it (``crashes.Journal.forced``),
        every running cell's output so far is in the journal, and the caller must end
        the process with ``crashes.FORCED_EXIT``. The supervisor starts a new one, which
        reports that execution stopped and the others crashed because of it. Refused
        (``CannotReplace``) where no supervisor can start a new process, or where the
        states would not survive the old one (``--in-memory``)."""
        if self._journal is None:
            raise CannotReplace("a forced stop replaces the server process, which only a "
                                "server with its supervisor can do (not --no-supervisor, "
                                "nor an MCP server's own kernel); interrupt it instead")
        if self._store is None:
            raise CannotReplace("a forced stop replaces the server process, and with "
                                "--in-memory every state but 'initial' would go with it; "
                                "interrupt it instead")
        with self._lock:
            run = self._runs.running.get(exec_id)
            if run is None or (run.phase == DONE and not run.stuck):
                check_name(exec_id, "exec_id")
                raise UnknownExecution(f"no running execution {exec_id!r}; it may have "
                                       "finished already")
            self._interrupt_locked(run, "request")
        deadline = time.monotonic() + FORCE_GRACE
        while not run.ended and time.monotonic() < deadline:
            time.sleep(0.01)
        if run.ended:
            return True
        self._journal.forced(exec_id)
        with self._lock:
            running = list(self._runs.running.values())
        for each in running:  # what they printed, into the journal for the next process
            each.capture.drain()
        return False

    def _interrupt_locked(self, run, reason):
        """Interrupt ``run`` once; later calls change nothing.

        One exception at a time, only between ``_arm`` and ``_disarm``, is what makes
        the window around the cell safe: see ``running.Running._run``. The one other
        send is ``_resend_locked``'s, once this one is gone.
        """
        if run.interrupt_reason is not None:
            return
        run.interrupt_reason = reason
        run.interrupted_at = time.monotonic()
        if run.phase == STARTING:
            run.interrupt_requested = True
        elif run.phase == RUNNING:
            run.interrupt_sent = interrupt.raise_in_thread(run.thread_id)

    def _resend_locked(self, run, now):
        """Send a cell's interrupt once more if, half its grace later, the cell runs on.

        CPython drops an exception raised in a finalizer or a weakref callback (it is
        "ignored", as unraisable), and a collection runs those in whichever thread it
        starts in: an interrupt landing there is lost, and the cell would run on to be
        called stuck. It is sent again only while the cell's own code runs (``in_code``,
        which its thread sets around it: ``sys._current_frames`` would tell as well, but
        a collection inside it that frees a ``threading.local`` deadlocks CPython 3.11),
        where the first could have landed too; one still pending is replaced, so one at
        most is ever pending. A cell that caught it and carries on is
        interrupted again, as by a second press of Ctrl-C."""
        if (run.phase == RUNNING and run.interrupt_sent and not run.interrupt_resent
                and now - run.interrupted_at >= self.grace * RESEND and run.in_code):
            run.interrupt_resent = interrupt.raise_in_thread(run.thread_id)

    def _start_supervisor_locked(self):
        """Start the supervisor unless it runs. It holds the kernel only while it checks,
        so a kernel nobody uses any more is freed, and its supervisor ends."""
        if not self._supervising:
            self._supervising = True
            self._supervisor = threading.Thread(
                target=_supervise, args=(weakref.ref(self), self._wake_supervisor),
                daemon=True, name="snapshot-kernel supervisor")
            self._supervisor.start()

    def _check_locked(self, run, now):
        if run.client_gone is not None and run.interrupt_reason is None and run.client_gone():
            self._interrupt_locked(run, "disconnect")
        since = run.running_since  # None while it waits for other cells' settings
        if run.timeout is not None and since is not None and now - since >= run.timeout:
            self._interrupt_locked(run, "timeout")
        self._resend_locked(run, now)
        if (not run.done.is_set() and run.interrupted_at is not None
                and now - run.interrupted_at >= self.grace):
            self._abandon_locked(run, stuck_error(run, self.grace))

    def _check_memory_locked(self, limit):
        """Interrupt the running cells if the process holds more than ``limit`` bytes of
        anonymous memory: which cell allocated it cannot be told, and any may be next."""
        held = memory.anonymous_bytes()
        if held is None or held <= limit:
            return
        for run in self._runs.running.values():
            if run.phase == RUNNING and run.interrupt_reason is None:
                run.memory_held = (held, limit)
                self._interrupt_locked(run, "memory")

    def _abandon_locked(self, run, error):
        """Reply now for a cell that has not stopped; it stays listed, stuck, storing nothing."""
        run.stuck = True
        if self._reserved.get(run.new_state_name) is run:
            del self._reserved[run.new_state_name]
        run.reply = reply_for(run, Outcome(error=error), None)
        run.done.set()
        if run.on_abandon is not None:  # its caller runs the cell, so cannot give the reply
            threading.Thread(target=run.on_abandon, args=(run.reply,), daemon=True,
                             name=f"snapshot-kernel reply for {run.exec_id}").start()


def _supervise(kernel_ref, wake):
    """The supervisor thread: interrupt cells at their deadline, give up on those that do
    not stop in time. Ends once nothing has run for ``IDLE_END`` s, or the kernel is
    closed or gone; ``_begin`` starts it again. ``wake`` (set by ``close``) cuts its wait
    short, so that a shutdown does not wait for its next check."""
    idle_since = time.monotonic()
    poll = POLL
    while True:
        if wake.wait(poll):
            wake.clear()
        kernel = kernel_ref()
        if kernel is None:
            return
        with kernel._lock:
            now = time.monotonic()
            if kernel._runs.running:
                idle_since = now
            elif kernel._closed or now - idle_since >= IDLE_END:
                kernel._supervising = False
                return
            for run in list(kernel._runs.running.values()):
                try:
                    kernel._check_locked(run, now)
                except Exception:  # a bug of ours must not end every cell's deadlines
                    traceback.print_exc(file=sys.__stderr__)
            limit = kernel.max_cell_memory
            if limit is not None and kernel._runs.running:
                kernel._check_memory_locked(limit)
            poll = POLL if limit is None else min(POLL, memory.POLL)
        del kernel
