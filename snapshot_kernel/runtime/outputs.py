"""The outputs of one execution: ``Capture`` sorts what a cell writes into
Jupyter-shaped items, keeping of each stream a head, a tail and, once the stream
outgrew the reply, its whole text for paging (``streams``)."""

import _thread
import io
import itertools
import operator
import os
import sys
import threading
import time
import weakref

from .streams import FullText, Stream

MAX_RICH_ITEMS = 500  # display_data and execute_result items kept per execution
DEFAULT_FULL_LIMIT = 100 * 1024 * 1024  # bytes of each stream's full text kept for paging
PENDING_ITEMS = 1024  # writes that wait in Capture.pending before a writer drains them
PENDING_TEXT = 8192  # characters of one write that a writer sorts in at once instead
DRAIN_EVERY = 0.01  # seconds between the drainer's rounds while a fast stdout is open
FAST_ITEMS = 128  # writes of a fast stdout (of 8 KB) waiting past which its cell sorts them
PLAIN = "stdout"  # the stream whose pending texts go untagged: the one print() writes to
_NAME, _TEXT = operator.itemgetter(0), operator.itemgetter(1)


class Capture:
    """The stdout/stderr text of one execution, Jupyter-shaped.

    Each stream keeps at most ``limit`` characters (None: no limit): the first
    half and the last half, cut at line boundaries, with a marker saying how
    much was left out, so a cell that prints forever uses bounded memory.

    Writes wait in ``pending`` (``list.append`` is atomic), in order: a text of
    ``PLAIN``, a ``(stream, text)`` pair, or UTF-8 bytes of ``PLAIN`` from
    ``fast_stdout``, the stream the cell's own thread prints to, which runs Python
    code only once per 8 KB. Every method here first drains ``pending`` under the
    lock; only the holder of the lock removes from it, only what it read. Writers
    drain it every ``PENDING_ITEMS`` writes (``FAST_ITEMS`` for the fast stdout),
    so what waits stays small whoever else has a turn; the drainer thread drains
    it every ``DRAIN_EVERY`` s while a fast stdout is open, so what a cell prints
    shows while it runs.
    """

    def __init__(self, limit=None, image_limit=None, full_limit=DEFAULT_FULL_LIMIT):
        self.limit = limit
        self.image_limit = image_limit  # bytes of one image in a display_data item
        self.full_limit = full_limit    # bytes of a stream's full text kept for paging
        self.closed = False
        self.checkpoint = None  # the kernel's checkpoint function while the cell runs
        self.pending = []  # writes not yet sorted in: see the class docstring
        self._fast = None  # the TextIOWrapper of fast_stdout, once asked for
        # Reentrant, and held by the thread sorting in: a collection that runs a finalizer
        # while it sorts may print from the same thread (``print`` in ``__del__``), which
        # must neither wait for itself nor sort in midway (``_nested``).
        self._lock = threading.RLock()
        self._outputs = []
        self._streams = {}  # stream name -> Stream
        self._rich = self._rich_omitted = 0
        self._tail_pieces = 0    # tail pieces kept so far: their order among themselves
        self._tail_after = None  # how many items there were when the last one was kept
        self.mirror = None       # mirror(name, text) of each text sorted in (a crash record)
        self._mirrored = []      # texts sorted in, not yet mirrored

    def fast_stdout(self):
        """A text stream whose writes go to ``PLAIN``, running Python code once per 8 KB:
        for the cell's own thread. After ``close`` it writes to ``sys.stdout``."""
        if self._fast is None:
            self._fast = io.TextIOWrapper(_Sink(self._put_fast), encoding="utf-8",
                                          errors="surrogatepass", newline="")
            _drainer.add(self)
        return self._fast

    def close(self):
        """The cell ended: what it writes from now on is not this execution's."""
        self.closed = True
        with self._lock:
            fast, self._fast = self._fast, None
        if fast is not None:  # the cell may keep its write method: send it on
            _drainer.discard(self)
            fast.reconfigure(write_through=True)  # flushes what it buffered into pending
            fast.buffer.write = _to_stdout

    def _put_fast(self, data):
        """``fast_stdout``'s sink: the cell's thread sorts in what waits once it is
        ``FAST_ITEMS`` writes, so a cell printing faster than the drainer drains (which
        may not get a turn for a while on a busy machine) waits for its output to be
        kept, as without a fast stdout. An interrupt landing as the thread enters here
        loses the 8 KB being written; one landing later, nothing (the next drain sorts
        in what was appended)."""
        pending = self.pending
        pending.append(data)
        if len(pending) >= FAST_ITEMS and not self._nested():
            with self._lock:
                self._drain()

    def _nested(self):
        """True in code that runs, in the thread sorting in, while it sorts in: a
        finalizer a collection ran there. It leaves its writes waiting, for the sort
        it interrupted or the next: sorting them now would sort the outer sort's
        writes twice, or change a stream midway."""
        return self._lock._is_owned()

    def write(self, name, text):
        """Add ``text`` to stream ``name``."""
        self._flush_fast()
        if self._nested():
            self.pending.append(text if name is PLAIN else (name, text))
            return
        with self._lock:
            self._drain()
            self._write(name, text)
            self._send_mirrored()

    def stop_mirror(self):
        """No text from now on goes to ``mirror``."""
        with self._lock:
            self.mirror = None
            self._mirrored.clear()

    def _send_mirrored(self):
        mirror, mirrored = self.mirror, self._mirrored
        while mirrored:
            mirror(*mirrored.pop(0))

    def put(self, name, text):
        """Add ``text`` to stream ``name`` without waiting for the lock (writers' path)."""
        self._flush_fast()  # what the cell's thread wrote before comes before
        pending = self.pending
        pending.append(text if name is PLAIN else (name, text))
        if len(pending) >= PENDING_ITEMS:
            self.drain()

    def drain(self):
        """Sort in what the writers left in ``pending``."""
        self._flush_fast()
        if self._nested():
            return
        with self._lock:
            self._drain()

    def _flush_fast(self):
        fast = self._fast
        if fast is not None:
            fast.flush()  # into pending; never under the lock, which a flush could need

    def _drain(self):
        """Sort the pending writes in, all or none: the cell's interrupt may land here."""
        pending = self.pending
        count = len(pending)
        if not count:
            return
        saved = self._saved()
        try:
            self._sort(pending[:count])
            del pending[:count]  # writers only append, so these are the items just sorted
        except KeyboardInterrupt:  # it comes once: the next drain sorts the batch whole
            self._restore(saved)
            self._mirrored.clear()
            raise
        self._send_mirrored()

    def _sort(self, chunks):
        for kind, items in itertools.groupby(chunks, type):
            if kind is tuple:
                for name, pairs in itertools.groupby(items, _NAME):
                    self._write(name, "".join(map(_TEXT, pairs)))
            elif kind is bytes:
                self._write(PLAIN, b"".join(items).decode("utf-8", "surrogatepass"))
            else:
                self._write(PLAIN, "".join(items))

    def _saved(self):
        last = self._outputs[-1] if self._outputs else {}
        return ({name: stream.copy() for name, stream in self._streams.items()},
                len(self._outputs), last.get("text"), self._tail_after)

    def _restore(self, saved):
        streams, count, text, self._tail_after = saved
        self._streams = {name: stream.restore() for name, stream in streams.items()}
        del self._outputs[count:]
        if text is not None:
            self._outputs[-1]["text"] = text

    def _write(self, name, text):
        if self.mirror is not None:
            self._mirrored.append((name, text))
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = Stream()
        stream.seen += len(text)
        if self.limit is None:
            self._append(name, text)
            return
        half = self.limit // 2
        head_room = 0 if stream.head_closed else half - stream.head
        if stream.full is not None:
            stream.full.write(text)
        elif len(text) > head_room:  # it outgrows the reply: keep it all for paging
            stream.full = FullText(self.full_limit)
            stream.full.write(self._kept_head(name) + text)
        if head_room > 0:
            cut = len(text) if len(text) < head_room else stream.head_cut(text[:head_room])
            stream.head_closed = len(text) >= head_room
            if cut:
                self._append(name, text[:cut])
                stream.head += cut
                stream.head_ends_line = text[cut - 1] == "\n"
            text = text[cut:]
        if text:
            self._tail_pieces += 1
            self._tail_after = len(self._outputs)  # a head item after it must not merge back
            stream.keep_tail(text, self.limit - half, len(self._outputs), self._tail_pieces)

    def add(self, item):
        """Add a rich output item (``display_data``, ``execute_result``) in order;
        past ``MAX_RICH_ITEMS`` of them, count the rest instead."""
        self._flush_fast()
        nested = self._nested()
        with self._lock:
            if not nested:
                self._drain()
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
        self._flush_fast()
        with self._lock:
            self._drain()
            return {name: {"characters": stream.seen, "kept_characters": stream.full.chars,
                           "capped": stream.full.capped}
                    for name, stream in self._streams.items() if stream.full is not None}

    def read(self, name, offset, limit):
        """``(text, total)``: up to ``limit`` characters of stream ``name`` from ``offset``,
        and how many characters of it can be read."""
        self._flush_fast()
        with self._lock:
            self._drain()
            stream = self._streams.get(name)
            if stream is None or stream.full is None:
                text = self._kept_head(name)
                return text[offset:offset + limit], len(text)
            return stream.full.read(offset, limit), stream.full.chars

    def discard(self):
        """Free the full texts kept for paging."""
        with self._lock:
            self.pending.clear()
            for stream in self._streams.values():
                if stream.full is not None:
                    stream.full.close()
                    stream.full = None

    def _append(self, name, text):
        last = self._outputs[-1] if self._outputs else None
        if (last is not None and last["output_type"] == "stream" and last["name"] == name
                and self._tail_after != len(self._outputs)):
            last["text"] += text
        else:
            self._outputs.append({"output_type": "stream", "name": name, "text": text})

    def outputs(self):
        """The items so far in the order they came, each stream's kept tail where its
        pieces were written (after its head, among the rich items that came between)."""
        self._flush_fast()
        with self._lock:
            self._drain()
            items = [(dict(item), True) for item in self._outputs]
            room = None if self.limit is None else self.limit - self.limit // 2
            pieces = sorted((position, order, name, text, index > 0)
                            for name, stream in self._streams.items() if stream.tail is not None
                            for index, (position, order, text) in
                            enumerate(stream.shown_tail(name, room)))
            for position, _, name, text, joins in reversed(pieces):  # from the end: indices hold
                items.insert(position, ({"output_type": "stream", "name": name, "text": text},
                                        joins))
            if self._rich_omitted:
                items.append(({"output_type": "stream", "name": "stderr", "text":
                               f"[... {self._rich_omitted} more display outputs omitted ...]\n"},
                              False))
            return _joined(items)


