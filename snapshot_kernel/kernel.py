"""SnapshotKernel: immutable namespace states and executions that branch from them.

No running code can reach a stored state: an execution runs on a private
namespace filled with copies from its source state (see ``working``), and if
the cell succeeds its result is stored as a new state. The kernel lock guards
only the tables (states, executions, reserved names); copying and running
happen outside it, which is safe because stored states never change.

``start`` runs a cell on a cell thread and returns at once; ``wait`` and
``execute`` wait for its reply. ``execute_here`` runs it on the caller's thread,
which saves two cross-thread wake-ups (the HTTP server uses it for requests that
wait). A supervisor thread, alive while executions run, interrupts cells at
their deadline and gives up on those that do not stop (stuck), so nobody has to
be waiting for timeouts to hold; a caller held by its own stuck cell hears of
it through ``on_abandon``.

Knows nothing of HTTP: methods return plain dicts and raise ``KernelError``.
"""

import contextvars
import itertools
import os
import threading
import time

from .runtime import (capture, display, fs, gate, held, interrupt, kinds, mainmodule, plots,
                      settings)
from . import cell, checkpoints, heap, tree, values
from .states import cow
from .checkpoints import Checkpointing
from .porting import Porting
from .describe import BUDGET as DESCRIBE_BUDGET, Describing
from .following import Following
from .tree import Tending
from .errors import (ExecutionExists, InvalidArgument, InvalidName,  # noqa: F401
                     KernelError, ProtectedState, StateExists, UnknownExecution,
                     UnknownState, check_name, missing_state,
                     positive, seconds_or_none)  # (re-exported for main and tests)
from .execution import Execution, Executions, kernel_error, new_exec_id
from .states.storage import State, fresh_namespace
from .states.working import TOUCHED
from .states.store import Store
from .deadlines import Deadlines
from .running import Running
from .storing import Storing
from .threads import CellThreads

INITIAL = tree.INITIAL
DEFAULT_TIMEOUT = 600.0      # seconds a cell may run unless the request says otherwise
DEFAULT_GRACE = 2.0          # seconds an interrupted cell gets to stop before it is called stuck
DEFAULT_OUTPUT_LIMIT = 20000  # characters kept per stream, and of the last expression's repr
DEFAULT_REPR_LIMIT = 2000    # characters of each variable's repr in describe()
DEFAULT_IMAGE_LIMIT = 1 << 20  # bytes of one image in an output; a larger one becomes a note


