"""How a server process died: the signal or exit status of its wait status, and the
evidence that the OOM killer ended it.

The supervisor (``supervisor.py``) reads the counts of the kernel's OOM kills
(``oom_kills``: this process's memory cgroup, then the whole machine) before it forks
a server process and while it waits for it; when that process dies unasked, it
compares them with the counts read after (``cause_of``): a SIGKILL while one rose is
likely the OOM killer's. A forced stop ends a server process by its own hand
(``forced_cause``). What the cause goes with, the executions that were running, is the
journal's (``crashes.py``). ``memory.py`` finds the cgroup's limit through the same
files (``cgroup_files``).
"""

import os
import signal

from .crashes import FORCED_EXIT


def cause_of(status, oom_before, oom_after):
    """What ``crash`` says of a server process that ended with wait ``status``: the signal
    or exit status, and whether the OOM killer likely did it (a SIGKILL while one of
    ``oom_kills()``'s counts rose: the same evidence an operator would read)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        name = _signal_name(signum)
        cause = f"was killed by {name}"
        description = signal.strsignal(signum)
        if description:
            cause += f" ({description})"
        evidence = _oom_evidence(oom_before, oom_after) if signum == signal.SIGKILL else None
        if evidence:
            cause += f", likely out of memory: {evidence}"
        return {"cause": cause, "signal": name, "exit_status": None,
                "likely_out_of_memory": bool(evidence)}
    code = os.waitstatus_to_exitcode(status)
    return {"cause": f"exited with status {code} (os._exit, or exit() in C code)",
            "signal": None, "exit_status": code, "likely_out_of_memory": False}


def forced_cause(exec_id):
    """What ``crash`` says of a server process a forced stop of ``exec_id`` ended."""
    return {"cause": f"was replaced to stop execution {exec_id!r}, which a forced interrupt "
                     "(POST /interrupt with \"force\": true) asked for",
            "signal": None, "exit_status": FORCED_EXIT, "likely_out_of_memory": False}


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:  # a real-time signal, which has no name
        return f"signal {signum}"


def _oom_evidence(before, after):
    rose = [f"{where} counts {after[where] - count} more OOM kill(s)"
            for where, count in before.items() if after.get(where, count) > count]
    return "; ".join(rose)


def oom_kills(proc="/proc", cgroups="/sys/fs/cgroup"):
    """``{file: count of OOM kills}`` from every source readable here: this process's
    memory cgroup (v2 ``memory.events``, v1 ``memory.oom_control``), then the whole
    machine's (``/proc/vmstat``)."""
    counts = {}
    files = cgroup_files(proc, cgroups, "memory.events", "memory.oom_control")
    for path in files + [os.path.join(proc, "vmstat")]:
        count = _oom_kill_line(path)
        if count is not None:
            counts[path] = count
    return counts


def cgroup_files(proc, cgroups, v2_name, v1_name):
    """The paths of file ``v2_name`` (cgroup v2) or ``v1_name`` (v1) of this process's
    memory cgroup, where they would be; some may not exist."""
    try:
        with open(os.path.join(proc, "self", "cgroup")) as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:  # no /proc: no cgroup to read
        return []
    files = []
    for entry in entries:
        if len(entry) != 3:
            continue
        _, controllers, path = entry
        if controllers == "":  # v2, mounted alone or beside v1 ("unified")
            files += [os.path.join(cgroups, *mount, path.lstrip("/"), v2_name)
                      for mount in ((), ("unified",))]
        elif "memory" in controllers.split(","):
            files.append(os.path.join(cgroups, "memory", path.lstrip("/"), v1_name))
    return files


def _oom_kill_line(path):
    """The number on the file's ``oom_kill N`` line; None if unreadable or absent."""
    try:
        with open(path) as lines:
            for line in lines:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    except OSError:  # not mounted, not ours to read: no evidence from it
        pass
    return None
