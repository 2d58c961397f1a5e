"""seccomp and privileges, through ctypes: the system calls Landlock does not see, refused
to the server process and whatever it starts; no new privileges; no capabilities.

The filter is classic BPF that the kernel runs at every system call: a dozen instructions
for the calls it names, four for the rest. It refuses

- ``socket`` of a family that leads out: Unix sockets (a path reaches the user's services,
  Docker's or D-Bus's socket, and Landlock does not check it), and with the network closed
  every family but TCP over IPv4 and IPv6, whose connections and binds Landlock refuses (or
  those too, where Landlock has no TCP rules); with the network open, IPv4, IPv6 and
  netlink only;
- ``listen`` on every socket but the server's own, and once ``seal``ed on that one too (an
  unbound socket listens on a port of the kernel's choosing, without a ``bind``);
- io_uring, whose operations make and connect sockets without those calls (ENOSYS, so
  libraries fall back to plain calls), and the kernel's keyrings, where keys of the user live.

A system call of another ABI (i386's from x86_64, x32's) ends the process: the numbers
above would mean other calls there.
"""

import ctypes
import os
import platform
import socket

# Per machine: the audit architecture and the numbers of the calls the filter names.
_MACHINES = {
    "x86_64": {"arch": 0xC000003E, "socket": 41, "listen": 50, "seccomp": 317,
               "keys": (248, 249, 250), "x32": True},
    "aarch64": {"arch": 0xC00000B7, "socket": 198, "listen": 201, "seccomp": 277,
                "keys": (217, 218, 219), "x32": False},
}
_IO_URING = (425, 426, 427)  # setup, enter, register: one numbering everywhere
_X32_BIT = 0x40000000

_LOAD, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06  # BPF_LD|W|ABS, JEQ, JGE, AND, RET
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data; argument n's low half is at 16 + 8n
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _EACCES, _ENOSYS = 1, 13, 38
_SOCK_TYPE_MASK, _IPPROTO_TCP = 0xF, 6

_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 4, 24, 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_CAPABILITY_VERSION_3 = 0x20080522


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.restype = ctypes.c_int
_libc.syscall.restype = ctypes.c_long


def machine():
    """This machine's table of numbers; None where the filter does not know them."""
    return _MACHINES.get(platform.machine())


def install(network_out, tcp_by_landlock, listen_fd):
    """Refuse, from now on, in this thread and what it starts, what the module says;
    ``listen_fd`` is the server's own listening socket (None: none)."""
    program = _load(_filter(machine(), network_out, tcp_by_landlock, listen_fd))
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(program))


def seal():
    """Refuse ``listen`` on every socket, the server's own included, in every thread of
    the process (TSYNC): call it once the server listens, before any cell runs."""
    numbers = machine()
    steps = _arch_check(numbers) + [(_JEQ, numbers["listen"], "eacces"), (_RET, _ALLOW),
                                    "eacces", (_RET, _ERRNO | _EACCES)] + _ENDS
    program = _load(steps)
    result = _libc.syscall(ctypes.c_long(numbers["seccomp"]),
                           ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                           ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(program))
    if result != 0:  # a thread id: that thread's filters differ, and none was synced
        errno = ctypes.get_errno() if result < 0 else 0
        raise OSError(errno, f"seccomp TSYNC: {os.strerror(errno) if errno else result}")


_ENDS = ["kill", (_RET, _KILL), "allow", (_RET, _ALLOW)]


def _arch_check(numbers):
    steps = [(_LOAD, _ARCH), (_JEQ, numbers["arch"], None, "kill"), (_LOAD, _NR)]
    if numbers["x32"]:
        steps.append((_JGE, _X32_BIT, "kill"))
    return steps


