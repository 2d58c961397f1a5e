"""What a cell is told when the sandbox refused it: a note after Python's own error, as the
kernel's other notes are added (``execution.explain_gone``), naming the sandbox and the flag.

The kernel refuses with the errno any refusal has (EACCES, EPERM; EXDEV for a link out of
the workdir; EROFS for the server's own code in the workdir), so the note goes where the error's text says a refused path lies outside what
cells may write, or says nothing of a path: a refused socket, signal or privilege. ``ACTIVE``
is this process's sandbox (``confine`` sets it), None where cells are not confined.
"""

import os
import re

ACTIVE = None  # a Sandbox once this process is confined
# "[Errno 13] Permission denied: '/etc/x'", with or without the path, anywhere in the text
# (a URLError or a requests error quotes its OSError): the errno, and the quoted path.
_QUOTED = r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
_ERRNO = re.compile(rf"\[Errno (1|13|18|30)\] [^:'\"\]]*(?::\s*{_QUOTED}(?:\s*->\s*{_QUOTED})?)?")
_SHELL_REFUSALS = ("Permission denied", "Operation not permitted")
FILES = ("refused by the server's sandbox: cells write only in the working directory "
         "{workdir}, $TMPDIR and the state directory, and read only those, the Python "
         "installation and the system's files; --no-sandbox starts a server without it")
NETWORK = ("refused by the server's sandbox: cells open no network connection, listen on no "
           "port and open no Unix socket; --allow-network starts a server whose cells open "
           "outgoing connections")
NETWORK_OPEN = ("refused by the server's sandbox: cells listen on no port and open no Unix "
                "socket, though outgoing connections are open; --no-sandbox starts a server "
                "without it")
PROCESSES = ("refused by the server's sandbox: cells signal and inspect only the processes "
             "they started, and gain no privileges; --no-sandbox starts a server without it")
OWN_CODE = ("refused by the server's sandbox: the server's own code stays read-only for "
            "cells, though it lies where they write; --no-sandbox starts a server without it")
PIP_CLOSED = ("snapshot-kernel: this server's sandbox closes the network, so pip reaches no "
              "package index (it installs only from local files); start the server with "
              "--allow-network to install from the index\n")
PIP_PACKAGES = ("Note: %pip installs into this server's package directory, {packages}, which "
                "cells import from and every state shares (the sandbox keeps the server's own "
                "environment read-only); a module already imported keeps its old version "
                "until the server restarts.\n")
PIP_READ_ONLY = ("snapshot-kernel: the sandbox keeps the server's own environment read-only, "
                 "so pip cannot replace or remove a package it holds: install that version "
                 "there before starting the server (or start it with --no-sandbox)\n")
SHELL = ("snapshot-kernel: if the server's sandbox refused the command: commands write only "
         "in the working directory, $TMPDIR and the state directory, read only those and the "
         "system's files, {network}\n")
SHELL_CLOSED = ("and open no network connection (start the server with --allow-network to "
                "open outgoing ones, or --no-sandbox)")
SHELL_OPEN = "and listen on no port (--no-sandbox lifts this)"


class Sandbox:
    """What the note needs of a confined process: where cells write, and whether the
    network is open."""

    def __init__(self, workdir, writable, network_out, packages):
        self.workdir, self.writable, self.network_out = workdir, writable, network_out
        self.packages = packages  # where %pip installs


def explain(error):
    """``error`` (an error dict of a cell) with the sandbox's note if it refused the cell."""
    sandbox = ACTIVE
    if sandbox is None or error is None:
        return error
    match = _ERRNO.search(error["evalue"])
    if match is None:
        return error
    paths = [_path(quoted) for quoted in match.group(2, 3) if quoted]
    note = _note(sandbox, match.group(1), paths)
    if note is None:
        return error
    evalue = f"{error['evalue']} ({note})"
    traceback = error["traceback"][:-1] + [f"{error['ename']}: {evalue}\n"]
    return dict(error, evalue=evalue, traceback=traceback)


def _note(sandbox, errno, paths):
    """The note for an error with ``errno`` on ``paths`` (absolute; none, one or two)."""
    if any(path.startswith("/proc/") for path in paths):
        return PROCESSES  # another process's files: its environment, memory, descriptors
    if paths:
        inside = all(any(_within(path, place) for place in sandbox.writable) for path in paths)
        if errno == "30":  # a read-only mount: the sandbox's only where cells may write
            return OWN_CODE if inside else None
        return None if inside and errno != "18" else FILES.format(workdir=sandbox.workdir)
    if errno == "13":
        return NETWORK_OPEN if sandbox.network_out else NETWORK
    if errno == "1":
        return PROCESSES
    return None


def _path(quoted):
    """The real path an OSError's text quotes (a symbolic link's target: the sandbox
    judges that), relative to the workdir, where cells start."""
    text = quoted[1:-1].replace("\\\\", "\\")
    return os.path.realpath(os.path.join(ACTIVE.workdir, text))


def _within(path, place):
    return os.path.commonpath([path, place]) == place


def network_closed():
    """True if this process is confined with the network closed."""
    return ACTIVE is not None and not ACTIVE.network_out


def says_refused(text):
    """True if a command's output ``text`` says something was refused."""
    return any(refusal in text for refusal in _SHELL_REFUSALS)


def shell_note():
    """The note for a failed shell command that said something was refused; "" outside a
    sandbox."""
    if ACTIVE is None:
        return ""
    return SHELL.format(network=SHELL_OPEN if ACTIVE.network_out else SHELL_CLOSED)


def pip_notes(subcommand, status, refused):
    """``(for stdout, for stderr)``: what ``%pip subcommand`` adds in a sandbox once it
    ended with ``status``, its output saying something was ``refused`` or not: where it
    installs, and why it failed (a closed network, the server's own environment)."""
    failed = []
    if status != 0 and subcommand in ("install", "download") and not ACTIVE.network_out:
        failed.append(PIP_CLOSED)
    if status != 0 and refused:
        failed.append(PIP_READ_ONLY)
    where = subcommand in ("install", "uninstall")
    return PIP_PACKAGES.format(packages=ACTIVE.packages) if where else "", "".join(failed)
