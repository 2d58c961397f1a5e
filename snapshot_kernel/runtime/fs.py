"""The working directory and umask held per cell.

On Linux a thread can own them: ``unshare(CLONE_FS)``, as Samba's thread pool does.
Each thread that runs cells does so before its first one, so a cell's ``os.chdir`` and
``os.umask`` move its own thread, the threads it starts (they share it) and the
processes those start, and nothing else. Where that is refused (another system, a
seccomp filter), they stay one per process and cells whose values differ take turns
(``available``).

A thread remembers the directory and umask it has (``_Local``), and ``os.chdir``,
``os.fchdir`` and ``os.umask`` count every change (``_changes``), so a cell that changes
neither costs no system call: its thread is read again only after a change, from any
thread. (A change made by C code itself is not counted: the next cell on the thread
may start where it was left.)

A state's working directory is None (the server's workdir, wherever the server runs),
a path relative to the workdir for one inside it, or an absolute path; its umask is
None (the server's) or a number.
"""

import ctypes
import os
import threading

CLONE_FS = 0x200
CWD, UMASK = "cwd", "umask"

try:
    _unshare = ctypes.CDLL(None, use_errno=True).unshare
    _unshare.argtypes, _unshare.restype = (ctypes.c_int,), ctypes.c_int
except (OSError, AttributeError):  # not Linux, or no such symbol
    _unshare = None


class _Local(threading.local):
    own = False   # the thread owns its working directory and umask
    cwd = umask = None  # what it has, as of ``known``
    known = -1    # _changes[0] when those were read or set


_local = _Local()
_available = []  # [True/False] once a thread has tried
_changes = [0]   # calls of os.chdir, os.fchdir and os.umask, in any thread
_original = {}   # name -> the os function replaced


class SettingError(RuntimeError):
    """A setting of the state could not be put back (its working directory is gone, say)."""


def owned():
    """Make the calling thread own its working directory and umask; True if it does."""
    if _local.own:
        return True
    if _available == [False] or _unshare is None or _unshare(CLONE_FS) != 0:
        if not _available:
            _available.append(False)
        return False
    _local.own = True
    if not _available:
        _available.append(True)
    return True


def available():
    """True if cells' threads own their working directory here (False until a thread
    tried: cells then take turns, which is always safe)."""
    return _available == [True]


def path_of(value, server):
    """The absolute working directory a state's ``value`` names on ``server``."""
    return server.workdir if value is None else os.path.join(server.workdir, value)


def _know(cwd=None, umask=None):
    """The calling thread has ``cwd`` and ``umask`` (None: as it knew): read by the
    enter and leave functions below, while no change was counted since."""
    if _local.known != _changes[0]:
        _local.cwd = _local.umask = None
        _local.known = _changes[0]
    if cwd is not None:
        _local.cwd = cwd
    if umask is not None:
        _local.umask = umask


# -- the working directory -----------------------------------------------------------------

def enter_cwd(held, value):
    if not _local.own:
        owned()
    target = held.server.workdir if value is None else path_of(value, held.server)
    before = _local.cwd if _local.known == _changes[0] and _local.own else None
    if before is None:
        try:
            before = os.getcwd()
        except FileNotFoundError:  # the thread's last directory was removed
            before = None
    held.working[CWD] = before  # the thread's, given back by release_cwd
    if before != target:
        try:
            _original["chdir"](target)
        except OSError as exc:
            raise SettingError(
                f"the working directory this state's cells chose, {target!r}, cannot be "
                f"entered ({exc.strerror or exc}); make it again from a cell on another "
                "state, or run this cell on another state") from None
    _know(cwd=target)


def leave_cwd(held, value):
    now = _local.cwd if _local.known == _changes[0] and _local.own else None
    if now is None:
        try:
            now = os.getcwd()
        except FileNotFoundError:  # removed under the cell: the state keeps the one it had
            return value
        _know(cwd=now)
    held.working["cwd now"] = now  # for release_cwd, which follows
    if now == (held.server.workdir if value is None else path_of(value, held.server)):
        return value
    workdir = held.server.workdir
    if now == workdir:
        return None
    inside = now.startswith(workdir.rstrip(os.sep) + os.sep)
    return os.path.relpath(now, workdir) if inside else now


def release_cwd(held):
    """The thread that ran the cell is left in the directory it was found in (a host's
    thread running a cell with ``execute_here``, say)."""
    before = held.working.get(CWD)
    if before is not None and held.working.get("cwd now") != before:
        try:
            _original["chdir"](before)
            _know(cwd=before)
        except OSError:  # gone: the next cell's enter_cwd chooses again
            pass


# -- the umask ------------------------------------------------------------------------------

def read_umask():
    umask = _original.get("umask", os.umask)
    mask = umask(0o022)
    umask(mask)
    return mask


def enter_umask(held, value):
    if not _local.own:
        owned()
    target = held.server.umask if value is None else value
    before = _local.umask if _local.known == _changes[0] and _local.own else None
    if before != target:
        before = _original["umask"](target)
    held.working[UMASK] = before
    _know(umask=target)


def leave_umask(held, value):
    now = _local.umask if _local.known == _changes[0] and _local.own else None
    if now is None:
        now = _original["umask"](0o022)
        _original["umask"](now)
        _know(umask=now)
    held.working["umask now"] = now
    if now == (held.server.umask if value is None else value):
        return value
    return None if now == held.server.umask else now


def release_umask(held):
    before = held.working.get(UMASK)
    if before is not None and held.working.get("umask now") != before:
        _original["umask"](before)
        _know(umask=before)


# -- counting the changes --------------------------------------------------------------------

def _counting(function):
    def counted(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            _changes[0] += 1  # (even if it failed: what it did is not known)

    counted.__name__, counted.__doc__ = function.__name__, function.__doc__
    counted._snapshot_kernel = True
    return counted


def install():
    """Count the changes of the working directory and umask; idempotent."""
    for name in ("chdir", "fchdir", "umask"):
        function = getattr(os, name)
        if not getattr(function, "_snapshot_kernel", False):
            _original[name] = function
            setattr(os, name, _counting(function))

