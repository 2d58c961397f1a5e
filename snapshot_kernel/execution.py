"""The record of one execution, and the errors the kernel reports for it.

An ``Execution`` is mutable and guarded by the kernel lock. Its phase says
whether an interrupt may be raised in its thread: only while RUNNING.
"""

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from .capture import Capture

@dataclass
class Outcome:
    """What a cell produced: a namespace to commit, or an error."""

    stored: Optional[dict] = None  # the fields of the State to store
    error: Optional[dict] = None


def _held_lock():
    lock = threading.Lock()
    lock.acquire()
    return lock


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
    capture: Capture
    filename: str
    timeout: Optional[float]
    output_limit: Optional[int]
    phase: str = STARTING
    thread_id: Optional[int] = None
    interrupt_requested: bool = False
    interrupt_sent: bool = False
    interrupt_reason: Optional[str] = None  # "request", "timeout", "reset" or "shutdown"
    interrupted_at: Optional[float] = None
    stuck: bool = False
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    finished: threading.Lock = field(default_factory=_held_lock)  # released when reply is set
    reply: Optional[dict] = None

    def summary(self):
        started = datetime.fromtimestamp(self.started_at, timezone.utc).isoformat()
        return {"exec_id": self.exec_id, "state_name": self.state_name,
                "new_state_name": self.new_state_name, "started": started,
                "elapsed": round(time.monotonic() - self.started, 3),
                "timeout": self.timeout, "interrupted": self.interrupt_reason is not None,
                "interrupt_reason": self.interrupt_reason, "stuck": self.stuck,
                "thread_id": self.thread_id}


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
