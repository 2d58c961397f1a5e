"""The supervisor: a small parent process that serves from a forked server process and
forks a new one when that one dies unasked. (Not the deadlines thread of ``deadlines.py``.)

    python -m snapshot_kernel.main ...   # supervisor -> server process -> cells

The caller binds the listening socket before ``supervise`` and keeps it open, so
while a new server process starts, connections wait in the kernel's backlog and
none is refused. The supervisor touches no socket and runs no thread: it blocks
SIGINT, SIGTERM and SIGCHLD and takes them one at a time with ``sigtimedwait``,
so no handler can run between a fork and its bookkeeping. The server process
starts with them blocked too, and unblocks them once it has handlers: a stop
signal sent meanwhile is held, never lost (CLAUDE.md's trap on signals and fork).

- A stop signal (SIGINT, SIGTERM) is passed on to the server process, which stops
  as it would alone; the supervisor then exits with its status, killing it if it
  outlives ``stop_timeout``.
- Any other end of the server process is a crash: a signal (SIGSEGV, SIGABRT,
  SIGKILL, ...) or an exit status (``os._exit`` in a cell). The supervisor says so
  on stderr and forks the next server process at once, handing it a
  ``crashes.Crash``: the cause, and the executions the ``crashes.Journal`` lists.
  A server process that exits with ``crashes.FORCED_EXIT`` after naming an execution
  in the journal was ended by a forced stop of that execution: the cause says so.
- Crash loops are bounded. A server process that dies of a signal before it is
  ready (listening, its state directory read) is started again after a pause
  that doubles each time, and after MAX_START_FAILURES such deaths in a row the
  supervisor gives up, saying why. One that exits with a status before it is
  ready (a refused --state-dir, say) has said why: the supervisor exits with it.
- A server process dies with its supervisor (``PR_SET_PDEATHSIG``): ``kill -9`` of
  the supervisor ends the server as it did before there was one.
"""

import ctypes
import faulthandler
import os
import signal
import sys
import time
import traceback

from . import crashes, deaths

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
TAKEN = {*STOP_SIGNALS, signal.SIGCHLD}  # blocked in the supervisor, taken by sigtimedwait
MAX_START_FAILURES = 5  # deaths by a signal before serving, in a row, before giving up
FIRST_PAUSE = 0.1       # seconds before the second start after such a death; then doubled
# The evidence that a SIGKILL was the OOM killer's: OOM kills counted since a reading at
# most OOM_WINDOW s before it. Counting over the process's whole life would blame the OOM
# killer for a `kill -9` long after another process ran out of memory.
OOM_WINDOW = 60.0
_PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def supervise(serve, stop_timeout, journal, stop=None):
    """Run ``serve(crash, journal)`` in a forked server process, and again each time that
    process dies unasked, until a stop signal; return the supervisor's exit status.

    ``serve`` never returns when it serves (it ends its process); it returns or raises
    only if it could not start. ``crash`` is, for the first process, ``stop`` (how the
    last server on its state directory ended, or None); then the ``crashes.Crash``.
    """
    prctl = _prctl()
    signal.pthread_sigmask(signal.SIG_BLOCK, TAKEN)
    crash, failures = stop, 0
    while True:
        oom_kills = deaths.oom_kills()
        pid = _fork(serve, crash, journal, prctl)
        status, stopping = _wait(pid, stop_timeout, oom_kills)
        if stopping:
            return _stopped_status(status)
        stopped = journal.stopped() if _exited_with(status, crashes.FORCED_EXIT) else None
        ready, running = journal.take()
        cause = (deaths.cause_of(status, oom_kills, deaths.oom_kills()) if stopped is None
                 else deaths.forced_cause(stopped))
        if ready:
            failures = 0
            crash = crashes.Crash(cause, time.time(), running, stopped)
            _say(f"the server process {cause['cause']}{_while_running(running)}; "
                 "starting a new one")
            continue
        if not os.WIFSIGNALED(status):
            return os.waitstatus_to_exitcode(status)  # it refused to start, and said why
        failures += 1
        if failures == MAX_START_FAILURES:
            _say(f"the server process {cause['cause']} before it could serve, "
                 f"{failures} times in a row; giving up. `python -X faulthandler -m "
                 "snapshot_kernel.main --no-supervisor ...` shows where it dies")
            return 1
        pause = FIRST_PAUSE * 2 ** (failures - 1)
        _say(f"the server process {cause['cause']} before it could serve; starting a new "
             f"one in {pause:g} s ({failures} of {MAX_START_FAILURES} tries)")
        if _stop_signal_within(pause):
            return 0


