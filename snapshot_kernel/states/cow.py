"""Large buffers copy-on-write: a state's buffer is mapped into an execution, not copied.

A stored large array sits on a ``Mapping`` that nothing ever writes again.
Once an execution copies it in, that mapping is a private (``MAP_PRIVATE``)
mapping of a ``Blob``, a sealed memfd, and so is every running copy of it:
reading shares the page cache, and the first write to a page gives that
mapping its own copy of the page, as after a fork. A stored mapping may differ
from its blob in a few pages, its ``overlay``: the pages a cell changed.

* Out, for a new buffer: an anonymous mapping holding a copy. It becomes a blob the first time an
  execution copies it in (``freeze``: written to a memfd, then mapped over
  itself, so the anonymous pages go), so a cell that makes data pays for a
  memory copy, not for a memfd's page allocation. With a state directory,
  which saves every buffer to a file before its state is published, a new
  contiguous buffer is written to its file at once: one copy, not two. One of
  ``BEHIND`` bytes or more is written by a thread of its own while the copy goes
  on, and the copy waits for it at its end (``blobfiles``).
* In: a private mapping of the blob with the overlay pages copied in: a
  fraction of a millisecond, whatever the size. Running code sees it through a
  window, and an unwritten mapping outlives its last window as a spare for the
  next execution, page table filled (``Buffers.map_in``).
* Out, for a buffer copied in: the pages of the running mapping that are
  private now (read from ``/proc/self/pagemap``) are the overlay plus what the
  cell wrote. None written: the state keeps the stored mapping. Some: the new
  state gets a mapping of the same blob with those pages; past a quarter of
  the buffer, a new buffer.

``Buffers.probe`` checks that memfd, seals, private and fixed mappings, and
pagemap work here; where they don't, the kernel copies arrays as before, with
the same semantics. Knows nothing of numpy: ``libraries.numpy`` builds arrays.
"""

import ctypes
import fcntl
import mmap
import os
import threading
import uuid
import weakref

from . import blobfiles

PAGE = mmap.PAGESIZE
THRESHOLD = 1 << 20      # bytes: buffers at least this large are kept copy-on-write
BEHIND = 4 << 20         # bytes: a new buffer at least this large is written to its file
                         # by a thread of its own while the copy goes on (``Buffers.new``)
FLATTEN = 0.25           # a stored mapping differing from its blob in more than this share
                         # of its pages becomes a new buffer
_SEALS = getattr(fcntl, "F_SEAL_WRITE", 0) | getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(
    fcntl, "F_SEAL_GROW", 0)
_PRESENT, _SWAPPED, _FILE = 1 << 63, 1 << 62, 1 << 61  # bits of a pagemap entry
_MAP_FIXED = 0x10  # Linux; the mmap module does not export it
_FEW_PAGES = 64    # pagemap entries read without numpy, which a server needs only if cells do
# Spares change in weakref finalizers, which the garbage collector may run in any thread,
# even one holding the lock: so it is reentrant. Freezing has a lock of its own.
_spares_lock = threading.RLock()
_freeze_lock = threading.Lock()


