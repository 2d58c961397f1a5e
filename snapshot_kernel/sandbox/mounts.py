"""Read-only views of the server's own code where cells may write, through a mount namespace.

Landlock only adds rights beneath a path: a virtualenv made in the workdir (as README's
two commands make it) would be writable with the rest of it, and a cell could change what
the next server process, or the supervisor, runs. So the process enters a user namespace
of its own, with its own uid and gid mapped to themselves (nothing else changes: files
keep their owners; those of other users show as ``nobody``), and a mount namespace in
which each such directory is bound onto itself read-only. The process gives up the
namespace's capabilities right after (``seccomp.drop_capabilities``), and Landlock forbids
changing mounts from then on. Nothing outside the process sees these mounts.
"""

import ctypes
import os

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 1 << 14, 1 << 18, 1 << 21
# statvfs's flags -> mount's: a remount must keep the flags the mount is locked with
_KEPT = ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
         (os.ST_NOATIME, _MS_NOATIME), (os.ST_NODIRATIME, _MS_NODIRATIME),
         (os.ST_RELATIME, _MS_RELATIME))

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_void_p)


def read_only(paths):
    """Make ``paths`` read-only for this process and what it starts; this process must
    have no other thread. OSError if the kernel refuses (no unprivileged user namespaces)."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
    _write("/proc/self/setgroups", "deny")  # so an unprivileged process may map its gid
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _mount(None, "/", _MS_REC | _MS_PRIVATE)  # the binds below stay in this namespace
    for path in paths:
        _mount(path, path, _MS_BIND | _MS_REC)
        kept = os.statvfs(path).f_flag
        flags = sum(mount_flag for statvfs_flag, mount_flag in _KEPT if kept & statvfs_flag)
        _mount(None, path, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)


def _mount(source, target, flags):
    encoded = [None if each is None else os.fsencode(each) for each in (source, target)]
    _check(_libc.mount(encoded[0], encoded[1], None, flags, None), f"mount {target}")


def _write(path, text):
    with open(path, "w") as file:
        file.write(text)


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
