"""The record of one execution, the table of them, and the errors the kernel decides.

An ``Execution`` is mutable and guarded by the kernel lock. Its phase says
whether an interrupt may be raised in its thread: only while RUNNING. Its
``reply`` is set once, when the cell ends or when the kernel gives up on it
(a stuck cell); ``done`` is set with it. Records outlive their executions for
a while, so a client that started one without waiting can read its result.
"""

import collections
import os
import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional
from urllib.parse import quote

from .crashes import Crash
from .runtime.capture import Capture
from .states.storage import NOT_EXPORTED

# Phases of an execution: an interrupt is raised only while it is RUNNING.
STARTING, RUNNING, DONE = "starting", "running", "done"
# What GET /executions/<id> says of it.
STATUSES = ("waiting", "running", "completed", "failed", "interrupted", "timed_out", "stuck",
            "crashed")
DEFAULT_KEEP_SECONDS = 3600.0  # how long a finished execution's record is kept
DEFAULT_KEEP_COUNT = 1000      # and how many of them at most
DEFAULT_KEEP_BYTES = 256 * 2 ** 20  # and how many characters of their replies (the latest stays)


class Done:
    """``threading.Event`` for a flag set once: a lock held from the start, released by
    ``set``; a waiter takes it and gives it back. A fifth of the cost of an Event to make
    and set, which every execution pays. ``set`` is called under the kernel lock."""

    __slots__ = ("_set", "_lock")

    def __init__(self):
        self._set = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def is_set(self):
        return self._set

    def set(self):
        if not self._set:
            self._set = True
            self._lock.release()

    def wait(self, timeout=None):
        """True once set; False if ``timeout`` seconds passed first."""
        if self._set:
            return True
        if self._lock.acquire(True, -1 if timeout is None else max(timeout, 0)):
            self._lock.release()
        return self._set


@dataclass
class Outcome:
    """What a cell produced: the changes to store, or an error."""

    stored: Optional[dict] = None  # Working.commit()'s changes
    error: Optional[dict] = None
    process: Optional[object] = None  # settings.Process: what the cell's thread ended with


