"""The memory limit of cells (``--max-cell-memory``): what the process holds, and what the
machine gives it.

A cell that grows a list without end, or loads a file bigger than the machine, would
end in the OOM killer's SIGKILL: the supervisor survives that, but the server process
and every cell running in it go. Instead, the deadlines thread (``deadlines.py``)
reads the process's anonymous memory every ``POLL`` s while cells run, and when it
passes the limit it interrupts them; their replies say ``MemoryError``.

Anonymous memory is what the process's objects hold: resident pages that belong to no
file. The buffers states share copy-on-write are memfds or files mapped privately
(``states.cow``), so they count only for the pages a cell wrote to. A limit on
virtual memory (``RLIMIT_AS``, ``RLIMIT_DATA``) would count each mapping whole and
refuse the first branch of a big state.

It cannot stop a single allocation in C that takes more than the machine has before
it returns to Python (the kernel's overcommit check refuses most of those, and numpy
then raises MemoryError itself); the supervisor is the net under that.
"""

import os

from .deaths import cgroup_files

POLL = 0.02       # seconds between reads while a limit is set and a cell runs
DEFAULT_SHARE = 0.8  # of the memory the machine (or the memory cgroup) gives


def anonymous_bytes(proc="/proc"):
    """Bytes of anonymous memory resident in this process (``/proc/self/statm``: resident
    pages minus those of files and shared memory); None where there is no /proc."""
    try:
        with open(os.path.join(proc, "self", "statm"), "rb") as statm:
            fields = statm.read().split()
    except OSError:
        return None
    return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")


def available_bytes(proc="/proc", cgroups="/sys/fs/cgroup"):
    """What the machine gives this process: its RAM (``MemTotal``), or its memory
    cgroup's limit if that is lower (v2 ``memory.max``, v1 ``memory.limit_in_bytes``);
    None if neither can be read."""
    limits = []
    try:
        with open(os.path.join(proc, "meminfo")) as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    for path in cgroup_files(proc, cgroups, "memory.max", "memory.limit_in_bytes"):
        try:
            with open(path) as limit:
                text = limit.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) means none; v1 writes a huge number for none
            limits.append(int(text))
    return min(limits) if limits else None


def default_limit(proc="/proc", cgroups="/sys/fs/cgroup"):
    """DEFAULT_SHARE of ``available_bytes``, or None (no limit) if that is unknown."""
    available = available_bytes(proc, cgroups)
    return None if available is None else int(available * DEFAULT_SHARE)
