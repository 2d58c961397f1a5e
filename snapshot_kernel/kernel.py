"""SnapshotKernel: immutable namespace states and executions that branch from them.

No running code can reach a stored state: an execution runs on a private
namespace filled with copies from its source state (see ``storage``), and if
the cell succeeds its result is stored as a new state. The kernel lock guards
only the tables (states, running executions, reserved names); copying and
running happen outside it, which is safe because stored states never change.

Knows nothing of HTTP: methods return plain dicts and raise ``KernelError``.
"""

import itertools
import secrets
import sys
import threading
import time
import traceback

from . import capture, cell, cow, display, interrupt, magics, plots
from .copier import is_dunder, reading
from .execution import (DONE, RUNNING, STARTING, Execution, Outcome, interrupted_error,
                        kernel_error, stuck_error)
from .storage import TOUCHED, Namespace, State, Working, fresh_namespace, sizes
from .threads import CellThreads

INITIAL = "initial"
MAX_NAME_LENGTH = 128
DEFAULT_TIMEOUT = 600.0      # seconds a cell may run unless the request says otherwise
DEFAULT_GRACE = 2.0          # seconds an interrupted cell gets to stop before it is called stuck
DEFAULT_OUTPUT_LIMIT = 20000  # characters kept per stream, and of the last expression's repr
DEFAULT_REPR_LIMIT = 2000    # characters of each variable's repr in describe()
DEFAULT_IMAGE_LIMIT = 1 << 20  # bytes of one image in an output; a larger one becomes a note
POLL = 0.1                   # seconds between a waiting request's deadline checks


class KernelError(Exception):
    """A request the kernel refuses; the message says what to do instead."""


class InvalidArgument(KernelError):
    pass


class InvalidName(InvalidArgument):
    pass


class UnknownState(KernelError):
    pass


class UnknownExecution(KernelError):
    pass


class StateExists(KernelError):
    pass


class ExecutionExists(KernelError):
    pass


class ProtectedState(KernelError):
    pass


def check_name(name, what="state name"):
    """Raise InvalidName unless ``name`` can be used in a URL path and a log line."""
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{what} must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{what} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise InvalidName(f"{what} {name!r} may not be '.', '..' or contain '/' or '\\'")
    if not name.isprintable() or name != name.strip():
        raise InvalidName(f"{what} {name!r} may not contain control characters "
                          "or start or end with whitespace")