class Blob:
    """Immutable bytes that stay open while a mapping of them lives: a sealed memfd, or a
    read-only file in a state directory (``path``), written once under a temporary name."""

    def __init__(self, fd, size, path=None):
        self.fd, self.size, self.path = fd, size, path
        self._unnamed = []  # its file, until a catalogue names it (``keep``)
        weakref.finalize(self, _forget, fd, self._unnamed, os.getpid())

    @classmethod
    def write(cls, contents, directory=None, reserve=None):
        """A new blob holding the bytes of the contiguous buffer ``contents``: a memfd,
        or a file in ``directory`` if one is given (one of ``reserve``'s if it has one)."""
        data = memoryview(contents).cast("B")
        try:
            return cls.fill(len(data), (data,), directory, reserve)
        finally:
            data.release()

    @classmethod
    def unnamed(cls, contents, directory, reserve=None):
        """``write`` to a file in ``directory`` that is deleted with the blob unless a state
        directory's catalogue comes to name it first (``keep``): a state can fail to be
        stored after its buffers were written."""
        blob = cls.write(contents, directory, reserve)
        blob._unnamed.append(blob.path)
        return blob

    def keep(self):
        """Its file outlives it: a catalogue names it now."""
        self._unnamed.clear()

    @classmethod
    def unnamed_behind(cls, contents, directory, reserve=None):
        """``unnamed``, its bytes written by a thread of its own while this one goes on
        (``blobfiles.write_behind``). They may not be read, and the blob may not be kept,
        before ``blobfiles.written()`` returns in this thread: until then its file has its
        size but not its bytes, or its name."""
        with memoryview(contents) as view:
            size = view.nbytes
        path = os.path.join(directory, f"{uuid.uuid4().hex}.bin")
        fd = _new_file(path + ".tmp", size, reserve)
        blob = None
        try:
            blob = cls(fd, size, path)
        finally:
            if blob is None:  # failed, or interrupted: the fd would leak, the .tmp stay
                os.close(fd)
                blobfiles.unlink(path + ".tmp")
        # Both names go with the blob unless a catalogue keeps it: ``written`` gives it its
        # name, but an interrupt landing there may leave it under the temporary one.
        blob._unnamed.extend((path, path + ".tmp"))
        blobfiles.write_behind(blob, contents)
        return blob

    @classmethod
    def fill(cls, size, chunks, directory=None, reserve=None):
        """A new blob of ``size`` bytes written from ``chunks``, bytes-like objects that
        together hold exactly that many (a memfd, or a file in ``directory``: one of
        ``reserve``'s if it has one)."""
        path = None
        if directory is None:
            fd = os.memfd_create("snapshot-kernel", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        else:
            path = os.path.join(directory, f"{uuid.uuid4().hex}.bin")
            fd = _new_file(path + ".tmp", size, reserve)
        written = False
        try:
            if directory is None:
                os.ftruncate(fd, size)
            done = 0
            for chunk in chunks:
                done = blobfiles.write_at(fd, chunk, done)
            if done != size:
                raise ValueError(f"a blob of {size} bytes was given {done}")
            if path is None:
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            else:  # complete before it has its name: a crash leaves only a .tmp to sweep
                os.replace(path + ".tmp", path)
            written = True
        finally:
            if not written:  # failed, or interrupted: the fd would leak, the .tmp stay
                os.close(fd)
                if path is not None:
                    blobfiles.unlink(path + ".tmp")
        return cls(fd, size, path)

    @classmethod
    def open(cls, path):
        """The blob a state directory holds in ``path``."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return cls(fd, os.fstat(fd).st_size, path)

    def map(self, overlay=(), copy_from=None, stored=False):
        """A private mapping of the blob, with ``overlay`` pages copied from ``copy_from``.
        A running mapping keeps that as its ``source``, the stored mapping it came from."""
        mapping = Mapping(self.fd, self.size, mmap.MAP_PRIVATE,
                          mmap.PROT_READ | mmap.PROT_WRITE)  # private: writes stay ours
        mapping.blob, mapping.stored = self, stored
        mapping.source = None if stored else copy_from
        mapping.overlay = frozenset(overlay)
        for page in sorted(mapping.overlay):
            start, end = page * PAGE, min((page + 1) * PAGE, self.size)
            mapping[start:end] = copy_from[start:end]
        return mapping


class Mapping(mmap.mmap):
    """A private mapping. A ``stored`` one belongs to a state and is never written again
    (its ``blob`` is None until it is frozen); a running one knows the stored mapping it
    was made from (``source``)."""

    blob = source = spare = None
    stored = False
    overlay = frozenset()

    @property
    def address(self):
        """Where the mapping starts in this process's memory."""
        address = getattr(self, "_address", None)
        if address is None:
            view = ctypes.c_char.from_buffer(self)
            address = self._address = ctypes.addressof(view)
            del view  # releases the export, so the mapping can be closed later
        return address

    def private_pages(self):
        """Indices of the pages this mapping holds a private copy of (written since mapped)."""
        pages = -(-len(self) // PAGE)
        entries = _pagemap.read(self.address // PAGE, pages)
        if pages <= _FEW_PAGES:  # without numpy: the probe at start must not import it
            return frozenset(page for page, entry in enumerate(memoryview(entries).cast("Q"))
                             if entry & _PRESENT and not entry & _FILE or entry & _SWAPPED)
        import numpy as np
        entries = np.frombuffer(entries, dtype=np.uint64)
        private = ((entries & _PRESENT) != 0) & ((entries & _FILE) == 0)
        private |= (entries & _SWAPPED) != 0
        return frozenset(np.nonzero(private)[0].tolist())

    def same_pages(self, other, pages):
        """True if this mapping and ``other`` hold the same bytes in ``pages``."""
        return all(self[page * PAGE:(page + 1) * PAGE] == other[page * PAGE:(page + 1) * PAGE]
                   for page in pages)

    def unchanged(self):
        """True if this running mapping holds exactly what its stored source holds."""
        source = self.source
        return (source is not None and self.private_pages() <= source.overlay
                and self.same_pages(source, source.overlay))

    def take_spare(self):
        """A running mapping of this stored one that no one uses, or None."""
        with _spares_lock:
            spare, self.spare = self.spare, None
        return spare


def _new_file(path, size, reserve):
    """A new file ``path`` of ``size`` bytes, open to read and write: ``reserve``'s if it
    holds one (``blobfiles.Reserve``), else made now."""
    fd = reserve.take(path, size) if reserve is not None else None
    if fd is not None:
        return fd
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
    made = False
    try:
        os.ftruncate(fd, size)
        made = True
    finally:
        if not made:  # failed, or interrupted: the fd would leak, the file stay
            os.close(fd)
            blobfiles.unlink(path)
    return fd


def _forget(fd, unnamed, pid):
    os.close(fd)
    if os.getpid() == pid:  # not in a child a cell forked, ending while the server saves
        for path in unnamed:
            blobfiles.unlink(path)


def anonymous(size, fill):
    """A stored mapping of ``size`` bytes of anonymous memory that ``fill(mapping)`` writes."""
    # MAP_POPULATE: the pages are made in one go, faster than a fault for each
    mapping = Mapping(-1, size, mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0))
    fill(mapping)
    mapping.stored = True
    return mapping


def freeze(stored, directory=None):
    """Give an anonymous stored mapping a blob: its bytes go to a memfd (or a file in
    ``directory``) that is then mapped over it in place. The contents do not change,
    so readers never notice."""
    with _freeze_lock:
        if stored.blob is not None:
            return
        blob = Blob.write(stored) if directory is None else Blob.unnamed(stored, directory)
        address = _libc.mmap(stored.address, blob.size, mmap.PROT_READ | mmap.PROT_WRITE,
                             mmap.MAP_PRIVATE | _MAP_FIXED, blob.fd, 0)
        if address != stored.address:
            raise OSError(ctypes.get_errno(), "mmap over a stored buffer failed")
        stored.blob = blob


def mapping_of(base):
    """The Mapping an array's ``base`` is (stored) or is a window on (running), or None."""
    if isinstance(base, Mapping):
        return base
    return getattr(base, "mapping", None) if isinstance(base, ctypes.Array) else None


def _release(running):
    """The last window on ``running`` is gone: keep it as a spare if it is unchanged."""
    source = running.source
    if source is None or source.spare is not None or not running.unchanged():
        return
    with _spares_lock:
        if source.spare is None:
            source.spare = running


class _Pagemap:
    """``/proc/self/pagemap``: one 64-bit entry per virtual page of this process."""

    def __init__(self):
        self._fd = None
        self._lock = threading.RLock()  # read in finalizers too (see _spares_lock)

    def read(self, first_page, count):
        with self._lock:
            if self._fd is None:
                self._fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(self._fd, count * 8, first_page * 8)


def _load_libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.mmap.restype = ctypes.c_void_p
    return libc


_pagemap = _Pagemap()
_libc = _load_libc()


class Buffers:
    """Stores buffers of ``threshold`` bytes or more copy-on-write. ``probe()`` says
    whether this machine can."""

    def __init__(self, threshold=THRESHOLD, directory=None, reserve_dir=None):
        self.threshold = threshold
        self.directory = directory  # where blobs go: a state directory, or memfds if None
        # files allocated ahead in ``reserve_dir`` (on the file system of ``directory``)
        # for new buffers (``new``), allocated again as copies end
        self.reserve = (None if directory is None or reserve_dir is None
                        else blobfiles.Reserve(reserve_dir))

    def freeze(self, stored):
        """See ``freeze``; blobs go where this Buffers keeps them."""
        freeze(stored, self.directory)

    @staticmethod
    def probe(threshold=THRESHOLD, directory=None, reserve_dir=None):
        """A Buffers if every mechanism above works here, else None."""
        try:
            stored = anonymous(2 * PAGE, lambda mapping: mapping.write(b"x" * (2 * PAGE)))
            freeze(stored)
            running = stored.blob.map(copy_from=stored)
            running[PAGE:PAGE + 1] = b"y"
            works = (running.private_pages() == {1} and running[0:1] == b"x"
                     and stored[PAGE:PAGE + 1] == b"x")
            running.close()
            stored.close()
        except (OSError, AttributeError, ValueError, ImportError):
            return None
        return Buffers(threshold, directory, reserve_dir) if works else None

    def map_in(self, stored):
        """A window on a running mapping with the contents of the ``stored`` one.

        Arrays of running code sit on a window (a ctypes array over the mapping),
        never on the mapping itself: when the last of them is gone, the window goes,
        and a mapping that was never written is kept as the stored one's spare. The
        next execution gets it with its page table filled: reading it again costs no
        page faults, as in a fork. (A fresh mapping faults once per 4 KiB page read.)
        """
        if stored.blob is None:
            self.freeze(stored)
        running = stored.take_spare() or stored.blob.map(stored.overlay, stored)
        window = (ctypes.c_char * len(running)).from_buffer(running)
        window.mapping = running
        weakref.finalize(window, _release, running).atexit = False
        return window

    def store(self, running):
        """The stored mapping with ``running``'s contents: its source if the cell wrote
        nothing, the same blob with the pages it holds privately, or a new buffer."""
        source = running.source
        if running.unchanged():
            return source
        private = running.private_pages()
        if len(private) > FLATTEN * (len(running) / PAGE):
            return self.new(lambda mapping: mapping.write(running), len(running), running)
        return source.blob.map(private, running, stored=True)

    def new(self, fill, size, contents=None):
        """A stored mapping of a new buffer of ``size`` bytes that ``fill(mapping)`` writes;
        with a state directory, a blob file written from ``contents`` if given (a contiguous
        buffer of the same bytes)."""
        if self.directory is not None and contents is not None:
            # A state directory saves each new buffer to a file before its state is
            # published: written there now, it is copied once, not into memory and again.
            # A large one is written behind: the caller calls ``written`` before anything
            # reads it (``copying.names``: at the end of each copy).
            if size >= BEHIND:
                blob = Blob.unnamed_behind(contents, self.directory, self.reserve)
            else:
                blob = Blob.unnamed(contents, self.directory, self.reserve)
            return blob.map(stored=True)
        return anonymous(size, fill)

    def written(self, raising=True):
        """See ``blobfiles.written``; then the files new buffers took are allocated again,
        ahead of the next (``blobfiles.Reserve``)."""
        try:
            blobfiles.written(raising)
        finally:
            if self.reserve is not None:
                self.reserve.refill()

    def let_go(self, wait=0.0):
        """Give back the files allocated ahead (a reset; a shutdown, which ``wait``s up to
        so many seconds for the thread allocating them to end)."""
        if self.reserve is not None:
            self.reserve.clear(wait)