def _joined(items):
    """The items of ``[(item, joins)]``, a stream item that ``joins`` added to the one
    before it if that one is of the same stream: a tail's first piece, which starts
    with the marker of what was left out, does not join its head."""
    joined = []
    for item, joins in items:
        last = joined[-1] if joined else None
        if (joins and last is not None and item["output_type"] == "stream" == last["output_type"]
                and item["name"] == last["name"]):
            last["text"] += item["text"]
        else:
            joined.append(item)
    return joined


class _Sink:
    """The binary buffer under ``Capture.fast_stdout``: its ``write`` is the function
    it is given, which the text stream above calls once per 8 KB it buffered."""

    closed = False

    def __init__(self, write):
        self.write = write

    def flush(self):
        """Nothing to do: what was written is where it goes."""

    def close(self):
        """Nothing to free."""

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False


class _Drainer:
    """The thread that drains the captures whose fast stdout is open, every
    ``DRAIN_EVERY`` s: their cells' prints drain only past ``FAST_ITEMS`` writes. It
    runs while there are such captures, and holds them only weakly."""

    def __init__(self):
        self._captures = weakref.WeakSet()
        self._lock = threading.Lock()
        self._running = False
        # Not the bound methods of this lock: the child replaces it, and a process forked
        # twice (a supervised server's cell starting a multiprocessing child) must take
        # the lock of its own.
        os.register_at_fork(before=self._before_fork, after_in_parent=self._after_fork,
                            after_in_child=self._after_fork_in_child)

    def add(self, capture):
        with self._lock:
            self._captures.add(capture)
            if not self._running:
                self._running = True
                # Not threading.Thread: a thread a cell starts would hold its capture.
                _thread.start_new_thread(self._run, ())

    def discard(self, capture):
        with self._lock:
            self._captures.discard(capture)

    def _run(self):
        while True:
            time.sleep(DRAIN_EVERY)
            with self._lock:
                captures = list(self._captures)
                if not captures:
                    self._running = False
                    return
            for capture in captures:
                capture.drain()
            del captures, capture

    def _before_fork(self):
        self._lock.acquire()

    def _after_fork(self):
        self._lock.release()

    def _after_fork_in_child(self):
        """The thread is not in the child; a child of a printing cell may print on."""
        self._lock = threading.Lock()
        self._running = False
        if self._captures:
            self.add(next(iter(self._captures)))


_drainer = _Drainer()


def _to_stdout(data):
    """Where a capture's fast stdout writes once its cell ended: ``sys.stdout``, which
    is the capture of whatever runs in the calling thread now, or the server's."""
    sys.stdout.write(data.decode("utf-8", "surrogatepass"))