@dataclass
class Execution:
    """One execution; mutable fields are guarded by the kernel lock."""

    exec_id: str
    code: Optional[str]  # None once it ended: the state it made holds its code
    state_name: str
    new_state_name: Optional[str]
    generation: int
    capture: Capture
    filename: str
    timeout: Optional[float]
    output_limit: Optional[int]
    phase: str = STARTING
    thread_id: Optional[int] = None
    interrupt_requested: bool = False
    interrupt_sent: bool = False
    interrupt_resent: bool = False  # sent again: the first was lost (``Deadlines._resend_locked``)
    in_code: bool = False  # its thread runs the cell's own code (set and read without the lock)
    interrupt_reason: Optional[str] = None  # request, timeout, memory, reset, shutdown, ...
    interrupted_at: Optional[float] = None
    stuck: bool = False       # given up on: it has its reply, yet its thread runs on
    ended: bool = False       # its thread is done with it
    progress: Optional[str] = None  # the latest hint the cell gave (checkpoint progress=)
    checkpoints: list = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    ended_at: Optional[float] = None  # time.monotonic() when it ended
    done: Done = field(default_factory=Done)  # set with the reply
    reply: Optional[dict] = None
    source: object = None     # the State it runs on
    working: object = None    # its Working while the cell runs (checkpoints copy it out)
    context: object = None    # the contextvars.Context its cell runs in, while it runs
    every_calls: int = 0      # calls of checkpoint_every so far
    client_gone: object = None  # for a cell run on its caller's thread: true once the caller left
    on_abandon: object = None   # ... and called with the reply if it is given up on (stuck)
    crash: Optional[dict] = None  # how the server process running it died (deaths.cause_of)
    memory_held: Optional[tuple] = None  # (bytes held, the limit) if the memory limit stopped it
    size: int = 0             # characters its reply holds, once it is kept as finished
    waiting: Optional[dict] = None  # while other cells' settings hold it back: for whom, why
    waited: Optional[dict] = None   # once it ran: how long it waited, for whom, why
    running_since: Optional[float] = None  # time.monotonic() once it may run: its timeout
    taken: object = None      # its settings.Held while it runs (checkpoints read them)
    compiled: Optional[tuple] = None  # cell.compile_cell's, until its cell runs
    store: bool = True        # false: the cell runs for its outputs, and stores no state

    @property
    def status(self):
        if not self.done.is_set():
            return "waiting" if self.waiting is not None else "running"
        if self.crash is not None:
            return "crashed"
        if self.stuck and not self.ended:
            return "stuck"
        error = self.reply["error"]
        if error is None:
            return "completed"
        if self.interrupt_reason == "timeout":
            return "timed_out"
        if self.interrupt_reason is not None:
            return "interrupted"
        return "failed"

    def summary(self):
        """What GET /executions lists of it."""
        started = datetime.fromtimestamp(self.started_at, timezone.utc).isoformat()
        return {"exec_id": self.exec_id, "status": self.status, "state_name": self.state_name,
                "new_state_name": self.new_state_name, "started": started,
                "elapsed": round((self.ended_at or time.monotonic()) - self.started, 3),
                "timeout": self.timeout, "interrupted": self.interrupt_reason is not None,
                "interrupt_reason": self.interrupt_reason, "stuck": self.stuck,
                "thread_id": self.thread_id, "progress": self.progress,
                "checkpoints": list(self.checkpoints),
                "waiting": None if self.waiting is None else dict(self.waiting),
                **({} if self.crash is None else {"crash": dict(self.crash)})}

    def report(self):
        """What GET /executions/<id> says: the summary, the output so far, and the
        reply once there is one."""
        report = self.summary()
        report["output"] = self.capture.outputs() if self.reply is None else self.reply["output"]
        report["reply"] = self.reply
        return report


class Executions:
    """The running executions, and the finished ones still kept."""

    def __init__(self, keep_seconds=DEFAULT_KEEP_SECONDS, keep_count=DEFAULT_KEEP_COUNT,
                 keep_bytes=DEFAULT_KEEP_BYTES):
        self.keep_seconds, self.keep_count, self.keep_bytes = keep_seconds, keep_count, keep_bytes
        self.running = {}
        self.finished = collections.OrderedDict()
        self.kept_bytes = 0  # the sizes of the finished ones

    def get(self, exec_id):
        run = self.running.get(exec_id) or self.finished.get(exec_id)
        if run is not None and run.ended and time.monotonic() - run.ended_at >= self.keep_seconds:
            return None  # past its time: prune() drops it at the next end
        return run

    def add(self, run):
        earlier = self.finished.pop(run.exec_id, None)  # a finished one's id may be used again
        if earlier is not None:
            self.kept_bytes -= earlier.size
        self.running[run.exec_id] = run

    def restored(self, summary, crash=None, states_kept=True):
        """Keep the record of an execution that a restart ended (its summary as saved),
        that a ``crashes.Crash`` of the server process ended (or a forced stop of it), or
        that the last server's ``crashes.Stop`` did; ``states_kept`` says whether the
        states from before it are still there (with a state directory)."""
        crashed = isinstance(crash, Crash)
        stopped = crashed and crash.stopped == summary["exec_id"]
        reason = "force" if stopped else None if crashed else getattr(crash, "reason", "restart")
        run = Execution(summary["exec_id"], "", summary["state_name"],
                        summary["new_state_name"], -1, Capture(), "", summary["timeout"], None,
                        interrupt_reason=reason, checkpoints=summary["checkpoints"],
                        progress=summary["progress"],
                        crash=crash.cause if crashed and not stopped else None)
        last = run.checkpoints[-1]["state_name"] if run.checkpoints else None
        if crash is not None:
            _since_crash(run, summary, crash.died_at)
        if stopped:
            error = stopped_error(last)
        elif crashed:
            error = crash_error(crash.cause, last, states_kept)
        else:
            error = stop_error(run.interrupt_reason, last)
        output = [*summary.get("output", ()), {"output_type": "error", **error}]
        run.reply = {"output": output, "state_name": None, "error": error,
                     "exec_id": run.exec_id, "parent": run.state_name,
                     "checkpoints": run.checkpoints}
        run.done.set()
        self._keep(run)
        self.end(run)

    def end(self, run):
        """``run``'s thread is done: keep its record among the finished ones."""
        run.ended, run.ended_at = True, time.monotonic()
        run.source = run.working = None  # a kept record must not keep states alive
        run.code = None  # nor its code (5 MB of source, 20 times, stayed an hour)
        if self.running.get(run.exec_id) is run:
            del self.running[run.exec_id]
            self._keep(run)
        self.prune()

    def _keep(self, run):
        run.size = _characters(run.reply)
        self.kept_bytes += run.size
        self.finished[run.exec_id] = run

    def prune(self):
        """Drop the oldest finished records past the count, the age or the bytes."""
        now = time.monotonic()
        while self.finished:
            oldest = next(iter(self.finished.values()))
            if (len(self.finished) <= self.keep_count and now - oldest.ended_at < self.keep_seconds
                    and (self.kept_bytes <= self.keep_bytes or len(self.finished) == 1)):
                break
            self.finished.popitem(last=False)
            self.kept_bytes -= oldest.size
            oldest.capture.discard()


