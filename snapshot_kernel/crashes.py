"""What a crashed server process leaves to the next one: how it died, and what it ran.

The supervisor (``supervisor.py``) forks each server process. When one dies
unasked, it reads the wait status and compares the counts of the kernel's OOM
kills from before and after (``deaths.py``), and hands a ``Crash`` to the next
server process, which reports the executions that were running as ``crashed``.
The next process is forked from the supervisor, so the ``Crash`` reaches it as an
argument, in the memory it starts with.

Which executions were running: a ``Journal``, a table in memory shared by the
supervisor and its server processes, which outlives the process that writes it:
with a state directory, a mapped file there (page cache, as the redo log), which
outlives the supervisor too; without one, an anonymous ``MAP_SHARED`` mapping
made before the first fork. Noting an execution there costs two writes to memory,
no system call; a transaction in the state directory would cost ~50 us. An
execution that stores a checkpoint is also noted in the state directory's
``running`` table (``states.store``), with its checkpoints, and one saving its
state says which (``Journal.saving``), so the next process reports it only if
that state is not stored (``Crash.cut_short``). A server that stops as asked
leaves its journal as it is, marked (``Journal.stopping``), and so does one
killed with its supervisor: the next server on the directory reports what it
ran (``Journal.left_over``, a ``Stop``).

What a running execution printed is kept there too, as it is sorted into its
capture: the latest ``_RING`` bytes of its stdout and stderr (``OutputTail``),
so a crash record shows the output up to the crash. And a forced stop
(``POST /interrupt`` with ``force``) names its execution in the journal before
its server process exits with ``FORCED_EXIT``: the next one reports that
execution stopped, the others crashed because of it (``Crash.stopped``).
"""

import mmap
import os
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

_READY = 0         # header byte: 1 once the server process serves
_STOPPED = 1       # header byte: 1 once it stops as asked (SIGINT, SIGTERM)
_USED = 4          # header, 4 bytes: slots written so far (the rest were never touched)
_STOPPED_AT = 8    # header, 8 bytes: when it stopped as asked (time.time())
_FORCED = 16       # header: a 4-byte length, then the exec_id a forced stop is ending
_HEADER = 4096     # bytes before the first slot
_RECORD = 2048     # bytes of a slot's record: a 4-byte length, then the record (UTF-8)
_RING = 14336      # bytes of a slot's output: an 8-byte count written, then the ring
_SLOT = _RECORD + _RING
DEFAULT_SLOTS = 4096  # executions noted at once; more still run, unnoted (64 MB reserved,
                      # touched only as far as executions run at once)
_SEPARATOR = "\x1f"   # no name holds it: names are printable (errors.check_name)
# Each piece of output in a ring starts with the byte of its stream: bytes that UTF-8
# never holds, so a reader finds where pieces begin wherever the ring wrapped.
_STREAM_BYTES = {"stdout": b"\xfe", "stderr": b"\xff"}
_MAX_PIECE = 4096  # bytes of a piece a ring keeps (its end); a reader leaves this much out
FORCED_EXIT = 75   # the exit status of a server process ended by a forced stop


@dataclass(frozen=True)
class Crash:
    """How the last server process died (``deaths.cause_of``), when, the executions the journal
    says it was running (summaries, as ``states.store`` keeps them, with their
    ``output``), and the one a forced stop ended it for, if one did (``stopped``)."""

    cause: dict
    died_at: float  # time.time()
    running: tuple = field(default_factory=tuple)
    stopped: Optional[str] = None

    def cut_short(self, states, noted):
        """The summaries of the executions the crash ended: those of ``running`` that
        neither saved their new state (it is among ``states``) nor are in ``noted`` (the
        summaries a state directory kept, which list checkpoints: they come first)."""
        return _cut_short(self.running, states, noted)


@dataclass(frozen=True)
class Stop:
    """How the last server on a state directory ended while it ran executions, as its
    journal says: ``shutdown`` (it stopped as asked, at ``died_at``) or ``restart`` (it
    was killed with its supervisor, or the machine stopped: ``died_at`` is when the
    journal was read, the latest it can have been); the executions it was running."""

    reason: str
    died_at: float
    running: tuple = field(default_factory=tuple)
    stopped = None  # (no forced stop ended it)

    def cut_short(self, states, noted):
        """As ``Crash.cut_short``."""
        return _cut_short(self.running, states, noted)


def _cut_short(running, states, noted):
    known = {summary["exec_id"] for summary in noted}
    printed = {summary["exec_id"]: summary.get("output", []) for summary in running}
    return [*({**summary, "output": printed.get(summary["exec_id"], [])} for summary in noted),
            *(summary for summary in running
              if summary["exec_id"] not in known and summary.get("saving") not in states)]