def _fork(serve, crash, journal, prctl):
    """Fork a server process running ``serve``; its pid. The child never returns."""
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child would print what the supervisor buffered
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = _serve(serve, crash, journal, parent, prctl)
    finally:
        os._exit(code)  # never back into the supervisor's loop


def _serve(serve, crash, journal, parent, prctl):
    """In a new server process: ``serve(crash, journal)``; the exit status if it returns
    or fails to start."""
    try:
        _die_with(parent, prctl)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})  # cells wait for children
        faulthandler.enable(all_threads=False)  # a crash leaves the stack of its thread on stderr
        serve(crash, journal)
    except SystemExit as exc:  # sys.exit("message") at start: say it as Python would
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr, flush=True)
            return 1
        return exc.code or 0
    except Exception:  # a failure to start: its traceback, as Python would print it
        traceback.print_exc()
        return 1
    return 0


def _wait(pid, stop_timeout, oom_kills):
    """``(wait status, whether a stop signal came)`` once process ``pid`` has ended. A stop
    signal is passed on to it; ``stop_timeout`` s later, it is killed. ``oom_kills`` (from
    ``deaths.oom_kills``) is read again every OOM_WINDOW s meanwhile."""
    deadline = None
    while True:
        left = OOM_WINDOW if deadline is None else deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1], True
        taken = signal.sigtimedwait(TAKEN, left)
        if taken is None and deadline is None:
            oom_kills.update(deaths.oom_kills())
        if taken is not None and taken.si_signo in STOP_SIGNALS and deadline is None:
            deadline = time.monotonic() + stop_timeout
            os.kill(pid, taken.si_signo)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, deadline is not None


def _exited_with(status, code):
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == code


def _stopped_status(status):
    """The supervisor's exit status once its server process has stopped as asked."""
    if not os.WIFSIGNALED(status):
        return os.waitstatus_to_exitcode(status)
    if os.WTERMSIG(status) == signal.SIGKILL:
        _say("the server process did not stop in time and was killed")
        return 0  # as a server alone would have: it exits at its deadline, whatever runs
    _say(f"the server process {deaths.cause_of(status, {}, {})['cause']} while stopping")
    return 1


def _stop_signal_within(seconds):
    """Wait ``seconds``; True, at once, if a stop signal comes meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        taken = signal.sigtimedwait(TAKEN, deadline - time.monotonic())
        if taken is not None and taken.si_signo in STOP_SIGNALS:
            return True
    return False


def _while_running(running):
    if not running:
        return ""
    ids = ", ".join(summary["exec_id"] for summary in running[:5])
    more = f" and {len(running) - 5} more" if len(running) > 5 else ""
    return f" while running {ids}{more} (GET /executions/<exec_id> says so)"


def _say(message):
    try:
        print(f"snapshot-kernel: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # nobody reads stderr any more: go on without saying it
        pass


def _prctl():
    """libc's ``prctl``, typed; loaded in the supervisor, not after each fork."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def _die_with(parent, prctl):
    """Have Linux SIGKILL this process when the supervisor ``parent`` dies. Cannot cover a
    supervisor that died before the call: that is checked after it."""
    if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
    if os.getppid() != parent:
        os._exit(1)
