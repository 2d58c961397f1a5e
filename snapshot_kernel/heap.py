"""Giving the memory of deleted states back to the system (glibc's malloc only).

Freeing objects returns their memory to the C allocator, not to the system.
glibc's malloc keeps what was freed for reuse, and gives back only what lies at
the top of a heap, past a threshold that rises to 64 MB as a program frees
large blocks. Each thread that allocates gets an arena of its own (up to eight
per CPU), and the tops of those arenas are never trimmed on request: a server's
worker threads kept 5 MB each, and a deleted state's frames and source texts
stayed in the process though nothing used them. So:

* ``install`` makes every thread allocate from one arena (``M_ARENA_MAX`` 1),
  as ``MALLOC_ARENA_MAX=1`` would. Python allocates under the GIL, so threads
  hardly contend for it.
* ``give_back`` calls ``malloc_trim(0)``, which returns the arena's free pages.

Objects in reference cycles (a figure's artists, a fitted model's parts) are freed only by
the cyclic collector, whose next full collection comes when the process has made enough
new objects: inside some later cell, which then paid for the deleted states (3 s for a
cell after ``plot_hdbscan``'s states went, in ``benchmarks/gallery.py``). So a
``Sweeper`` collects once no cell runs.

A full collection goes through every object the process tracks: every stored state's,
though no cell can change them (0.7-1.1 s in cells of ``plot_hdbscan`` that ran 0.25-2 s in
one process). In a process of its own (``freeze``), once a cell ended and the process is
idle, the sweeper collects what is new since the last such moment and freezes the rest
(``gc.freeze``): a collection inside a later cell then goes through what that cell made.
It does so only once cells made ``SETTLE_BLOCKS`` memory blocks since: the collection is
not free, and a cell that comes while it runs waits for it.
What froze and dies later (a deleted state) needs a full sweep: after each delete, as
without freezing, and once the frozen objects doubled since the last one (other objects
that froze and died: a library's caches), so that costs O(1) per object frozen.
"""

import ctypes
import ctypes.util
import gc
import platform
import sys
import threading
import time

M_ARENA_MAX = -8  # mallopt's parameter, from glibc's malloc.h


def _glibc(name, argtypes):
    """The glibc function ``name`` with its types set; None where the C library is not
    glibc, or has no such function."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # no such library, or no such function in it
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


_mallopt = _glibc("mallopt", (ctypes.c_int, ctypes.c_int))
_malloc_trim = _glibc("malloc_trim", (ctypes.c_size_t,))


def install():
    """Make threads started from now on allocate from the arena in use; idempotent.
    True if glibc took the setting. Arenas made before stay as they are."""
    return bool(_mallopt(M_ARENA_MAX, 1)) if _mallopt is not None else False


def give_back():
    """Return the C allocator's free memory to the system, where glibc allows; True if
    any was. It cannot return memory that live objects hold, nor pages that a live
    object shares with free ones (fragmentation): it takes what is free. It costs a
    few milliseconds per GB of heap, and takes no lock of ours."""
    return bool(_malloc_trim(0)) if _malloc_trim is not None else False


class Sweeper:
    """Collects the garbage deleted states leave, on a thread of its own, once ``idle()``
    (no cell runs) has held for ``QUIET`` seconds since a cell last ended (``cell_ended``)
    and ``settled()`` (the threads of cells that ended have let go of what they held: a
    reply goes before its thread's frames unwind); deletes that come meanwhile are swept
    together. A cell that starts during a
    collection waits for it, as it would for the one it would otherwise have run itself.
    With ``freeze``, it also settles what each cell left (see the module's docstring)."""

    # A client sending its next cell as soon as it has a reply leaves gaps of milliseconds;
    # a settling begun in one landed in the next cell (0.1-0.2 s, in cells of 12 ms run back
    # to back). A pause this long is a person's, or an agent's, reading the reply.
    QUIET = 0.25
    POLL = 0.05  # seconds between looks at whether it is quiet
    SETTLE = 1.0  # seconds idle past which a thread not settled (a cell that ignored its
                  # interrupt and runs on) is no longer waited for
    FLOOR = 100_000  # objects frozen since the last full sweep that never ask for another
    # Memory blocks made since the last settling below which a cell's end settles nothing:
    # a small cell's few objects are the young collections' (in the gallery, settlings
    # after cells of under a millisecond landed in the next cell: 20-30 ms).
    SETTLE_BLOCKS = 100_000

    def __init__(self, idle, settled=lambda: True, freeze=False):
        self._idle, self._settled = idle, settled
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        self._closed = False
        self._freeze = freeze
        self._full = False  # a sweep asked for by ``soon``, not only a settling
        self._swept = None  # objects frozen after the last full sweep (None: none yet)
        self.rounds = 0     # sweeps and settlings done (for tests: one is over)
        self._blocks = 0    # sys.getallocatedblocks() after the last settling
        self._ended = 0.0   # time.monotonic() when a cell last ended

    def soon(self):
        """Sweep once no cell runs; started on first use."""
        self._ask(full=True)

    def cell_ended(self):
        """A cell ended: with ``freeze``, settle what it left once no cell runs."""
        self._ended = time.monotonic()
        if self._freeze:
            self._ask(full=False)

    def _ask(self, full):
        with self._lock:
            if self._closed:
                return
            self._full |= full
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="snapshot-kernel-sweeper")
                self._thread.start()
        self._wanted.set()

    def close(self):
        with self._lock:
            self._closed, thread = True, self._thread
        self._wanted.set()
        if thread is not None:  # (a finalizer a collection runs may block: not for long)
            thread.join(1.0)
        if self._freeze:  # the process may go on (a test): its objects in reach again. A
            gc.unfreeze()  # round still running then freezes nothing (``_settle``)

    def _loop(self):
        while True:
            self._wanted.wait()
            time.sleep(self.POLL)
            self._wait_for_quiet()
            if self._closed:
                return
            self._wanted.clear()
            with self._lock:
                full, self._full = self._full, False
            if not self._freeze:
                gc.collect()
            elif full or self._swept is None:  # (the first: nothing is frozen yet)
                self._sweep_all()
            elif sys.getallocatedblocks() - self._blocks >= self.SETTLE_BLOCKS:
                self._settle()
                if gc.get_freeze_count() > 2 * self._swept + self.FLOOR:
                    self._sweep_all()
            if full:
                give_back()
            self.rounds += 1

    def _sweep_all(self):
        """Collect what is frozen too, and freeze what is left."""
        if not self._closed:  # (a closed one leaves the process's freezing to others)
            gc.unfreeze()
        self._settle()
        self._swept = gc.get_freeze_count()

    def _settle(self):
        """Collect what the collector reaches, and freeze what is left."""
        if gc.collect():  # a figure's cycles need two: a finalizer holds some back
            gc.collect()
        if not self._closed:
            gc.freeze()
        self._blocks = sys.getallocatedblocks()

    def _wait_for_quiet(self):
        unsettled = 0.0  # seconds idle, not settled
        while not self._closed:
            if self._idle() and time.monotonic() - self._ended >= self.QUIET:
                if unsettled >= self.SETTLE or self._settled():
                    return
                unsettled += self.POLL
            time.sleep(self.POLL)
