"""The server process: serving until SIGINT or SIGTERM, then a stop bounded in time, and an
exit that waits for nothing cells left behind (threads, executors, child processes)."""

import functools
import os
import signal
import sys
import threading
import time

SHUTDOWN_TIMEOUT = 5.0       # seconds from SIGINT/SIGTERM to the process's exit, at most
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def serve_until_signalled(server, on_stop):
    """Serve until SIGINT or SIGTERM, call ``on_stop()``, and stop within SHUTDOWN_TIMEOUT.

    The handlers only set an event: raising from a handler can interrupt the
    main thread inside a queue operation and lose a worker's wake-up. Cheroot's
    ``stop()`` can still wait without end on a worker (it joins without a
    timeout after closing the worker's socket), so it runs in a thread that is
    abandoned at the deadline. Call ``exit_now()`` next.
    """
    stopping = threading.Event()
    _install_signal_handlers(server, stopping)
    serving = threading.Thread(target=server.serve, name="snapshot-kernel serve", daemon=True)
    serving.start()
    while serving.is_alive() and not stopping.wait(0.5):
        pass
    deadline = time.monotonic() + SHUTDOWN_TIMEOUT - 0.5
    say("snapshot-kernel shutting down")
    on_stop()
    stopper = threading.Thread(target=server.stop, name="snapshot-kernel stop", daemon=True)
    stopper.start()
    stopper.join(max(0.0, deadline - time.monotonic()))
    _terminate_children()


def say(message):
    """``message`` on stderr, if anyone reads it: a stderr whose reader has gone (the pipe
    of a parent that died) must not stop a start or a stop (it once kept a server from
    ever exiting)."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a broken pipe; a closed stream
        pass


def _install_signal_handlers(server, stopping):
    """SIGINT and SIGTERM set ``stopping``; processes that cells fork get neither handler."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda *_: stopping.set())
    # A supervised server process starts with them blocked (supervisor.py): one that came
    # meanwhile is delivered now, to its handler.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    os.register_at_fork(before=functools.partial(signal.pthread_sigmask, signal.SIG_BLOCK,
                                                 STOP_SIGNALS),
                        after_in_parent=functools.partial(signal.pthread_sigmask,
                                                          signal.SIG_UNBLOCK, STOP_SIGNALS),
                        after_in_child=functools.partial(_after_fork_in_child, server))


def _after_fork_in_child(server):
    """In a process a cell forked: no listening socket, and Python's default signal handlers.

    Without this the child keeps the port bound after the server has exited,
    and ``Process.terminate()`` only sets the copied server's stop event. The
    stop signals are blocked across the fork, because CPython drops signals
    that reach a child before its Python handlers run; one sent meanwhile, as
    by ``start()`` then ``terminate()``, is delivered by the unblocking.
    """
    listening = server.socket
    if listening is not None:
        listening.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _terminate_children():
    """SIGTERM the multiprocessing children that cells left: the exit will not wait for them."""
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:
        for child in multiprocessing.active_children():
            child.terminate()


def exit_now(code=0):
    """End the process now, skipping the joins and atexit hooks that cells' leftovers block."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be said on it
            pass
    os._exit(code)