class SnapshotKernel:
    """Holds the states and runs cells against them, each on a cell thread."""

    def __init__(self, timeout=DEFAULT_TIMEOUT, output_limit=DEFAULT_OUTPUT_LIMIT,
                 repr_limit=DEFAULT_REPR_LIMIT, grace=DEFAULT_GRACE, copy_mode=TOUCHED,
                 image_limit=DEFAULT_IMAGE_LIMIT, copy_on_write=cow.THRESHOLD):
        """``timeout`` and ``output_limit`` are defaults for executions (None: no
        limit). ``copy_mode`` says what an execution copies in before its cell runs
        (``storage.Working.open``); buffers of ``copy_on_write`` bytes or more are kept
        copy-on-write where the machine allows (None: never). The tests run every mode."""
        capture.install()
        interrupt.install()
        plots.install()
        display.install()
        self.timeout = timeout
        self.output_limit = output_limit
        self.image_limit = image_limit
        self.repr_limit = repr_limit
        self.grace = grace
        self.copy_mode = copy_mode
        self.buffers = None if copy_on_write is None else cow.Buffers.probe(copy_on_write)
        self._threads = CellThreads()
        self._lock = threading.Lock()
        self._states = {}
        self._running = {}
        self._reserved = {}
        self._generation = 0
        self._closed = False
        self._auto_names = itertools.count(1)
        self._states[INITIAL] = State(INITIAL, fresh_namespace(), None, "")

    # -- states -----------------------------------------------------------------

    def state_names(self):
        with self._lock:
            return list(self._states)

    def describe(self, name):
        """The state's metadata and a repr of each non-dunder variable.

        Type names and reprs are the stored objects' own code: they run behind the
        user-code boundary, reading the globals of this state, and what fails is
        reported in that variable's entry.
        """
        state = self._get(name)
        with reading(state.names):
            entries = {cell.plain_name(key): entry for key, entry in state.names.entries().items()
                       if isinstance(key, str) and not is_dunder(cell.plain_name(key))}
            variables = {key: {"type": cell.safe_type_name(entry.value),
                               "repr": cell.safe_repr(entry.value, self.repr_limit)}
                         for key, entry in entries.items()}
        shared = {key: entry.shared for key, entry in entries.items() if entry.shared}
        return {"name": state.name, "timestamp": state.timestamp, "parent": state.parent,
                "code": state.code, "variables": variables, "shared": shared,
                "approx_bytes": state.new_bytes,
                "shared_bytes": state.total_bytes - state.new_bytes}

    def delete(self, name):
        """Drop a state. Its children keep what they use of it; the rest is freed."""
        with self._lock:
            if name == INITIAL:
                raise ProtectedState(f"state {INITIAL!r} cannot be deleted; POST /reset "
                                     "to drop every other state")
            state = self._states.pop(name, None)
            if state is None:
                raise UnknownState(f"no state named {name!r}; GET /states lists them")
            layer = state.names
            if any(other.names is layer for other in self._states.values()):
                return  # a child that changed nothing holds the very same names
            over = [other.names for other in self._states.values() if other.names.base is layer]
        for names in over:
            names.absorb_base()

    def reset(self):
        """Drop every state but a fresh ``initial``; interrupt running executions.

        An execution running across a reset stores nothing: its reply's error
        is ``KernelReset``, even if its cell finished.
        """
        initial = State(INITIAL, fresh_namespace(), None, "")
        with self._lock:
            self._generation += 1
            self._states = {INITIAL: initial}
            self._reserved.clear()
            for run in self._running.values():
                self._interrupt_locked(run, "reset")
            return list(self._states)

    def _get(self, name):
        with self._lock:
            state = self._states.get(name)
        if state is None:
            raise UnknownState(f"no state named {name!r}; GET /states lists them")
        return state

    # -- executions ---------------------------------------------------------------

    def execute(self, code, state_name, exec_id=None, new_state_name=None,
                timeout=None, max_output=None):
        """Run ``code`` on a copy of ``state_name``; store the result if it succeeds.

        Blocks until the cell finishes, or until ``timeout`` (default: the
        kernel's) plus the grace period if the cell does not stop when
        interrupted; such a cell is left running, marked stuck, and stores
        nothing. Returns the reply dict of the HTTP API.
        """
        capture.install()  # again: a host such as pytest may have swapped sys.stdout since
        exec_id = exec_id if exec_id is not None else secrets.token_hex(16)
        check_name(exec_id, "exec_id")
        if new_state_name is not None:
            check_name(new_state_name, "new_state_name")
        limits = (_positive("timeout", timeout, self.timeout),
                  _positive("max_output", max_output, self.output_limit, whole=True))
        run, source = self._begin(code, state_name, exec_id, new_state_name, *limits)
        self._threads.submit(lambda: self._run(run, source), f"snapshot-kernel cell {exec_id}")
        return self._await(run)

    def _await(self, run):
        """Wait for ``run``; interrupt it at its deadline; give up on it after the grace."""
        while not run.finished.acquire(timeout=POLL):
            with self._lock:
                now = time.monotonic()
                if run.timeout is not None and now - run.started >= run.timeout:
                    self._interrupt_locked(run, "timeout")
                if self._closed:
                    return self._abandon_locked(run, kernel_error(
                        "KernelShutdown", "the server is shutting down; nothing was stored"))
                if run.interrupted_at is not None and now - run.interrupted_at >= self.grace:
                    return self._abandon_locked(run, stuck_error(run, self.grace))
        return run.reply

    def _abandon_locked(self, run, error):
        """Reply now for a cell that has not stopped; it stays listed, stuck, storing nothing."""
        run.stuck = True
        if self._reserved.get(run.new_state_name) is run:
            del self._reserved[run.new_state_name]
        return self._reply(run, Outcome(error=error), None)

    def close(self):
        """Interrupt every execution and make waiting requests answer at once."""
        with self._lock:
            self._closed = True
            for run in self._running.values():
                self._interrupt_locked(run, "shutdown")

    def executions(self):
        """Summaries of the executions that have not finished, stuck ones included."""
        with self._lock:
            return [run.summary() for run in self._running.values()]

    def _begin(self, code, state_name, exec_id, new_state_name, timeout, output_limit):
        with self._lock:
            source = self._states.get(state_name)
            if source is None:
                raise UnknownState(f"no state named {state_name!r}; GET /states lists them")
            if new_state_name in self._states or new_state_name in self._reserved:
                raise StateExists(f"state {new_state_name!r} already exists; states are "
                                  "immutable, so pick another new_state_name")
            if exec_id in self._running:
                raise ExecutionExists(f"execution {exec_id!r} is already running")
            run = Execution(exec_id, code, state_name, new_state_name, self._generation,
                            capture.Capture(output_limit, self.image_limit),
                            cell.cell_filename(), timeout, output_limit)
            self._running[exec_id] = run
            if new_state_name is not None:
                self._reserved[new_state_name] = run
        return run, source

    def _run(self, run, source):
        """Thread body. An interrupt can arrive only between _arm and _disarm. The
        request waits for ``_finish``, so it runs whatever happened before it."""
        try:
            outcome = self._attempt(run, source)
        except KeyboardInterrupt:  # our interrupt, landed in kernel code just around the cell
            self._disarm(run)      # each run is sent one at most, so none can be pending now
            outcome = Outcome(error=interrupted_error())
        except Exception as exc:  # a bug of ours: the reply says so rather than never coming
            traceback.print_exc(file=sys.__stderr__)
            outcome = Outcome(error=kernel_error(
                "InternalError", f"the kernel failed around this cell ({type(exc).__name__}); "
                "nothing was stored; the server log has the traceback"))
        self._finish(run, outcome, source)

    def _attempt(self, run, source):
        with capture.capturing(run.capture), interrupt.interruptible():
            self._arm(run)
            try:
                return self._run_cell(run, source)
            finally:
                self._disarm(run)

    def _run_cell(self, run, source):
        outcome, exc = cell.call_user(self._copy_run_copy, run, source)
        _, failed = cell.call_user(plots.flush, run.capture)  # figures show even if it raised
        exc = exc if exc is not None else failed
        if exc is not None:
            return Outcome(error=cell.error_dict(exc))
        return outcome

    def _copy_run_copy(self, run, source):
        body, last, notebook = cell.compile_cell(run.code, run.filename)
        working = Working(source, self.copy_mode, self.buffers,
                          provided=magics.CELL_BUILTINS if notebook else None)
        working.open(body, last)
        value = cell.run_code(body, last, working.namespace)
        if value is not None:
            data, metadata = display.bundle(value, run.output_limit, self.image_limit)
            run.capture.add({"output_type": "execute_result", "data": data,
                             "metadata": metadata})
            working.namespace["_"] = value  # as IPython: the last result
        del value
        plots.flush(run.capture)  # before the commit: the figures it shows are closed
        return Outcome(stored=working.commit())

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

    def _finish(self, run, outcome, source):
        with self._lock:
            self._running.pop(run.exec_id, None)
            if self._reserved.get(run.new_state_name) is run:
                del self._reserved[run.new_state_name]
            outcome = self._judge(run, outcome)
            name = None
            if outcome.error is None and not run.stuck:
                name = run.new_state_name or self._auto_name()
                self._states[name] = self._child(name, run, source, outcome.stored)
        run.reply = self._reply(run, outcome, name)
        run.finished.release()

    @staticmethod
    def _child(name, run, parent, changes):
        """The state that ``changes`` (from ``Working.commit``) make of ``parent``."""
        names = Namespace(parent.names, changes) if changes else parent.names
        new_bytes, total_bytes = sizes(parent, changes)
        return State(name, names, run.state_name, run.code, new_bytes, total_bytes)

    def _judge(self, run, outcome):
        """The outcome to report: resets and timeouts override what the cell did."""
        if run.generation != self._generation:
            message = "the kernel was reset while this cell ran; nothing was stored"
            return Outcome(error=kernel_error("KernelReset", message))
        if run.interrupt_reason == "shutdown":
            message = "the server is shutting down; nothing was stored"
            return Outcome(error=kernel_error("KernelShutdown", message))
        if run.interrupt_reason == "timeout":
            message = f"the cell ran past its {run.timeout:g} s timeout and was interrupted"
            frames = outcome.error["traceback"][:-1] if outcome.error else []
            return Outcome(error=kernel_error("TimeoutError", message, frames))
        return outcome

    def _auto_name(self):
        while True:
            name = f"state-{next(self._auto_names)}"
            if name not in self._states and name not in self._reserved:
                return name

    def _reply(self, run, outcome, name):
        output = run.capture.outputs()
        if outcome.error is not None:
            output.append({"output_type": "error", **outcome.error})
        return {"output": output, "state_name": name, "error": outcome.error,
                "exec_id": run.exec_id, "parent": run.state_name}

    # -- interrupts -----------------------------------------------------------------

    def interrupt(self, exec_id):
        """Raise KeyboardInterrupt in a running execution's cell."""
        with self._lock:
            run = self._running.get(exec_id)
            if run is None or run.phase == DONE:
                raise UnknownExecution(f"no running execution {exec_id!r}; it may have "
                                       "finished already")
            self._interrupt_locked(run, "request")

    def _interrupt_locked(self, run, reason):
        """Interrupt ``run`` once; later calls change nothing.

        Sending only one exception per execution is what makes the window
        around the cell safe: see ``_run``.
        """
        if run.interrupt_reason is not None:
            return
        run.interrupt_reason = reason
        run.interrupted_at = time.monotonic()
        if run.phase == STARTING:
            run.interrupt_requested = True
        elif run.phase == RUNNING:
            run.interrupt_sent = interrupt.raise_in_thread(run.thread_id)


def _positive(name, value, default, whole=False):
    """``value`` if it is a positive number (a whole one if ``whole``), else ``default``."""
    if value is None:
        return default
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < 10 ** 9:
        kind = "whole number" if whole else "number of seconds"
        raise InvalidArgument(f"{name} must be a positive {kind}, got {value!r}")
    return value
