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
"""

import ctypes
import ctypes.util
import platform

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
