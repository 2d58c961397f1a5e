"""SnapshotKernel: immutable namespace states and executions that branch from them.

A state is a namespace dict that no running code can reach: an execution runs
on a private deep copy of its source state and, if the cell succeeds, a deep
copy of the result becomes a new state. The kernel lock guards only the tables
(states, running executions, reserved names); copying and running happen
outside it, which is safe because stored namespaces are never mutated.

Knows nothing of HTTP: methods return plain dicts and raise ``KernelError``.
"""

import builtins
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from . import capture, cell, interrupt
from .copier import copy_namespace

INITIAL = "initial"
MAX_NAME_LENGTH = 128
DEFAULT_REPR_LIMIT = 2000


class KernelError(Exception):
    """A request the kernel refuses; the message says what to do instead."""


class InvalidName(KernelError):
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


@dataclass(frozen=True)
class State:
    """An immutable snapshot. Its ``namespace`` is never handed to running code."""

    name: str
    namespace: dict
    parent: Optional[str]
    code: str
    shared: dict
    timestamp: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())


@dataclass
class Outcome:
    """What a cell produced: a namespace to store, or an error."""

    namespace: Optional[dict] = None
    shared: Optional[dict] = None
    result: Optional[dict] = None
    error: Optional[dict] = None


# Phases of an execution: an interrupt is raised only while it is RUNNING.
STARTING, RUNNING, DONE = "starting", "running", "done"


@dataclass
class Execution:
    """One /execute call; mutable fields are guarded by the kernel lock."""

    exec_id: str
    code: str
    state_name: str
    new_state_name: Optional[str]
    generation: int
    capture: capture.Capture
    filename: str
    phase: str = STARTING
    thread_id: Optional[int] = None
    interrupt_requested: bool = False
    interrupt_sent: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    reply: Optional[dict] = None


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


def fresh_namespace():
    return {"__name__": "__main__", "__doc__": None, "__package__": None,
            "__spec__": None, "__builtins__": builtins}


