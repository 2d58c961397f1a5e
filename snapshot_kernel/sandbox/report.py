"""What a server process says it confined: one row a part (files, outgoing connections,
listening sockets, Unix sockets, signals, other processes, privileges, and where they
apply the server's own code and other processes' /proc files), confined or not, with how
or why not; on stderr at start and in GET /openapi.json (``info.description`` and
``info.x-sandbox``)."""

from . import landlock, seccomp
from ..web.process import say

OFF = ("the sandbox is off (--no-sandbox): cells run with this process's rights: they "
       "read and write what its user may, open sockets and signal its processes")


class Confinement:
    """What one process confined: ``rows``, ``(part, confined, how or why not)`` in order."""

    def __init__(self, enabled, network_out):
        self.enabled, self.network_out = enabled, network_out
        self.rows = []
        self.writable = []
        self.packages = None
        self.filtered = False  # the seccomp filter is installed: seal() can add to it

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
        server listens, which clients read first), if anyone still reads it."""
        for line in self.lines():
            say(line)

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
        if not self.filtered:
            return
        try:
            seccomp.seal()
        except OSError as exc:  # the filter installed at start still refuses other sockets
            self._downgrade("listening sockets", f"the server's own socket could be made to "
                                                 f"listen again ({exc.strerror})")

    def _downgrade(self, part, why):
        self.rows = [(name, ok and name != part, why if name == part else text)
                     for name, ok, text in self.rows]
        say(f"snapshot-kernel: sandbox: {part} NOT confined: {why}")


def add_rows(confinement, handled, files_why, filtered, privileges):
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


def add_exceptions(confinement, code, shown):
    """The rows that apply only here: the server's own code where cells write (``code``:
    its paths, and why they are not read-only, or None), and other processes' /proc files
    the kernel ``shown`` a confined process."""
    exposed, why_not = code
    if exposed:
        confinement.add("the server's own code", why_not is None, why_not or (
            f"read-only where cells write: {', '.join(exposed)} (a mount namespace)"))
    if shown:
        confinement.add("other processes' /proc files", False, (
            f"this kernel shows a confined process the {' and '.join(shown)} of its user's "
            "other processes (Landlock refuses only ptrace, their descriptors and signals): "
            "run the server as a user of its own; the supervisor is undumpable, so not its"))