class SnapshotKernel(Running, Storing, Deadlines, Checkpointing, Porting, Describing,
                     Following, Tending):
    """Holds the states and runs cells against them, each on a cell thread."""

    def __init__(self, timeout=DEFAULT_TIMEOUT, output_limit=DEFAULT_OUTPUT_LIMIT,
                 repr_limit=DEFAULT_REPR_LIMIT, grace=DEFAULT_GRACE, copy_mode=TOUCHED,
                 image_limit=DEFAULT_IMAGE_LIMIT, copy_on_write=cow.THRESHOLD,
                 keep_results=None, full_output_limit=capture.DEFAULT_FULL_LIMIT,
                 state_dir=None, max_memory=None, crash=None, journal=None,
                 private_dir=False, max_cell_memory=None, workdir=None, gc_freeze=False):
        """``timeout`` and ``output_limit`` are defaults for executions (None: no
        limit). ``copy_mode`` says what an execution copies in before its cell runs
        (``working.Working.open``); buffers of ``copy_on_write`` bytes or more are kept
        copy-on-write where the machine allows (None: never). Finished executions'
        records are kept ``keep_results`` seconds (``execution.Executions``). With a
        ``state_dir``, every state is saved there before it is announced, and the states
        found there are loaded (``store``); ``max_memory`` then bounds the bytes of
        stored objects kept in memory. ``crash`` says how the last server process died
        (a ``crashes.Crash``: its executions are reported ``crashed``), or how the last
        server on the state directory stopped (a ``crashes.Stop``: ``interrupted``);
        running executions are noted in ``journal`` (``crashes``), else in the state
        directory, where that costs a transaction per execute. ``private_dir``: the
        state directory is the server's alone, removed when it stops (``Store``).
        ``max_cell_memory``: the bytes of anonymous memory the process may hold while
        cells run; past it, the running cells are interrupted with a MemoryError
        (``memory``). None: no limit. ``workdir``: where cells run unless their state
        chose another directory (default: the process's current directory as each cell
        starts). ``gc_freeze``: once a cell ended and none runs, what the process holds
        is collected and frozen out of the cyclic collector's reach (``heap.Sweeper``);
        process-wide, so for a process the kernel has to itself (a server's)."""
        for patch in (capture, interrupt, plots, display, checkpoints, mainmodule, heap):
            patch.install()
        kinds.install(capture.INHERITED)
        self._initial_process = None  # the server's settings, read when the first cell runs
        self._initial_lock = threading.Lock()
        self._gate = gate.GATE
        self.server = held.Server(workdir and os.path.realpath(workdir), fs.read_umask(),
                                  os.path.realpath(os.getcwd()))
        self.timeout, self.grace = timeout, grace
        self.max_cell_memory = max_cell_memory
        self.output_limit, self.image_limit = output_limit, image_limit
        self.full_output_limit = full_output_limit
        self.repr_limit = repr_limit
        self.describe_budget = DESCRIBE_BUDGET  # seconds describe() waits for reprs
        self.compare_limits = (values.MAX_OBJECTS, values.MAX_BYTES)  # what one diff compares
        self.copy_mode = copy_mode
        self._store = (None if state_dir is None
                       else Store(state_dir, None, max_memory, private=private_dir))
        blob_dir, reserve_dir = ((None, None) if self._store is None
                                 else (self._store.blob_dir, self._store.reserve_dir))
        self.buffers = (None if copy_on_write is None
                        else cow.Buffers.probe(copy_on_write, blob_dir, reserve_dir))
        self._threads = CellThreads()
        self._lock = threading.Lock()
        self._states = {INITIAL: self._initial()}
        self._runs = Executions() if keep_results is None else Executions(keep_results)
        self._sweeper = heap.Sweeper(lambda: not self._running_runs(),
                                     lambda: not self._threads.busy(), freeze=gc_freeze)
        self._reserved = {}
        self._generation = 0
        self._closed = False
        self._supervising = False
        self._wake_supervisor = threading.Event()  # set by ``close``: see ``_supervise``
        self._auto_names = itertools.count(1)
        self._journal = journal
        ended = self._open_store() if self._store is not None else []
        if crash is not None:
            ended = crash.cut_short(self._states, ended)
        for summary in ended:
            self._runs.restored(summary, crash, states_kept=self._store is not None)
        if journal is not None:
            journal.forget()  # what it held is ``crash``'s

    def _open_store(self):
        """Take the states the state directory holds, or give it ``initial``; the summaries
        of the executions that were running when the last server stopped."""
        self._store.buffers = self.buffers
        loaded = self._store.load()
        if loaded is None:
            self._store.save(self._states[INITIAL])
            return []
        self._states, ended = loaded
        return ended

    # -- states -----------------------------------------------------------------

    def state_names(self):
        with self._lock:
            return list(self._states)

    def reset(self):
        """Drop every state but a fresh ``initial``; interrupt running executions.

        An execution running across a reset stores nothing: its reply's error
        is ``KernelReset``, even if its cell finished.
        """
        initial = self._initial()
        with self._lock:
            self._generation += 1
            dropped, self._states = self._states, {INITIAL: initial}
            self._reserved.clear()
            for run in self._runs.running.values():
                self._interrupt_locked(run, "reset")
        del dropped  # freed outside the lock
        if self._store is not None:
            self._store.reset(initial)
        if self.buffers is not None:
            self.buffers.let_go()
        heap.give_back()
        self._sweeper.soon()
        return [INITIAL]

    def _initial(self):
        return State(INITIAL, fresh_namespace(), None, "")

    def _get(self, name):
        with self._lock:
            state = self._states.get(name)
            names = None if state is not None else list(self._states)
        if state is None:
            raise missing_state(name, names)
        return state

    # -- executions ---------------------------------------------------------------

    def execute(self, code, state_name, exec_id=None, new_state_name=None,
                timeout=None, max_output=None, store=True):
        """Run ``code`` on a copy of ``state_name``; store the result if it succeeds
        (and ``store``: false runs it for its outputs alone).

        Blocks until the reply: when the cell ends, or, if it does not stop when
        interrupted (at its timeout, default the kernel's), after the grace
        period; such a cell is left running, marked stuck, and stores nothing.
        Returns the reply dict of the HTTP API.
        """
        run = self.start(code, state_name, exec_id, new_state_name, timeout, max_output, store)
        run.done.wait()
        return run.reply

    def start(self, code, state_name, exec_id=None, new_state_name=None,
              timeout=None, max_output=None, store=True):
        """Start running ``code`` on a copy of ``state_name``; return its Execution."""
        run = self._opened(code, state_name, exec_id, new_state_name, timeout, max_output,
                           store=store)
        self._threads.submit(lambda: self._run(run), _thread_name(run))
        return run

    def execute_here(self, code, state_name, exec_id=None, new_state_name=None,
                     timeout=None, max_output=None, store=True, client_gone=None,
                     on_abandon=None):
        """``execute``, with the cell run on the calling thread; returns its reply.

        This spares the two cross-thread wake-ups of a cell thread, but the
        caller is held until the cell ends, even past a stuck reply. So a reply
        given before the cell ends (stuck, or the kernel closing) is passed to
        ``on_abandon(reply)``, called on a thread of its own; the reply returned
        at the end is then the same. While the cell runs, the supervisor calls
        ``client_gone()`` every ``POLL`` s; once it is true the cell is
        interrupted, as by a request. The cell runs in a fresh
        ``contextvars.Context`` under its cell thread's name, as on a cell thread.
        """
        run = self._opened(code, state_name, exec_id, new_state_name, timeout, max_output,
                           store=store, client_gone=client_gone, on_abandon=on_abandon)
        thread = threading.current_thread()
        name, thread.name = thread.name, _thread_name(run)
        try:
            contextvars.Context().run(self._run, run)
        finally:
            thread.name = name
        return run.reply

    def _opened(self, code, state_name, exec_id, new_state_name, timeout, max_output,
                **hooks):
        """The Execution of a new cell, checked and listed, not yet running."""
        capture.install()  # again: a host such as pytest may have swapped sys.stdout since
        if exec_id is None:
            exec_id = new_exec_id()
        else:
            check_name(exec_id, "exec_id")
        if new_state_name is not None:
            check_name(new_state_name, "new_state_name")
            if not hooks.get("store", True):
                raise InvalidArgument("new_state_name names the state to store, and store is "
                                      "false: send one or the other")
        limits = (seconds_or_none("timeout", timeout, self.timeout),
                  positive("max_output", max_output, self.output_limit, whole=True))
        run = self._begin(code, state_name, exec_id, new_state_name, *limits, **hooks)
        if self._journal is not None:  # so the next server process can say it crashed,
            tail = self._journal.running(run)  # and what the cell printed before
            run.capture.mirror = None if tail is None else tail.write
        elif self._store is not None:  # so a restart can say it ended there
            self._store.running(exec_id, run.summary())
        return run

    def wait(self, exec_id, timeout=None):
        """The reply of execution ``exec_id`` once it has one, or None after ``timeout``."""
        run = self._run_record(exec_id)
        return run.reply if run.done.wait(timeout) else None

    def execution(self, exec_id, wait=None):
        """What is known of execution ``exec_id`` (see ``Execution.report``), after
        waiting up to ``wait`` seconds for its reply."""
        run = self._run_record(exec_id)
        if wait:
            run.done.wait(wait)
        with self._lock:
            return run.report()

    def output(self, exec_id, stream, offset, limit):
        """A page of the full text of one of the execution's streams."""
        run = self._run_record(exec_id)
        text, total = run.capture.read(stream, offset, limit)
        return {"exec_id": exec_id, "stream": stream, "offset": offset, "text": text,
                "next_offset": offset + len(text), "total": total,
                "complete": run.ended or run.stuck,
                "capped": run.capture.truncated().get(stream, {}).get("capped", False)}

    def executions(self):
        """Summaries of the executions that have not finished, stuck ones included."""
        with self._lock:
            return [run.summary() for run in self._runs.running.values()]

    def finished_executions(self):
        """Summaries of the finished executions still kept, the latest first."""
        with self._lock:
            self._runs.prune()
            return [run.summary() for run in reversed(self._runs.finished.values())]

    def close(self):
        """Interrupt every execution and make waiting requests answer at once. Those it
        ends stay noted as running (the journal's, the state directory's), for the next
        server on the state directory to report as ``interrupted``."""
        if self._journal is not None:
            self._journal.stopping()
        with self._lock:
            self._closed = True
            for run in self._runs.running.values():
                self._interrupt_locked(run, "shutdown")
                if not run.done.is_set():
                    self._abandon_locked(run, kernel_error(
                        "KernelShutdown", "the server is shutting down; nothing was stored"))
        self._wake_supervisor.set()

    def shutdown(self, grace=None):
        """``close``, then wait up to ``grace`` seconds (default: the kernel's) for the
        running cells to end, end the kernel's threads, close its state directory, and
        put the process-wide settings its cells changed back. For a kernel embedded in a
        process that goes on (a test): nothing of it is left running."""
        self.close()
        deadline = time.monotonic() + (self.grace if grace is None else grace)
        while self._running_runs() and time.monotonic() < deadline:
            time.sleep(0.01)  # (a stuck cell may never end: it is left behind)
        self._threads.close()
        self._sweeper.close()
        supervisor = getattr(self, "_supervisor", None)
        if supervisor is not None:  # it ends at its next check, the kernel being closed
            supervisor.join(max(0.0, deadline - time.monotonic()) + 1.0)
        if self.buffers is not None:
            self.buffers.let_go(wait=1.0)
        if self._store is not None and not self._running_runs():
            self._store.close()
        self._gate.apply_if_idle(settings.Process({}, {}, {}).claims(self.server))

    def _running_runs(self):
        with self._lock:
            return [run for run in self._runs.running.values() if not run.ended]

    def _run_record(self, exec_id):
        with self._lock:
            run = self._runs.get(exec_id)
        if run is None:
            check_name(exec_id, "exec_id")
            raise UnknownExecution(f"no execution {exec_id!r}; GET /executions lists the "
                                   "running ones, and finished ones are kept for a while")
        return run

    def _begin(self, code, state_name, exec_id, new_state_name, timeout, output_limit,
               **hooks):
        with self._lock:
            source = self._states.get(state_name)
            if source is None:
                names = list(self._states)
            else:
                return self._begin_locked(code, source, state_name, exec_id, new_state_name,
                                          timeout, output_limit, **hooks)
        raise missing_state(state_name, names)

    def _begin_locked(self, code, source, state_name, exec_id, new_state_name, timeout,
                      output_limit, **hooks):
        """The new Execution, listed; under the kernel lock."""
        if new_state_name in self._states or new_state_name in self._reserved:
            raise StateExists(f"state {new_state_name!r} already exists; states are "
                              "immutable, so pick another new_state_name")
        if exec_id in self._runs.running:
            raise ExecutionExists(f"execution {exec_id!r} is already running")
        if self._runs.get(exec_id) is not None:
            raise ExecutionExists(f"execution {exec_id!r} has ended and its record is "
                                  f"still kept (GET /executions/{exec_id}); sending it "
                                  "again would replace that record: pick another exec_id")
        run = Execution(exec_id, code, state_name, new_state_name, self._generation,
                        capture.Capture(output_limit, self.image_limit,
                                        self.full_output_limit),
                        cell.cell_filename(), timeout, output_limit, source=source,
                        **hooks)
        self._runs.add(run)
        if new_state_name is not None:
            self._reserved[new_state_name] = run
        self._start_supervisor_locked()
        return run

def _thread_name(run):
    return f"snapshot-kernel cell {run.exec_id}"