def _filter(numbers, network_out, tcp_by_landlock, listen_fd):
    """The steps of the filter ``install`` loads."""
    steps = _arch_check(numbers) + [(_JEQ, numbers["socket"], "socket"),
                                    (_JEQ, numbers["listen"], "listen")]
    steps += [(_JEQ, number, "enosys") for number in _IO_URING]
    steps += [(_JEQ, number, "eperm") for number in numbers["keys"]]
    steps += [(_RET, _ALLOW), "listen", (_LOAD, _arg(0))]
    if listen_fd is not None:
        steps.append((_JEQ, listen_fd, "allow"))
    steps += [(_RET, _ERRNO | _EACCES), "socket", (_LOAD, _arg(0))]
    steps += _families(network_out, tcp_by_landlock)
    return steps + ["eacces", (_RET, _ERRNO | _EACCES), "eperm", (_RET, _ERRNO | _EPERM),
                    "enosys", (_RET, _ERRNO | _ENOSYS)] + _ENDS


def _families(network_out, tcp_by_landlock):
    """After the family is loaded: allow or refuse the socket."""
    if network_out:
        return [(_JEQ, family, "allow") for family in
                (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)] + [(_RET, _ERRNO | _EACCES)]
    if not tcp_by_landlock:
        return [(_RET, _ERRNO | _EACCES)]
    return [(_JEQ, socket.AF_INET, "tcp"), (_JEQ, socket.AF_INET6, "tcp"),
            (_RET, _ERRNO | _EACCES),
            "tcp", (_LOAD, _arg(1)), (_AND, _SOCK_TYPE_MASK),
            (_JEQ, socket.SOCK_STREAM, None, "eacces"), (_LOAD, _arg(2)),
            (_JEQ, 0, "allow"), (_JEQ, _IPPROTO_TCP, "allow"), (_RET, _ERRNO | _EACCES)]


def _arg(number):
    return 16 + 8 * number  # the low 32 bits, little-endian: the int the kernel reads


def _load(steps):
    """A ``sock_fprog`` of ``steps``: instructions ``(op, k[, then[, else]])``, where the
    jumps name labels (str items) and None is the next instruction."""
    labels, count = {}, 0
    for step in steps:
        if isinstance(step, str):
            labels[step] = count
        else:
            count += 1
    code = (_Instruction * count)()
    index = 0
    for step in steps:
        if isinstance(step, str):
            continue
        op, k, then, otherwise = (tuple(step) + (None, None))[:4]
        jump = [labels[target] - index - 1 if target else 0 for target in (then, otherwise)]
        code[index] = _Instruction(op, jump[0], jump[1], k)
        index += 1
    program = _Program(count, code)
    program._keep = code  # the instructions live as long as the program
    return program


# -- privileges ----------------------------------------------------------------------------

def no_new_privileges():
    """Neither this process nor what it runs gains privileges (setuid files, file
    capabilities); seccomp and Landlock need it of a process without CAP_SYS_ADMIN."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities():
    """Give up every capability, for good (a server run as root keeps only what root's
    files allow their owner); the number of effective capabilities it had."""
    had = bin(_effective_capabilities()).count("1")
    for capability in range(_last_capability() + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # without CAP_SETPCAP the bounding set stays; NO_NEW_PRIVS keeps it unused
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable, twice: all empty
    if _libc.capset(header, data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"capset: {os.strerror(errno)}")
    return had


def set_dumpable(dumpable):
    """Whether processes of the same user may read this one's memory, environment and
    files through /proc and ptrace (without CAP_SYS_PTRACE)."""
    _prctl(_PR_SET_DUMPABLE, 1 if dumpable else 0)


def _effective_capabilities():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def _last_capability():
    try:
        with open("/proc/sys/kernel/cap_last_cap") as last:
            return int(last.read())
    except (OSError, ValueError):  # no /proc/sys: Linux 5.x has 40, 6.x 40 or 41
        return 63


def _prctl(option, value, *rest):
    args = [ctypes.c_ulong(value), *(ctypes.c_ulong(each) for each in rest)]
    args += [ctypes.c_ulong(0)] * (4 - len(args))
    if _libc.prctl(option, *args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")
