"""Writing a blob's file (``cow.Blob``): at once, or behind, by a thread of its own while
the copy that stored it goes on (``write_behind``), which waits for it at its end
(``written``) before anything reads or keeps it; into a file allocated ahead
(``Reserve``) where there is one of its size."""

import os
import threading
import uuid


def unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:  # swept meanwhile (a reset sweeps the state directory)
        pass


def write_at(fd, chunk, offset):
    """Write all of ``chunk`` at ``offset`` (pwrite beats copying into a mapping of the
    file); returns the offset after it."""
    data = memoryview(chunk).cast("B")
    try:
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], offset + done)
    finally:
        data.release()
    return offset + done


class Writer(threading.Thread):
    """Writes a new blob's bytes (``write_behind``): ``pwrite`` lets the interpreter
    go, so the copy goes on, and another buffer's file is written beside it on the other
    core. (Two files written at once took 5.7 ms where one after the other took 8.1, for
    16 and 8 MB in ``/dev/shm``; the two halves of one file, 8 against 6: its writes
    take turns.)"""

    def __init__(self, fd, contents):
        super().__init__(name="snapshot-kernel-blob-writer", daemon=True)
        self.fd, self.contents, self.error, self.done = fd, contents, None, False

    def run(self):
        try:
            write_at(self.fd, self.contents, 0)
            self.done = True
        except BaseException as exc:  # (raised by ``written``, in the thread that waits)
            self.error = exc
        finally:
            self.contents = None


_behind = threading.local()  # per thread: [(Blob, Writer)] not yet ``written``


def write_behind(blob, contents):
    """Write ``contents`` into ``blob``'s file, ``blob.path`` plus ``.tmp``, its size set,
    on a thread of its own; ``written`` waits for it, in this thread, and names it."""
    writer = Writer(blob.fd, contents)
    pending = getattr(_behind, "pending", None)
    if pending is None:
        pending = _behind.pending = []
    pending.append((blob, writer))  # before it starts: ``written`` goes through all it lists
    try:
        writer.start()
    except RuntimeError:  # no thread to be had: written here and now
        writer.run()


def written(raising=True):
    """Wait for the blobs this thread writes behind (``write_behind``), and give
    each its name; then raise the first error a write met, if ``raising``. A blob
    whose write failed keeps no file."""
    pending = getattr(_behind, "pending", None)
    if not pending:
        return
    _behind.pending = []
    error = None
    for blob, writer in pending:
        if writer.ident is not None:  # (not if an interrupt came before it started)
            writer.join()
        if writer.done and error is None:
            os.replace(blob.path + ".tmp", blob.path)
        else:
            unlink(blob.path + ".tmp")
            error = error or writer.error or OSError(f"{blob.path} was not written")
    if error is not None and raising:
        raise error


class Reserve:
    """Files of a state directory allocated ahead (``posix_fallocate``) for new buffers of
    the sizes lately written, so that writing one is a copy into pages already there.

    A new file's pages are made as its bytes are written: in ``/dev/shm``, a 16 MB buffer
    took 6.0 ms to write into a new file, 2.4 into a file allocated ahead, whose allocation
    took 3.9 (56 MB: 23.6, 8.9 and 13.2). The allocating is done by a thread of its own
    once a copy ends (``refill``), beside the reply and the next cell. Each file ``take``
    asks for is allocated again, up to ``cap`` bytes in all (the oldest go first; a
    bigger buffer is written as before), and ``clear`` gives them back. That memory is
    the price: at most ``cap`` beside the states. They sit in a directory of their own
    (``Store.reserve_dir``), which a start sweeps: a crash may leave some behind."""

    CAP = 64 << 20  # bytes held ahead at most: what a 2M-row frame's filter writes

    def __init__(self, directory, cap=CAP):
        self.directory, self.cap = directory, cap
        self._lock = threading.Lock()
        self._files = []   # [(size, fd, path)], oldest first
        self._wanted = []  # sizes to allocate, newest last
        self._filling = None  # the thread allocating, while it does
        self._cleared = 0  # ``clear`` calls: a file allocated across one is not kept
        self._pid = os.getpid()  # a child a cell forks must not take the server's files

    @property
    def size(self):
        """Bytes held ahead now."""
        with self._lock:
            return sum(size for size, _, _ in self._files)

    def take(self, path, size):
        """An open (read-write) file named ``path`` now, of ``size`` bytes allocated ahead,
        or None if none is held of ``size`` to twice that. Either way, a file of ``size``
        is allocated again at the next ``refill``."""
        if os.getpid() != self._pid:
            return None
        with self._lock:
            if size <= self.cap and len(self._wanted) < 64:
                self._wanted.append(size)
            fits = [entry for entry in self._files if size <= entry[0] <= 2 * size]
            if not fits:
                return None
            entry = min(fits, key=lambda entry: entry[0])
            self._files.remove(entry)
        _, fd, reserved = entry
        taken = False
        try:
            os.rename(reserved, path)
            os.ftruncate(fd, size)  # (a smaller size gives the pages past it back)
            taken = True
        except OSError:  # swept (a reset sweeps the state directory), or on another
            return None  # file system (a mount in it): the caller makes a new file
        finally:
            if not taken:
                os.close(fd)
                unlink(reserved)
                unlink(path)
        return fd

    def refill(self):
        """Allocate the files ``take`` asked for, on a thread of its own."""
        if not self._wanted or os.getpid() != self._pid:
            return
        with self._lock:
            if self._filling is not None or not self._wanted:
                return
            thread = self._filling = threading.Thread(
                target=self._fill, name="snapshot-kernel-reserve", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: none is allocated ahead
            with self._lock:
                self._filling = None

    def _fill(self):
        try:
            while True:
                with self._lock:
                    if not self._wanted:
                        return
                    size, cleared = self._wanted.pop(0), self._cleared
                if not self._allocate(size, cleared):
                    with self._lock:
                        self._wanted.clear()
                    return
        finally:
            with self._lock:
                self._filling = None

    def _allocate(self, size, cleared):
        """Add a file of ``size`` bytes allocated ahead; False if it could not be made
        (the file system is full, or cannot allocate ahead)."""
        path = os.path.join(self.directory, f"reserve-{uuid.uuid4().hex}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        except OSError:
            return False
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            os.close(fd)
            unlink(path)
            return False
        with self._lock:
            self._files.append((size, fd, path))
            dropped = [] if cleared == self._cleared else [self._files.pop()]
            while sum(entry[0] for entry in self._files) > self.cap:
                dropped.append(self._files.pop(0))
        self._drop(dropped)
        return True

    def clear(self, wait=0.0):
        """Give back every file held ahead, having waited up to ``wait`` seconds for the
        thread allocating, if one is (what it allocates after is not kept)."""
        with self._lock:
            dropped, self._files, self._wanted = self._files, [], []
            self._cleared += 1
            thread = self._filling
        if os.getpid() != self._pid:
            return
        self._drop(dropped)
        if thread is not None and wait > 0:
            thread.join(wait)

    @staticmethod
    def _drop(entries):
        for _, fd, path in entries:
            os.close(fd)
            unlink(path)
