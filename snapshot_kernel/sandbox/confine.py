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

OFF = ("the sandbox is off (--no-sandbox): cells run with this process's rights: they "
       "read and write what its user may, open sockets and signal its processes")


class Confinement:
    """What one process confined: ``rows``, ``(part, confined, how or why not)`` in order."""

    def __init__(self, enabled, network_out):
        self.enabled, self.network_out = enabled, network_out
        self.rows = []
        self.writable = []
        self.packages = None
        self._sealing = False

    def add(self, part, confined, text):
        self.rows.append((part, confined, text))

    def lines(self):
        """What the server says on stderr at start: one line a part."""
        if not self.enabled:
            return [f"snapshot-kernel: {OFF}"]
        return [f"snapshot-kernel: sandbox: {part} {'confined' if ok else 'NOT confined'}: "
                f"{text}" for part, ok, text in self.rows]

    def say(self):
        """Say on stderr what is and is not confined (after the line saying where the
        server listens, which clients read first)."""
        for line in self.lines():
            print(line, file=sys.stderr, flush=True)

    def report(self):
        """The JSON of GET /openapi.json's ``info.x-sandbox``."""
        return {"enabled": self.enabled,
                "network": "open" if self.network_out else "closed",
                "confined": {part: text for part, ok, text in self.rows if ok},
                "not_confined": {part: text for part, ok, text in self.rows if not ok},
                "writable": list(self.writable), "packages": self.packages}

    def description(self):
        """GET /openapi.json's paragraph on the sandbox."""
        if not self.enabled:
            return f"Sandbox: {OFF}."
        confined = "; ".join(f"{part}: {text}" for part, ok, text in self.rows if ok)
        missing = "; ".join(f"{part}: {text}" for part, ok, text in self.rows if not ok)
        return (f"Sandbox: code runs confined. Confined: {confined or 'nothing'}. "
                f"Not confined: {missing or 'nothing'}. `info.x-sandbox` lists the same.")

    def seal(self):
        """Refuse ``listen`` on the server's own socket too, in every thread: call it once the
        server listens, before any cell can run."""
        if not self._sealing:
            return
        try:
            seccomp.seal()
        except OSError as exc:  # the filter installed at start still refuses other sockets
            self._downgrade("listening sockets", f"the server's own socket could be made to "
                                                 f"listen again ({exc.strerror})")

    def _downgrade(self, part, why):
        self.rows = [(name, ok and name != part, why if name == part else text)
                     for name, ok, text in self.rows]
        print(f"snapshot-kernel: sandbox: {part} NOT confined: {why}", file=sys.stderr,
              flush=True)


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
    places = policy.Places(args.sandbox_dir or tempfile.mkdtemp(), args.state_dir)
    places.make()
    writable = policy.writable(workdir, args.state_dir, places)
    readable = policy.readable()  # before $TMPDIR changes: it is never granted whole
    exposed = policy.exposed_code(writable)
    code_why = _read_only(exposed) if exposed else None  # before capabilities are dropped
    _use(places, confinement.network_out)
    confinement.writable = [path for path in writable if path not in policy.DEVICES]
    confinement.packages = places.packages
    privileges = _privileges()
    outside = _OutsideProcess()  # forked before the sandbox: a process it must not read
    try:
        handled, files_why = _landlock(writable, readable, confinement.network_out)
        filtered = _seccomp(confinement.network_out, handled.get("tcp", False), listener)
        shown = outside.readable() if handled else None
    finally:
        outside.end()
    confinement._sealing = filtered is None
    _report(confinement, handled, files_why, filtered, privileges)
    if exposed:
        confinement.add("the server's own code", code_why is None, code_why or (
            f"read-only where cells write: {', '.join(exposed)} (a mount namespace)"))
    if shown:
        confinement.add("other processes' /proc files", False, (
            f"this kernel shows a confined process the {' and '.join(shown)} of its user's "
            "other processes (Landlock refuses only ptrace, their descriptors and signals): "
            "run the server as a user of its own; the supervisor is undumpable, so not its"))
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
    sys.path[_site_index():_site_index()] = [path for path in places.site
                                             if path not in sys.path]


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


def _report(confinement, handled, files_why, filtered, privileges):
    """The rows of ``confinement`` from what each step did."""
    version = handled.get("version")
    landlock_name = f"Landlock ABI {version}" if version else None
    confinement.add("files", bool(version), (
        f"cells write only in {', '.join(confinement.writable)} (and /dev/null), and read "
        f"only those, the Python installation and the system's files ({landlock_name})"
        if version
        else files_why))
    confinement.add(*_outgoing(confinement.network_out, handled, filtered, landlock_name))
    confinement.add("listening sockets", filtered is None,
                    "no socket listens, none binds (seccomp, Landlock)" if filtered is None
                    else filtered)
    confinement.add("Unix sockets", filtered is None,
                    "cells open none; socketpair() works" if filtered is None else filtered)
    confinement.add("signals", bool(handled.get("scope")), (
        f"cells signal only the processes they started ({landlock_name})"
        if handled.get("scope") else files_why or f"{landlock_name} has no signal scoping "
                                                  f"(ABI {landlock.SCOPE_ABI} has)"))
    confinement.add("other processes", bool(version), (
        f"cells trace no process outside the sandbox ({landlock_name}); the supervisor's "
        f"environment and memory are its user's alone" if version else files_why))
    confinement.add("privileges", *privileges)


def _outgoing(network_out, handled, filtered, landlock_name):
    """The row of outgoing connections."""
    if network_out:
        return "outgoing connections", False, "open, as --allow-network asks"
    if filtered is None:
        how = f"seccomp, {landlock_name}" if handled.get("tcp") else "seccomp"
        return "outgoing connections", True, f"cells open none ({how})"
    if handled.get("tcp"):
        return ("outgoing connections", False,
                f"TCP is refused ({landlock_name}) but UDP is not: {filtered}")
    return "outgoing connections", False, filtered