def _since_crash(run, summary, died_at):
    """Date a crashed execution as it ran: ``started`` as saved, ``elapsed`` (once
    ``Executions.end`` has ended it, now) up to the crash."""
    run.started_at = datetime.fromisoformat(summary["started"]).timestamp()
    run.started = time.monotonic() - max(0.0, died_at - run.started_at)


def stop_error(reason, last_checkpoint):
    """The error of an execution that was running when the server stopped: as asked
    (``shutdown``), or not (``restart``: killed with its supervisor, or without one)."""
    kept = "nothing but its checkpoints was stored" + (
        f"; the last is {last_checkpoint!r}" if last_checkpoint else "")
    if reason == "shutdown":
        return kernel_error("KernelShutdown", "the server was stopped (SIGINT or SIGTERM) "
                            f"while this cell ran; {kept}")
    return kernel_error("KernelRestart", f"the server stopped while this cell ran; {kept}")


def crash_error(cause, last_checkpoint, states_kept):
    """The error of an execution that was running when the server process died."""
    if states_kept:
        kept = "nothing but its checkpoints was stored" + (
            f"; the last is {last_checkpoint!r}" if last_checkpoint else "")
    else:
        kept = ("every state but 'initial' was lost with it (--in-memory): start the server "
                "without --in-memory to keep them across a crash")
    return kernel_error("KernelCrash", f"the server process {cause['cause']} while this cell "
                        f"ran, and a new one took over; {kept}")


def stopped_error(last_checkpoint):
    """The error of the execution a forced stop ended."""
    return kernel_error("KeyboardInterrupt", "the cell was stopped by force: no interrupt "
                        "reached it (a long call in C, say), so the server process running "
                        "it was replaced; nothing but its checkpoints was stored"
                        + (f"; the last is {last_checkpoint!r}" if last_checkpoint else ""))


def _characters(value):
    """Characters of the strings in ``value`` (a reply: dicts, lists, strings, numbers).
    Every execution's reply is counted: a loop, without a generator per level."""
    total, todo = 0, [value]
    while todo:
        each = todo.pop()
        if isinstance(each, str):
            total += len(each)
        elif isinstance(each, dict):
            for key, item in each.items():
                total += len(key) if isinstance(key, str) else 8
                todo.append(item)
        elif isinstance(each, (list, tuple)):
            todo.extend(each)
        else:
            total += 8
    return total