class SnapshotKernel:
    """Holds the states and runs cells against them, each in its own thread."""

    def __init__(self, repr_limit=DEFAULT_REPR_LIMIT, output_limit=None):
        capture.install()
        self.repr_limit = repr_limit
        self.output_limit = output_limit
        self._lock = threading.Lock()
        self._states = {}
        self._running = {}
        self._reserved = {}
        self._generation = 0
        self._cell_numbers = itertools.count(1)
        self._auto_names = itertools.count(1)
        self._states[INITIAL] = State(INITIAL, fresh_namespace(), None, "", {})

    # -- states -----------------------------------------------------------------

    def state_names(self):
        with self._lock:
            return list(self._states)

    def describe(self, name):
        """The state's metadata and a repr of each non-dunder variable."""
        state = self._get(name)
        variables = {
            key: {"type": type(value).__name__, "repr": cell.safe_repr(value, self.repr_limit)}
            for key, value in state.namespace.items()
            if not (key.startswith("__") and key.endswith("__"))
        }
        return {"name": state.name, "timestamp": state.timestamp, "parent": state.parent,
                "code": state.code, "variables": variables, "shared": dict(state.shared)}

    def delete(self, name):
        with self._lock:
            if name == INITIAL:
                raise ProtectedState(f"state {INITIAL!r} cannot be deleted; POST /reset "
                                     "to drop every other state")
            if self._states.pop(name, None) is None:
                raise UnknownState(f"no state named {name!r}; GET /states lists them")

    def reset(self):
        """Drop every state but a fresh ``initial``; interrupt running executions.

        An execution running across a reset stores nothing: its reply's error
        is ``KernelReset``, even if its cell finished.
        """
        initial = State(INITIAL, fresh_namespace(), None, "", {})
        with self._lock:
            self._generation += 1
            self._states = {INITIAL: initial}
            self._reserved.clear()
            for run in self._running.values():
                self._interrupt_locked(run)
            return list(self._states)

    def _get(self, name):
        with self._lock:
            state = self._states.get(name)
        if state is None:
            raise UnknownState(f"no state named {name!r}; GET /states lists them")
        return state

    # -- executions ---------------------------------------------------------------

    def execute(self, code, state_name, exec_id=None, new_state_name=None):
        """Run ``code`` on a copy of ``state_name``; store the result if it succeeds.

        Blocks until the cell finishes. Returns the reply dict of the HTTP API.
        """
        capture.install()  # again: a host such as pytest may have swapped sys.stdout since
        exec_id = exec_id if exec_id is not None else uuid.uuid4().hex
        check_name(exec_id, "exec_id")
        if new_state_name is not None:
            check_name(new_state_name, "new_state_name")
        run, source = self._begin(code, state_name, exec_id, new_state_name)
        threading.Thread(target=self._run, args=(run, source), daemon=True,
                         name=f"snapshot-kernel cell {exec_id}").start()
        run.finished.wait()
        return run.reply

    def _begin(self, code, state_name, exec_id, new_state_name):
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
                            capture.Capture(self.output_limit),
                            cell.cell_filename(next(self._cell_numbers)))
            self._running[exec_id] = run
            if new_state_name is not None:
                self._reserved[new_state_name] = run
        return run, source

    def _run(self, run, source):
        """Thread body. An interrupt can arrive only between _arm and _disarm."""
        try:
            outcome = self._attempt(run, source)
        except KeyboardInterrupt:  # our interrupt, landed in kernel code just around the cell
            self._disarm(run)      # each run is sent one at most, so none can be pending now
            outcome = Outcome(error=_interrupted())
        self._finish(run, outcome)

    def _attempt(self, run, source):
        with capture.capturing(run.capture):
            self._arm(run)
            try:
                return self._run_cell(run, source)
            finally:
                self._disarm(run)

    def _run_cell(self, run, source):
        cell.remember_source(run.filename, run.code)
        outcome, exc = cell.call_user(self._copy_run_copy, run, source)
        if exc is not None:
            return Outcome(error=cell.error_dict(exc))
        return outcome

    def _copy_run_copy(self, run, source):
        namespace, _ = copy_namespace(source.namespace)
        body, last = cell.compile_cell(run.code, run.filename)
        value = cell.run_code(body, last, namespace)
        result = None
        if value is not None:
            result = {"output_type": "execute_result",
                      "data": {"text/plain": cell.safe_repr(value, self.repr_limit)}}
        del value
        stored, shared = copy_namespace(namespace)
        return Outcome(namespace=stored, shared=shared, result=result)

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

    def _finish(self, run, outcome):
        with self._lock:
            self._running.pop(run.exec_id, None)
            if self._reserved.get(run.new_state_name) is run:
                del self._reserved[run.new_state_name]
            if run.generation != self._generation:
                outcome = Outcome(error=_reset_error())
            name = None
            if outcome.error is None:
                name = run.new_state_name or self._auto_name()
                self._states[name] = State(name, outcome.namespace, run.state_name,
                                           run.code, outcome.shared)
        if name is None:
            cell.forget_source(run.filename)
        run.reply = self._reply(run, outcome, name)
        run.finished.set()

    def _auto_name(self):
        while True:
            name = f"state-{next(self._auto_names)}"
            if name not in self._states and name not in self._reserved:
                return name

    def _reply(self, run, outcome, name):
        output = run.capture.outputs()
        if outcome.result is not None:
            output.append(outcome.result)
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
            self._interrupt_locked(run)

    def _interrupt_locked(self, run):
        if run.phase == STARTING:
            run.interrupt_requested = True
        elif run.phase == RUNNING and not run.interrupt_sent:
            run.interrupt_sent = interrupt.raise_in_thread(run.thread_id)


def _interrupted():
    return {"ename": "KeyboardInterrupt", "evalue": "", "traceback": ["KeyboardInterrupt\n"]}


def _reset_error():
    message = "the kernel was reset while this cell ran; nothing was stored"
    return {"ename": "KernelReset", "evalue": message,
            "traceback": [f"KernelReset: {message}\n"]}
