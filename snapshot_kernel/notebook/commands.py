"""Shell commands run from cells (``!cmd``, ``%pip``): their output is passed on
as it comes, and they are killed if the cell is interrupted while it waits.

The wait is made of ``SLICE``-long polls, so the interrupt's KeyboardInterrupt
is raised within ``SLICE`` seconds (a plain ``Popen.wait`` would hold it until
the command ended). Needs a POSIX system: ``poll`` on pipes, process groups.
"""

import codecs
import os
import select
import signal
import subprocess
import time

SLICE = 0.05  # seconds a wait may stay in C before a pending interrupt is seen


def run(command, out, err):
    """Run ``command`` in a shell, passing its output to ``out`` and ``err`` (None:
    merged into ``out``) as it comes; return its exit status, IPython's way (a
    signal is negative). If the caller is interrupted, the command and what it
    started are killed."""
    stderr = subprocess.PIPE if err is not None else subprocess.STDOUT
    # Bound before it starts: an interrupt may land after the fork, before ``Popen``
    # returns, and the command must not outlive it (``pid`` is set right after the fork).
    process = subprocess.Popen.__new__(subprocess.Popen)
    try:  # loops are one frame down: on 3.13.0 an interrupt there skips a frame's handlers
        process.__init__(command, shell=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
        _pump(process, _sinks(process, out, err))
    finally:  # a KeyboardInterrupt included: the command must not outlive the wait
        _end(process)
    code = process.returncode
    return -(code - 128) if code > 128 else code  # the shell says 128 + N for signal N


def _sinks(process, out, err):
    """``{file descriptor: (sink, decoder)}`` for the command's pipes."""
    pipes = ((process.stdout, out), (process.stderr, err))
    return {pipe.fileno(): (sink, codecs.getincrementaldecoder("utf-8")(errors="replace"))
            for pipe, sink in pipes if pipe is not None}


def _pump(process, sinks):
    """Forward output until the command has exited and its pipes are drained;
    commands it left running in the background are not waited for."""
    poller = select.poll()  # called from here, so an interrupt lands in this package's frames
    for descriptor in sinks:
        poller.register(descriptor, select.POLLIN)
    while sinks:
        running = process.poll() is None
        ready = poller.poll(SLICE * 1000 if running else 0)
        for descriptor, _ in ready:
            if not _forward(descriptor, *sinks[descriptor]):
                poller.unregister(descriptor)
                del sinks[descriptor]
        if not ready and not running:
            break
    while process.poll() is None:  # it closed its output but still runs
        time.sleep(SLICE)


def _forward(descriptor, sink, decoder):
    """Pass on what the pipe holds; False once it is closed."""
    chunk = os.read(descriptor, 65536)
    text = decoder.decode(chunk, final=not chunk)
    if text:
        sink(text)
    return bool(chunk)


def _end(process):
    """Kill the command's process group if it still runs, reap it, close its pipes.
    ``process`` may be half made: ``Popen`` interrupted, before or after the fork."""
    if getattr(process, "pid", None) is None:  # never started (Popen closed what it opened)
        return
    try:
        if process.poll() is None:
            _kill(process.pid)
            process.wait()
    finally:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def _kill(pid):
    """SIGKILL the shell's process group: the shell and whatever it started. Just
    after the fork the child may not lead its own group yet; then only it exists."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # no such group yet, or it ended in the meantime
            pass
