"""Shell commands run from cells (``!cmd``, ``%pip``): their output is passed on
as it comes, and they are killed if the cell is interrupted while it waits.

The wait is made of ``SLICE``-long selects, so the interrupt's KeyboardInterrupt
is raised within ``SLICE`` seconds (a plain ``Popen.wait`` would hold it until
the command ended). Needs a POSIX system: selectable pipes and process groups.
"""

import codecs
import os
import selectors
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
    with subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=stderr, start_new_session=True) as process:
        selector = selectors.DefaultSelector()
        try:  # loops are one frame down: on 3.13.0 an interrupt there skips a frame's handlers
            _watch(selector, ((process.stdout, out), (process.stderr, err)))
            _pump(selector, process)
        finally:  # a KeyboardInterrupt included: the command must not outlive the wait
            selector.close()
            if process.poll() is None:
                _kill_group(process)
    code = process.returncode
    return -(code - 128) if code > 128 else code  # the shell says 128 + N for signal N


def _watch(selector, pipes):
    for pipe, sink in pipes:
        if pipe is not None:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            selector.register(pipe, selectors.EVENT_READ, (sink, decoder))


def _pump(selector, process):
    """Forward output until the command has exited and its pipes are drained;
    commands it left running in the background are not waited for."""
    while selector.get_map():
        running = process.poll() is None
        ready = selector.select(SLICE if running else 0)
        for key, _ in ready:
            _forward(selector, key)
        if not ready and not running:
            break
    while process.poll() is None:  # it closed its output but still runs
        time.sleep(SLICE)


def _forward(selector, key):
    sink, decoder = key.data
    chunk = os.read(key.fd, 65536)
    if not chunk:
        selector.unregister(key.fileobj)
    text = decoder.decode(chunk, final=not chunk)
    if text:
        sink(text)


def _kill_group(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the shell and whatever it started
    except ProcessLookupError:  # it ended in the meantime
        pass
    process.wait()
