"""Landlock, through ctypes: the files a process keeps, the TCP ports it may bind and connect
to, and whether its signals and abstract Unix sockets reach outside it.

A ruleset names the rights it handles; from ``restrict_self`` on, whatever no rule grants
is refused (EACCES) to the calling thread and to every thread and process it starts
afterwards, for good. Threads that exist already keep their rights, so a process applies it
before it starts one. Each ABI adds rights: ask the kernel which it offers (``abi``) and
handle only those, so an older kernel still confines what it can.
"""

import ctypes
import os
import stat

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # one numbering on x86_64, aarch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# Rights on files (ABI 1 unless said): bits of handled_access_fs and of a rule's access.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (1 << 16) - 1  # everything; ``restrict`` keeps what the ABI handles
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a file's rule takes
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1            # ABI 4: handled_access_net
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6: scoped
NET_ABI, SCOPE_ABI = 4, 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def _call(number, *args):
    """``syscall(number, *args)``; OSError with the kernel's errno if it fails."""
    result = _syscall(ctypes.c_long(number), *args)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"Landlock: {os.strerror(errno)}")
    return result


def abi():
    """``(version, why not)``: the Landlock ABI this kernel offers, or 0 and the reason."""
    try:
        return _call(_CREATE_RULESET, None, ctypes.c_long(0),
                     ctypes.c_long(_CREATE_RULESET_VERSION)), None
    except OSError as exc:
        if exc.errno == 38:   # ENOSYS
            return 0, "this kernel has no Landlock (Linux 5.13 or later has it)"
        if exc.errno == 95:   # EOPNOTSUPP
            return 0, "Landlock is built into this kernel but not enabled (boot option lsm=)"
        return 0, f"Landlock refused ({exc.strerror})"


def restrict(version, rules, connect, scoped):
    """Confine the calling thread to ``rules``, ``[(path, rights)]``: the file accesses it
    keeps (a rule grants beneath a directory). TCP binds are refused (ABI 4), and TCP
    connections unless ``connect``; with ``scoped`` (ABI 6), signals and abstract Unix
    sockets reach only this domain. Returns what was handled: ``{"files", "tcp", "scope"}``."""
    handled_fs = _FS_RIGHTS[max(v for v in _FS_RIGHTS if v <= version)]
    handled_net = (BIND_TCP | (0 if connect else CONNECT_TCP)) if version >= NET_ABI else 0
    scope = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if scoped and version >= SCOPE_ABI else 0
    attr = _RulesetAttr(handled_fs, handled_net, scope)
    size = 8 if version < NET_ABI else 16 if version < SCOPE_ABI else 24
    ruleset = _call(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_long(size), ctypes.c_long(0))
    try:
        for path, rights in rules:
            _add_path_rule(ruleset, path, rights & handled_fs)
        _call(_RESTRICT_SELF, ctypes.c_long(ruleset), ctypes.c_long(0))
    finally:
        os.close(ruleset)
    return {"files": True, "tcp": bool(handled_net), "scope": bool(scope)}


def _add_path_rule(ruleset, path, rights):
    """Grant ``rights`` beneath ``path`` (only a file's rights, if it is no directory)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_ONLY
        rule = _PathBeneath(rights, fd)
        _call(_ADD_RULE, ctypes.c_long(ruleset), ctypes.c_long(_RULE_PATH_BENEATH),
              ctypes.byref(rule), ctypes.c_long(0))
    finally:
        os.close(fd)