class Journal:
    """The executions a server process runs, in memory that outlives the process.

    The server process calls ``ready``, ``running``, ``saving``, ``ended``, ``forced``
    and ``stopping`` (from any thread); the supervisor calls ``take`` once that process
    has died unasked, and before it forks the next. A record is written before its
    length, so a process killed between the two leaves a slot that reads as empty.
    """

    def __init__(self, slots=DEFAULT_SLOTS, path=None):
        """In memory shared with the processes forked after this (lost with them all),
        or in the file ``path``, kept as it is if it has this size (a journal that the
        last server left), which outlives every process (not the machine)."""
        size = _HEADER + slots * _SLOT
        if path is None:
            self._map = mmap.mmap(-1, size)  # MAP_SHARED|MAP_ANONYMOUS
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                if os.fstat(fd).st_size != size:  # new, or not one of these: start empty
                    os.ftruncate(fd, 0)
                    os.ftruncate(fd, size)
                self._map = mmap.mmap(fd, size)
            finally:
                os.close(fd)  # the mapping keeps the file
        self._slots = slots
        self._lock = threading.Lock()
        self._free = []   # slots written before and free again: reused first
        self._held = {}   # exec_id -> slot

    def ready(self):
        """The server process serves: a death from now on is no start-up failure."""
        self._map[_READY] = 1

    def running(self, run):
        """Note execution ``run`` (an ``execution.Execution``) as running; an
        ``OutputTail`` for what it prints, or None if it could not be noted."""
        record = _SEPARATOR.join((run.exec_id, run.state_name, run.new_state_name or "",
                                  repr(run.started_at), repr(run.timeout))).encode("utf-8")
        if len(record) > _RECORD - 4:
            return None  # cannot happen with names of 128 characters; the report omits it
        with self._lock:
            slot = self._free.pop() if self._free else self._new_slot()
            if slot is None:
                return None
            self._held[run.exec_id] = slot
        offset = _HEADER + slot * _SLOT
        struct.pack_into("<Q", self._map, offset + _RECORD, 0)  # a reused slot's output goes
        self._map[offset + 4:offset + 4 + len(record)] = record
        struct.pack_into("<I", self._map, offset, len(record))
        return OutputTail(self._map, offset + _RECORD)

    def forced(self, exec_id):
        """A forced stop is ending the server process for execution ``exec_id``."""
        name = exec_id.encode("utf-8")[:_HEADER - _FORCED - 4]
        self._map[_FORCED + 4:_FORCED + 4 + len(name)] = name
        struct.pack_into("<I", self._map, _FORCED, len(name))

    def stopped(self):
        """The exec_id a forced stop ended the last server process for, or None; read it
        before ``take``, which forgets it."""
        length = struct.unpack_from("<I", self._map, _FORCED)[0]
        if not 0 < length <= _HEADER - _FORCED - 4:
            return None
        return self._map[_FORCED + 4:_FORCED + 4 + length].decode("utf-8", "replace")

    def saving(self, exec_id, state_name):
        """Execution ``exec_id`` is saving its new state ``state_name`` to a state directory:
        should the process die before ``ended``, the next one finds whether it was saved
        (``Crash.cut_short``). The record only grows, so a reader sees the old or the new."""
        with self._lock:
            slot = self._held.get(exec_id)
        if slot is None:
            return
        offset = _HEADER + slot * _SLOT
        length = struct.unpack_from("<I", self._map, offset)[0]
        added = (_SEPARATOR + state_name).encode("utf-8")
        if length + len(added) > _RECORD - 4:
            return
        self._map[offset + 4 + length:offset + 4 + length + len(added)] = added
        struct.pack_into("<I", self._map, offset, length + len(added))

    def ended(self, exec_id):
        """Execution ``exec_id`` is no longer running; once ``stopping``, it stays noted."""
        if self._map[_STOPPED]:
            return
        with self._lock:
            slot = self._held.pop(exec_id, None)
            if slot is None:
                return
            struct.pack_into("<I", self._map, _HEADER + slot * _SLOT, 0)
            self._free.append(slot)

    def _new_slot(self):
        used = struct.unpack_from("<I", self._map, _USED)[0]
        if used == self._slots:
            return None
        struct.pack_into("<I", self._map, _USED, used + 1)
        return used

    def stopping(self):
        """The server process stops as asked: what it runs now ends by that, and stays
        noted, for the next server on the state directory to report (``left_over``)."""
        struct.pack_into("<d", self._map, _STOPPED_AT, time.time())
        self._map[_STOPPED] = 1

    def left_over(self):
        """A ``Stop`` of the executions the last server noted here and did not end, or
        None: for a new server on a state directory, whose kernel then ``forget``s them."""
        stopped = self._map[_STOPPED] == 1
        died_at = struct.unpack_from("<d", self._map, _STOPPED_AT)[0] if stopped else time.time()
        running = self._noted()
        if not running:
            return None
        return Stop("shutdown" if stopped else "restart", died_at, running)

    def forget(self):
        """Empty the journal: the new server process has been told what it held."""
        self.take()

    def take(self):
        """``(ready, summaries of the executions noted)`` that the last server process
        left; the journal is empty afterwards, for the next one."""
        ready, summaries = self._map[_READY] == 1, self._noted()
        used = min(struct.unpack_from("<I", self._map, _USED)[0], self._slots)
        end = _HEADER + used * _SLOT
        self._map[:end] = bytes(end)
        return ready, summaries

    def _noted(self):
        """The summaries of the executions noted, as ``states.store`` keeps them, each
        with the ``output`` it printed last."""
        used = min(struct.unpack_from("<I", self._map, _USED)[0], self._slots)
        summaries = []
        for slot in range(used):
            offset = _HEADER + slot * _SLOT
            length = struct.unpack_from("<I", self._map, offset)[0]
            if 0 < length <= _RECORD - 4:
                summary = _summary(self._map[offset + 4:offset + 4 + length])
                if summary is not None:
                    summary["output"] = OutputTail(self._map, offset + _RECORD).outputs()
                    summaries.append(summary)
        return tuple(summaries)


