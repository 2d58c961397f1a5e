"""Confining a server process: ``confine`` first thing, before the process starts a thread,
and ``Confinement.seal`` once it listens; what is and is not confined, said on stderr at
start and in GET /openapi.json.

Each part rests on what the kernel offers, and one that it refuses leaves the others: a
server that cannot confine something says so, line by line, and serves. The supervisor
stays outside, to restart server processes and clean up; ``protect_supervisor`` makes it
undumpable, so that /proc shows its environment and memory to no process of its user
without CAP_SYS_PTRACE, and a confined process has no capability at all.
"""

import os
import sys
import tempfile

from . import landlock, mounts, policy, refusals, seccomp
from .report import Confinement, add_exceptions, add_rows

def protect_supervisor():
    """In the supervisor, before it forks: no process of its user reads it through /proc
    or ptrace without CAP_SYS_PTRACE (a server process makes itself dumpable again)."""
    seccomp.set_dumpable(False)


def confine(args, workdir, listener):
    """Confine this process as ``args`` ask (``no_sandbox``, ``allow_network``,
    ``sandbox_dir``, ``state_dir``), with ``workdir`` its working directory and
    ``listener`` the socket it serves; the ``Confinement`` (``say`` says it)."""
    confinement = Confinement(not args.no_sandbox, bool(args.allow_network))
    if confinement.enabled:
        _confine(confinement, args, workdir, listener)
    return confinement


def _confine(confinement, args, workdir, listener):
    seccomp.set_dumpable(True)  # forked from an undumpable supervisor: /proc/self is root's
    # (args.sandbox_dir is None only when serve() is called without main(): a test's)
    places = policy.Places(args.sandbox_dir or tempfile.mkdtemp(), args.state_dir)
    places.make()
    writable = policy.writable(workdir, args.state_dir, places)
    readable = policy.readable()  # before $TMPDIR changes: it is never granted whole
    exposed = policy.exposed_code(writable)
    code_why = _read_only(exposed) if exposed else None  # while it has capabilities
    _use(places, confinement.network_out)
    confinement.writable = [path for path in writable if path not in policy.DEVICES]
    confinement.packages = places.packages
    privileges = _privileges()
    outside = _OutsideProcess()  # forked before the sandbox: a process it must not read
    try:
        handled, files_why = _landlock(writable, readable, confinement.network_out)
        filtered = _seccomp(confinement.network_out, handled.get("tcp", False), listener)
        shown = outside.readable() if handled else []
    finally:
        outside.end()
    confinement.filtered = filtered is None
    add_rows(confinement, handled, files_why, filtered, privileges)
    add_exceptions(confinement, (exposed, code_why), shown)
    if handled or filtered is None:
        refusals.ACTIVE = refusals.Sandbox(workdir, writable, confinement.network_out,
                                           places.packages)


class _OutsideProcess:
    """A child forked before the sandbox, dumpable, waiting for its pipe to close: what
    the sandbox shows of it is what it shows of other processes of the user."""

    def __init__(self):
        self._read, self._write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._write)
            os.read(self._read, 1)  # until the parent closes its end, or dies
            os._exit(0)
        os.close(self._read)

    def readable(self):
        """Which of its /proc files this process can read."""
        shown = []
        for name, words in (("environ", "environment"), ("maps", "memory maps")):
            try:
                with open(f"/proc/{self.pid}/{name}", "rb") as file:
                    file.read(1)
                shown.append(words)
            except OSError:  # refused, as it should be
                pass
        return shown

    def end(self):
        os.close(self._write)
        os.waitpid(self.pid, 0)


def _use(places, network_out):
    """Point this process, and what it starts, at the sandbox's places."""
    for name, value in policy.environment(places, network_out).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tempfile.tempdir = places.tmp  # gettempdir() was read already, in the supervisor
    index = _site_index()
    sys.path[index:index] = [path for path in places.site if path not in sys.path]


def _site_index():
    """Where packages a cell installs go in ``sys.path``: before the installation's own."""
    for index, entry in enumerate(sys.path):
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            return index
    return len(sys.path)


def _read_only(paths):
    """None once ``paths`` are read-only for this process, else why cells may change them."""
    try:
        mounts.read_only(paths)
    except OSError as exc:  # no unprivileged user namespaces here (a sysctl, a container)
        return (f"cells may change {', '.join(paths)}, which lies where they write, and this "
                f"kernel refused a mount namespace to keep it read-only ({exc.strerror}): "
                "start the server from another directory, or with --workdir")
    return None


def _privileges():
    """``(confined, how or why not)`` of giving up privileges."""
    try:
        seccomp.no_new_privileges()
        dropped = seccomp.drop_capabilities()
    except OSError as exc:
        return False, f"the kernel refused ({exc.strerror})"
    return True, (f"no new privileges (setuid programs run as this user), "
                  f"{dropped} capabilities dropped")


def _landlock(writable, readable, network_out):
    """``(what Landlock handled, why not if nothing)``."""
    version, why = landlock.abi()
    if not version:
        return {}, why
    rules = [(path, landlock.WRITE) for path in writable]
    rules += [(path, landlock.READ) for path in readable if path not in writable]
    try:
        handled = landlock.restrict(version, rules, connect=network_out, scoped=True)
    except OSError as exc:  # a kernel that offers Landlock and refuses it (a seccomp filter)
        return {}, f"Landlock ABI {version} refused ({exc.strerror})"
    return dict(handled, version=version), None


def _seccomp(network_out, tcp_by_landlock, listener):
    """None once the filter is installed, else why not."""
    if seccomp.machine() is None:
        return f"no seccomp filter for this machine ({os.uname().machine})"
    try:
        seccomp.install(network_out, tcp_by_landlock, listener.fileno())
    except OSError as exc:
        return f"seccomp refused ({exc.strerror})"
    return None