def stuck_error(run, grace):
    timed_out = run.interrupt_reason == "timeout"
    cause = f"its {run.timeout:g} s timeout" if timed_out else "an interrupt"
    message = (f"the cell did not stop within {grace:g} s of {cause}: it is still running, "
               f"stuck (blocked in C or ignoring KeyboardInterrupt), and will store nothing; "
               f"GET /executions lists it")
    return kernel_error("TimeoutError" if timed_out else "KeyboardInterrupt", message)


def kernel_error(ename, evalue, frames=()):
    """An error dict for an outcome the kernel decided, not one the cell raised."""
    return {"ename": ename, "evalue": evalue,
            "traceback": [*frames, f"{ename}: {evalue}\n"]}


def interrupted_error():
    return kernel_error("KeyboardInterrupt", "the cell was interrupted")


def judged(run, outcome, generation):
    """The outcome to report: resets, shutdowns and timeouts override what the cell did."""
    if run.generation != generation:
        message = "the kernel was reset while this cell ran; nothing was stored"
        return Outcome(error=kernel_error("KernelReset", message))
    if run.interrupt_reason == "shutdown":
        message = "the server is shutting down; nothing was stored"
        return Outcome(error=kernel_error("KernelShutdown", message))
    if run.interrupt_reason == "timeout":
        message = f"the cell ran past its {run.timeout:g} s timeout and was interrupted"
        frames = outcome.error["traceback"][:-1] if outcome.error else []
        return Outcome(error=kernel_error("TimeoutError", message, frames))
    if run.interrupt_reason == "memory":
        held, limit = run.memory_held
        message = (f"the server process held {held / 1e6:,.0f} MB while this cell ran, past "
                   f"its --max-cell-memory of {limit / 1e6:,.0f} MB: the cell was interrupted "
                   "and nothing was stored")
        frames = outcome.error["traceback"][:-1] if outcome.error else []
        return Outcome(error=kernel_error("MemoryError", message, frames))
    return outcome


def reply_for(run, outcome, name, lost=None):
    """The reply of ``/execute``: outputs, the error if any, the state stored if any,
    and the names of it that could not be saved to disk (``lost``), if any."""
    output = run.capture.outputs()
    if outcome.error is not None:
        output.append({"output_type": "error", **outcome.error})
    reply = {"output": output, "state_name": name, "error": outcome.error,
             "exec_id": run.exec_id, "parent": run.state_name}
    if run.checkpoints:
        reply["checkpoints"] = list(run.checkpoints)
    if run.waited:
        reply["waited"] = dict(run.waited)
    if lost:
        reply["lost"] = dict(lost)
    truncated = run.capture.truncated()
    for stream, facts in truncated.items():  # where the rest is: GET it, page by page
        facts["location"] = f"/executions/{quote(run.exec_id, safe='')}/output?stream={stream}"
    if truncated:
        reply["truncated"] = truncated
    return reply


# Execution ids need to be unique, not secret (GET /executions lists them): 128 bits
# from a generator seeded by the OS, which costs a tenth of a urandom call per id.
_ids = random.Random(secrets.randbits(256))
os.register_at_fork(after_in_child=lambda: _ids.seed(secrets.randbits(256)))


def new_exec_id():
    return f"{_ids.getrandbits(128):032x}"


def explain_gone(error, gone):
    """A NameError for a name the state lost at a restart (or an export) says so, and why."""
    if error["ename"] != "NameError":
        return error
    for name, reason in gone.items():
        if f"'{name}'" in error["evalue"]:
            if reason.startswith(NOT_EXPORTED):
                note = (f"; {name!r} was in this state on the server it was exported from, "
                        f"but could not be exported ({reason[len(NOT_EXPORTED):]})")
            else:
                note = (f"; {name!r} was in this state but could not be saved, so the restart "
                        f"lost it ({reason})")
            error = dict(error, evalue=error["evalue"] + note)
            error["traceback"] = error["traceback"][:-1] + [f"NameError: {error['evalue']}\n"]
            break
    return error
