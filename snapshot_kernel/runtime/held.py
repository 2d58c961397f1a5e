"""The settings a cell holds while it runs, per thread.

A ``Held`` is one cell's view of the settings that are held per cell (``kinds.HELD``):
its state's values, and the working copies the cell made of those it reached. The
hooks that make a process-wide setting per cell (``environ``, ``paths``, ``logs``,
``options``, ``generators``, ``fs``) ask ``current()`` for the calling thread's, and
read and write the process's own value where it is None (a thread that runs no cell).
A thread a cell starts holds its cell's ``Held``, as threads of one process share its
settings.
"""

import sys
import threading

_THREAD_ATTR = "_snapshot_kernel_held"  # on a thread a cell starts: its cell's Held


class _Local(threading.local):
    held = None  # the Held of the cell the thread runs (or that started it), or None


_local = _Local()
ADOPTED = []  # hooks(held) run when a thread a cell started takes the cell's Held on


def current():
    """The calling thread's Held, or None."""
    return _local.held


class Held:
    """One cell's settings while it runs (see the module's docstring). ``values``:
    its state's value of each kind it has one for (absent: the server's own);
    ``working``: kind name -> the copy the cell reads and writes, made on first use;
    ``server``: the kernel's own settings (``Server``); ``entered``: the names of the
    kinds that were active when the cell started."""

    __slots__ = ("values", "working", "server", "entered")

    def __init__(self, values, server):
        self.values, self.working, self.server, self.entered = values, {}, server, set()

    def value_of(self, name):
        """What the cell sees of kind ``name``: its working copy, else its state's value
        (None: the server's)."""
        found = self.working.get(name)
        return found if found is not None else self.values.get(name)


class Server:
    """What a kernel's cells start from where their state says nothing: its working
    directory and umask (the rest is the process's own, read when used)."""

    __slots__ = ("workdir", "umask")

    def __init__(self, workdir, umask):
        self.workdir, self.umask = workdir, umask


def imported(name):
    """True once module ``name`` is imported: not while another thread imports it."""
    module = sys.modules.get(name)
    if module is None:
        return False
    if _IMPORTED.get(name) is module:  # every cell asks: the spec is read once per module
        return True
    if getattr(getattr(module, "__spec__", None), "_initializing", False):
        return False
    _IMPORTED[name] = module
    return True


_IMPORTED = {}  # name -> the module found imported under it


def take(held):
    """Make ``held`` the calling thread's (None: none). The cell's own thread: its kinds
    then enter it (``settings.Process.take``)."""
    _local.held = held


def adopt(held):
    """A thread a cell started takes the cell's ``held`` on, with what the ``ADOPTED``
    hooks give it (the cell's generators)."""
    _local.held = held
    for hook in ADOPTED:
        hook(held)


def _inherit(thread):
    """A thread a cell starts holds the cell's settings (``capture.INHERITED``)."""
    setattr(thread, _THREAD_ATTR, _local.held)


def _bootstrap_taking(bootstrap_inner):
    def bootstrap_inner_held(self):
        held = getattr(self, _THREAD_ATTR, None)
        if held is not None:
            adopt(held)
        return bootstrap_inner(self)

    bootstrap_inner_held._snapshot_kernel = True
    return bootstrap_inner_held


def install(inherited):
    """Threads started while a Held is taken hold it too; idempotent. ``inherited`` is
    ``capture.INHERITED``."""
    if _inherit not in inherited:
        inherited.append(_inherit)
    if not getattr(threading.Thread._bootstrap_inner, "_snapshot_kernel", False):
        threading.Thread._bootstrap_inner = _bootstrap_taking(threading.Thread._bootstrap_inner)
