"""Per-thread capture of stdout and stderr, and a stdin that cells cannot block on.

``install()`` replaces ``sys.stdout``, ``sys.stderr`` and ``sys.stdin`` once,
process-wide, with streams that look up the calling thread's ``Capture``:
the thread running a cell, or a thread that such a thread started while its
cell was running. Every other thread, and a cell's thread after its capture
closed, reads and writes the original streams.
"""

import codecs
import collections
import io
import os
import sys
import tempfile
import threading

_local = threading.local()
_install_lock = threading.Lock()
_THREAD_ATTR = "_snapshot_kernel_capture"
MAX_RICH_ITEMS = 500  # display_data and execute_result items kept per execution
DEFAULT_FULL_LIMIT = 100 * 1024 * 1024  # bytes of each stream's full text kept for paging


class Capture:
    """The stdout/stderr text of one execution, Jupyter-shaped.

    Each stream keeps at most ``limit`` characters (None: no limit): the first
    half and the last half, with a marker saying how much was left out, so a
    cell that prints forever uses bounded memory.
    """

    def __init__(self, limit=None, image_limit=None, full_limit=DEFAULT_FULL_LIMIT):
        self.limit = limit
        self.image_limit = image_limit  # bytes of one image in a display_data item
        self.full_limit = full_limit    # bytes of a stream's full text kept for paging
        self.closed = False
        self.checkpoint = None  # the kernel's checkpoint function while the cell runs
        self._full = {}  # stream name -> FullText, once the stream outgrew the limit
        self._seen = {}  # stream name -> characters written in all
        self._lock = threading.Lock()
        self._outputs = []
        self._head_used = {}  # stream name -> characters kept in the head
        self._tails = {}  # stream name -> deque of the latest text past the head
        self._tail_used = {}
        self._omitted = {}
        self._rich = self._rich_omitted = 0

    def write(self, name, text):
        with self._lock:
            self._seen[name] = self._seen.get(name, 0) + len(text)
            if self.limit is None:
                self._append(name, text)
                return
            head_room = self.limit // 2 - self._head_used.get(name, 0)
            if name in self._full:
                self._full[name].write(text)
            elif len(text) > head_room:  # it outgrows the reply: keep it all for paging
                self._full[name] = FullText(self.full_limit)
                self._full[name].write(self._kept_head(name) + text)
            if head_room > 0:
                self._append(name, text[:head_room])
                self._head_used[name] = self._head_used.get(name, 0) + len(text[:head_room])
                text = text[head_room:]
            if text:
                self._keep_tail(name, text)

    def add(self, item):
        """Add a rich output item (``display_data``, ``execute_result``) in order;
        past ``MAX_RICH_ITEMS`` of them, count the rest instead."""
        with self._lock:
            if self._rich >= MAX_RICH_ITEMS:
                self._rich_omitted += 1
                return
            self._rich += 1
            self._outputs.append(item)

    def _kept_head(self, name):
        return "".join(item["text"] for item in self._outputs
                       if item["output_type"] == "stream" and item["name"] == name)

    def truncated(self):
        """``{stream: {"characters", "kept_characters", "capped"}}`` for the streams the
        reply shows only part of; ``read`` pages through them."""
        with self._lock:
            return {name: {"characters": self._seen[name], "kept_characters": full.chars,
                           "capped": full.capped} for name, full in self._full.items()}

    def read(self, name, offset, limit):
        """``(text, total)``: up to ``limit`` characters of stream ``name`` from ``offset``,
        and how many characters of it can be read."""
        with self._lock:
            full = self._full.get(name)
            if full is None:
                text = self._kept_head(name)
                return text[offset:offset + limit], len(text)
            return full.read(offset, limit), full.chars

    def discard(self):
        """Free the full texts kept for paging."""
        with self._lock:
            for full in self._full.values():
                full.close()
            self._full.clear()

    def _append(self, name, text):
        last = self._outputs[-1] if self._outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self._outputs.append({"output_type": "stream", "name": name, "text": text})

    def _keep_tail(self, name, text):
        tail, room = self._tails.setdefault(name, collections.deque()), self.limit - self.limit // 2
        tail.append(text)
        used = self._tail_used.get(name, 0) + len(text)
        while used > room:
            excess = used - room
            first = tail.popleft()
            if len(first) > excess:
                tail.appendleft(first[excess:])
            dropped = min(len(first), excess)
            used -= dropped
            self._omitted[name] = self._omitted.get(name, 0) + dropped
        self._tail_used[name] = used

    def outputs(self):
        """The stream items so far, with each stream's kept tail at the end."""
        with self._lock:
            items = [dict(item) for item in self._outputs]
            for name, tail in self._tails.items():
                # Trimmed again here: an interrupt can land between a write and its trim.
                text, room = "".join(tail), self.limit - self.limit // 2
                omitted = self._omitted.get(name, 0) + max(len(text) - room, 0)
                marker = ""
                if omitted:
                    marker = f"\n[... {omitted} characters of {name} omitted ...]\n"
                items.append({"output_type": "stream", "name": name,
                              "text": marker + text[max(len(text) - room, 0):]})
            if self._rich_omitted:
                items.append({"output_type": "stream", "name": "stderr", "text":
                              f"[... {self._rich_omitted} more display outputs omitted ...]\n"})
            return items


