"""Per-thread capture of stdout and stderr, and a stdin that cells cannot block on.

``install()`` replaces ``sys.stdout``, ``sys.stderr`` and ``sys.stdin`` once,
process-wide, with streams that look up the calling thread's ``Capture``:
the thread running a cell, or a thread that such a thread started while its
cell was running. Every other thread, and a cell's thread after its capture
closed, reads and writes the original streams.
"""

import io
import os
import sys
import threading

from .outputs import (DEFAULT_FULL_LIMIT, MAX_RICH_ITEMS, PENDING_TEXT, PLAIN,  # noqa: F401
                      Capture)

_local = threading.local()
_install_lock = threading.Lock()
_THREAD_ATTR = "_snapshot_kernel_capture"


def current_capture():
    """The open Capture of the calling thread, or None."""
    capture = getattr(_local, "capture", None)
    if capture is None:
        capture = getattr(threading.current_thread(), _THREAD_ATTR, None)
    if capture is not None and not capture.closed:
        return capture
    return None


def note(name, text):
    """Write ``text`` to stream ``name`` of the calling thread's capture, if it has one."""
    capture = current_capture()
    if capture is not None:
        capture.write(name, text)


class capturing:
    """Context manager: route this thread's output to ``capture`` until exit."""

    def __init__(self, capture):
        self.capture = capture

    def __enter__(self):
        _local.capture = self.capture
        return self.capture

    def __exit__(self, *exc_info):
        _local.capture = None
        writer = _local.__dict__.pop("fast_writer", None)
        if writer is not None:
            del writer.write  # this thread's fast write: the class's applies again
        self.capture.close()


class ThreadSafeWriter(threading.local):
    """A text stream that writes to the calling thread's capture, or to ``fallback``.

    A ``threading.local``: while a cell's own thread prints to stdout, ``write``
    in that thread alone is the capture's ``fast_stdout().write``, a C function,
    so ``print`` runs Python code there only once per 8 KB. Every other write comes here.
    (``io.TextIOBase`` cannot be a base as well; it is registered instead.)
    """

    def __init__(self, name, fallback):  # run again in each thread that uses it
        self.name = PLAIN if name == PLAIN else name  # the very object: put() tests identity
        self.fallback = fallback

    def write(self, text):
        capture = current_capture()
        if (capture is not None and self.name is PLAIN
                and capture is getattr(_local, "capture", None)):  # the cell's own thread
            self.write = capture.fast_stdout().write  # in this thread, until the cell ends
            _local.fast_writer = self
            return self.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if capture is None:
            return self.fallback.write(text)
        if len(text) >= PENDING_TEXT:  # not kept waiting
            capture.write(self.name, text)
        else:
            capture.put(self.name, text)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        """A cell's flush sorts its writes in (so they reach a crash record, say)."""
        capture = current_capture()
        if capture is None:
            self.fallback.flush()
        else:
            capture.drain()

    def close(self):
        """Ignored: the stream is shared by every thread in the process."""

    @property
    def closed(self):
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def isatty(self):
        return current_capture() is None and self.fallback.isatty()

    def fileno(self):
        if current_capture() is not None:
            raise io.UnsupportedOperation(f"captured {self.name} has no file descriptor")
        return self.fallback.fileno()

    def _unsupported(self, *args):
        raise io.UnsupportedOperation(f"{self.name} is write-only and not seekable")

    read = readline = readlines = seek = tell = truncate = detach = _unsupported

    @property
    def encoding(self):
        return getattr(self.fallback, "encoding", None) or "utf-8"

    @property
    def errors(self):
        return getattr(self.fallback, "errors", None) or "strict"

    @property
    def newlines(self):
        return None


io.TextIOBase.register(ThreadSafeWriter)


class NoInput(io.TextIOBase):
    """A stdin that fails at once in cells (nobody can type into them)."""

    def __init__(self, fallback):
        super().__init__()
        self.fallback = fallback

    def _refuse(self):
        raise EOFError("input() and sys.stdin are not available in a snapshot-kernel "
                       "cell: put the data in the code instead")

    def read(self, size=-1):
        if current_capture() is not None:
            self._refuse()
        return self.fallback.read(size)

    def readline(self, size=-1):
        if current_capture() is not None:
            self._refuse()
        return self.fallback.readline(size)

    def readable(self):
        return True

    def fileno(self):
        if current_capture() is not None:
            raise io.UnsupportedOperation("stdin is not available in a cell")
        return self.fallback.fileno()

    def isatty(self):
        return current_capture() is None and self.fallback.isatty()

    @property
    def encoding(self):
        return getattr(self.fallback, "encoding", None) or "utf-8"


def install():
    """Put the capturing streams in place; idempotent and safe from any thread.

    Streams replaced since (pytest swaps sys.stdout per test) are wrapped again.
    """
    with _install_lock:
        if not isinstance(sys.stdout, ThreadSafeWriter):
            sys.stdout = ThreadSafeWriter("stdout", sys.stdout or open(os.devnull, "w"))
        if not isinstance(sys.stderr, ThreadSafeWriter):
            sys.stderr = ThreadSafeWriter("stderr", sys.stderr or open(os.devnull, "w"))
        if not isinstance(sys.stdin, NoInput):
            sys.stdin = NoInput(sys.stdin or open(os.devnull))
        if not getattr(threading.Thread.start, "_snapshot_kernel", False):
            threading.Thread.start = _inheriting_start(threading.Thread.start)


INHERITED = []  # hooks(thread) run as a thread starts, in the thread that starts it


def _inheriting_start(start):
    """Wrap Thread.start so a thread started by a cell writes to that cell's capture
    (and gets what the ``INHERITED`` hooks give it)."""

    def start_with_capture(self):
        setattr(self, _THREAD_ATTR, current_capture())
        for hook in INHERITED:
            hook(self)
        return start(self)

    start_with_capture._snapshot_kernel = True
    start_with_capture.__doc__ = start.__doc__
    return start_with_capture