class OutputTail:
    """The latest bytes an execution wrote to stdout and stderr, in its journal slot:
    a ring of pieces, each its stream's byte and its UTF-8 text, and the count of bytes
    written, set after each piece (a process killed during a write leaves the count of
    the piece before, and the reader leaves out the ring's oldest ``_MAX_PIECE`` bytes,
    which a write cut short may have overwritten). Written under the capture's lock."""

    __slots__ = ("_map", "_offset")

    def __init__(self, mapped, offset):
        self._map, self._offset = mapped, offset

    def write(self, name, text):
        """Keep ``text`` of stream ``name`` (its last ``_MAX_PIECE`` bytes)."""
        data = text[-_MAX_PIECE:].encode("utf-8", "surrogatepass")[-(_MAX_PIECE - 1):]
        piece = _STREAM_BYTES.get(name, _STREAM_BYTES["stderr"]) + data
        ring = self._offset + 8
        size = _RING - 8
        written = struct.unpack_from("<Q", self._map, self._offset)[0]
        start = written % size
        first = min(len(piece), size - start)
        self._map[ring + start:ring + start + first] = piece[:first]
        self._map[ring:ring + len(piece) - first] = piece[first:]
        struct.pack_into("<Q", self._map, self._offset, written + len(piece))

    def outputs(self):
        """The stream items of what is kept, in order, the first after a marker of how
        many bytes went before it."""
        size = _RING - 8
        written = struct.unpack_from("<Q", self._map, self._offset)[0]
        kept = min(written, size - _MAX_PIECE)
        start = (written - kept) % size
        ring = self._map[self._offset + 8:self._offset + 8 + size]
        data = (ring[start:] + ring[:start])[:kept] if kept else b""
        first = _PIECE.search(data)  # the ring's oldest piece may have lost its start
        begin = first.start() if first else len(data)
        items = _items(data[begin:])
        dropped = written - kept + begin
        if dropped and items:
            items[0]["text"] = (f"[... {dropped} bytes of earlier output not kept ...]\n"
                                + items[0]["text"])
        return items


def _items(data):
    """Stream items of ring ``data``, which starts at a piece; adjacent pieces joined."""
    items = []
    for match in _PIECE.finditer(data):
        name, text = _STREAM_OF[match.group(1)], match.group(2).decode("utf-8", "replace")
        if items and items[-1]["name"] == name:
            items[-1]["text"] += text
        elif text:
            items.append({"output_type": "stream", "name": name, "text": text})
    return items


_STREAM_OF = {byte: name for name, byte in _STREAM_BYTES.items()}
_PIECE = re.compile(rb"([\xfe\xff])([^\xfe\xff]*)")


def _summary(record):
    """The summary of a journal record, as ``states.store`` keeps one; None if torn."""
    try:
        exec_id, state_name, new_state_name, started_at, timeout, *saving = \
            record.decode("utf-8").split(_SEPARATOR)
        started = datetime.fromtimestamp(float(started_at), timezone.utc).isoformat()
        timeout = None if timeout == "None" else float(timeout)
    except ValueError:  # a record cut short (UnicodeDecodeError is one): nothing to report
        return None
    return {"exec_id": exec_id, "state_name": state_name,
            "new_state_name": new_state_name or None, "started": started, "timeout": timeout,
            "progress": None, "checkpoints": [], "saving": saving[0] if saving else None}
