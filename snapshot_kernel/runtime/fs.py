"""The working directory and umask held per cell.

On Linux a thread can own them: ``unshare(CLONE_FS)``, as Samba's thread pool does.
Each thread that runs cells does so before its first one, so a cell's ``os.chdir`` and
``os.umask`` move its own thread, the threads it starts (they share it) and the
processes those start, and nothing else. Where that is refused (another system, a
seccomp filter), they stay one per process and cells whose values differ take turns
(``available``).

A state's working directory is None (the server's workdir, wherever the server runs),
a path relative to the workdir for one inside it, or an absolute path; its umask is
None (the server's) or a number.
"""

import ctypes
import os
import threading

CLONE_FS = 0x200

try:
    _unshare = ctypes.CDLL(None, use_errno=True).unshare
    _unshare.argtypes, _unshare.restype = (ctypes.c_int,), ctypes.c_int
except (OSError, AttributeError):  # not Linux, or no such symbol
    _unshare = None


class _Local(threading.local):
    own = False  # the thread owns its working directory and umask


_local = _Local()
_available = []  # [True/False] once a thread has tried


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


def enter_cwd(held, value):
    owned()
    target = path_of(value, held.server)
    try:
        held.working["cwd"] = os.getcwd()  # the thread's, given back by release_cwd
        if held.working["cwd"] == target:
            return
    except FileNotFoundError:  # the thread's last directory was removed
        pass
    try:
        os.chdir(target)
    except OSError as exc:
        raise SettingError(
            f"the working directory this state's cells chose, {target!r}, cannot be "
            f"entered ({exc.strerror or exc}); make it again from a cell on another "
            "state, or run this cell on another state") from None


def release_cwd(held):
    """The thread that ran the cell is left in the directory it was found in (a host's
    thread running a cell with ``execute_here``, say)."""
    before = held.working.get("cwd")
    try:
        if before is not None and os.getcwd() != before:
            os.chdir(before)
    except OSError:  # either is gone: the next cell's enter_cwd chooses again
        pass


def leave_cwd(held, value):
    try:
        now = os.getcwd()
    except FileNotFoundError:  # removed under the cell: the state keeps the one it had
        return value
    if now == path_of(value, held.server):
        return value
    workdir = held.server.workdir
    if now == workdir:
        return None
    inside = now.startswith(workdir.rstrip(os.sep) + os.sep)
    return os.path.relpath(now, workdir) if inside else now


def read_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def enter_umask(held, value):
    owned()
    held.working["umask"] = os.umask(held.server.umask if value is None else value)


def release_umask(held):
    before = held.working.get("umask")
    if before is not None:
        os.umask(before)


def leave_umask(held, value):
    mask = read_umask()
    if mask == (held.server.umask if value is None else value):
        return value
    return None if mask == held.server.umask else mask

