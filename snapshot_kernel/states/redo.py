"""The redo log of a private state directory: a saved state is one record, copied into a
mapped file.

The crash-safe default (``Store(private=True)``) must keep every acknowledged state
if the server process dies, not the machine. Pages of a shared file mapping belong
to the page cache, which outlives the process, so a save copies its catalogue rows
into a mapped log file as one framed record: no system call, and the GIL is not let
go, so no other thread runs in the middle of a save. The rows reach the SQLite
catalogue later, many saves in one transaction (``Store``), after which the file is
deleted. A server that starts on the directory after a crash applies the logs it
finds first. A record a crash cut short fails its checksum; it and what follows are
ignored: its save never returned, so nobody was told of its state.

    DIR/log-00000001   records: 8-byte length, 4-byte CRC-32, pickle of the rows;
                       then zeros (the file is allocated whole when it is made)
"""

import mmap
import os
import pickle
import struct
import zlib

CAPACITY = 1 << 20  # bytes of a log file; a bigger record gets a file of its own size
_HEADER = struct.Struct("<QI")
_PREFIX = "log-"


class RedoLog:
    """The log files not yet applied: full ones, and the one records are copied into."""

    def __init__(self, directory, applied=0, capacity=CAPACITY):
        """``applied``: the number of the last file applied, which may be deleted now;
        new files are numbered past it and every file in the directory."""
        self.directory, self.capacity = directory, capacity
        self._next = max(self.numbers() + [applied]) + 1
        self._full = []  # numbers of files no record fits in any more, oldest first
        self._number = self._map = None
        self._used = 0
        self.records = self.size = 0  # of the files not yet taken

    def numbers(self):
        """The numbers of the log files in the directory, oldest first."""
        return sorted(int(name[len(_PREFIX):]) for name in os.listdir(self.directory)
                      if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit())

    def path(self, number):
        return os.path.join(self.directory, f"{_PREFIX}{number:08d}")

    def append(self, rows):
        """Copy one record of ``rows`` into the log. OSError if no file can be made for
        it (the disk is full): then nothing is written."""
        data = pickle.dumps(rows, protocol=5)
        frame = _HEADER.pack(len(data), zlib.crc32(data)) + data
        if self._map is None or self._used + len(frame) > len(self._map):
            self._start(len(frame))
        self._map[self._used:self._used + len(frame)] = frame
        self._used += len(frame)
        self.records += 1
        self.size += len(frame)

    def _start(self, needed):
        """Begin the next file, its blocks allocated now: a page written through the
        mapping then never needs a block the disk has not got (that would be a SIGBUS)."""
        number, path = self._next, self.path(self._next)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            size = max(self.capacity, needed)
            os.posix_fallocate(fd, 0, size)
            mapped = mmap.mmap(fd, size)
        except OSError:
            os.unlink(path)
            raise
        finally:
            os.close(fd)  # the mapping keeps the file
        self._close()
        self._next += 1
        self._number, self._map, self._used = number, mapped, 0

    def _close(self):
        if self._map is not None:
            self._map.close()
            self._full.append(self._number)
            self._number = self._map = None

    def take(self):
        """The numbers of every file written and not yet taken, oldest first; records
        copied from now on go to a new file."""
        self._close()
        numbers, self._full = self._full, []
        self.records = self.size = 0
        return numbers

    def close(self):
        self._close()


def read(path):
    """The rows of each whole record of the log file at ``path``, in order."""
    with open(path, "rb") as file:
        data = file.read()
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        record = data[start:start + length]
        if length == 0 or len(record) != length or zlib.crc32(record) != checksum:
            return  # the zeros after the last record, or one a crash cut short
        yield pickle.loads(record)
        offset = start + length