class FullText:
    """The whole text of one stream, in a temporary file, up to ``cap`` bytes of UTF-8.

    Paging is by character offsets: every ``STEP`` characters, the byte offset
    where they start is noted, so a read decodes from the nearest note.
    """

    STEP = 1 << 16

    def __init__(self, cap):
        self.cap = cap
        self.chars = self._bytes = 0
        self.capped = False
        self._file = tempfile.TemporaryFile()
        self._marks = [(0, 0)]  # (character offset, byte offset)

    def write(self, text):
        if self.capped or not text:
            return
        data = text.encode("utf-8", "surrogatepass")
        if self._bytes + len(data) > self.cap:
            text = data[:self.cap - self._bytes].decode("utf-8", "ignore")
            data = text.encode("utf-8", "surrogatepass")
            self.capped = True
        self._file.seek(self._bytes)
        self._file.write(data)
        if (self.chars + len(text)) // self.STEP > self.chars // self.STEP:
            self._marks.append((self.chars + len(text), self._bytes + len(data)))
        self.chars += len(text)
        self._bytes += len(data)

    def read(self, offset, limit):
        start, position = max((mark for mark in self._marks if mark[0] <= offset),
                              default=(0, 0))
        self._file.seek(position)
        decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        text, wanted = "", offset - start + limit
        while len(text) < wanted:
            block = self._file.read(max(wanted - len(text), 4096) * 4)
            if not block:
                break
            text += decoder.decode(block)
        return text[offset - start:offset - start + limit]

    def close(self):
        self._file.close()


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
        self.capture.closed = True
        _local.capture = None


class ThreadSafeWriter(io.TextIOBase):
    """A text stream that writes to the calling thread's capture, or to ``fallback``."""

    def __init__(self, name, fallback):
        super().__init__()
        self.name = name
        self.fallback = fallback

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        capture = current_capture()
        if capture is None:
            return self.fallback.write(text)
        capture.write(self.name, text)
        return len(text)

    def flush(self):
        if current_capture() is None:
            self.fallback.flush()

    def close(self):
        """Ignored: the stream is shared by every thread in the process."""

    def writable(self):
        return True

    def isatty(self):
        return current_capture() is None and self.fallback.isatty()

    def fileno(self):
        if current_capture() is not None:
            raise io.UnsupportedOperation(f"captured {self.name} has no file descriptor")
        return self.fallback.fileno()

    @property
    def encoding(self):
        return getattr(self.fallback, "encoding", None) or "utf-8"

    @property
    def errors(self):
        return getattr(self.fallback, "errors", None) or "strict"


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
