"""The command line: ``snapshot-kernel [--bind HOST:PORT] [--token SECRET] ...``.

Every flag, its default and what it bounds; docs/server.md's flags table follows it.
"""

import argparse
import os
import shutil
import tempfile

from . import crashes, memory
from .runtime import capture
from .states import cow
from . import kernel as k
from .files import DEFAULT_MAX_FILE, Workdir
from .execution import DEFAULT_KEEP_SECONDS
from .web.bodies import DEFAULT_MAX_IMPORT
from .web.server import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEAD, DEFAULT_REQUEST_TIMEOUT

TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"
STATE_DIR_ENV = "SNAPSHOT_KERNEL_STATE_DIR"
DEFAULT_BIND = "127.0.0.1:8080"
PRIVATE_PREFIX = "snapshot-kernel-states-"  # then the supervisor's pid, "-", mkdtemp's letters
JOURNAL = "journal"  # the file in a state directory where running executions are noted
SANDBOX_PREFIX = "snapshot-kernel-sandbox-"  # the same, for the sandbox's private directory
SHARED_MEMORY = "/dev/shm"
SHARED_MEMORY_ROOM = 1 << 30  # free bytes /dev/shm needs to hold the private state directory
DEFAULT_THREADS = 16
CONTROL_THREADS = 4  # workers /execute never takes, so that control requests always find one
DEFAULT_MAX_RUNNING = DEFAULT_THREADS - CONTROL_THREADS
DEFAULT_MAX_BODY = 10 * 1024 * 1024


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="snapshot-kernel",
        description="A branchable Python execution server. Cells run in a sandbox: they "
                    "write only in the workdir, the state directory and a private "
                    "temporary directory, read only those, Python and the system's files, "
                    "and reach no network. The token is the API's only boundary: bind it "
                    "to loopback.",
        epilog="snapshot-kernel mcp --help: the kernel as MCP tools, for agent hosts.")
    parser.add_argument("--bind", default=DEFAULT_BIND, type=_host_port,
                        help=f"HOST:PORT to listen on (default {DEFAULT_BIND}; port 0 picks one)")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                        help=f"the secret clients must send (default: ${TOKEN_ENV}, "
                             "which keeps it out of ps)")
    parser.add_argument("--threads", type=_positive_int, default=DEFAULT_THREADS,
                        help=f"HTTP worker threads, i.e. requests served at once "
                             f"(default {DEFAULT_THREADS})")
    parser.add_argument("--max-running", type=_positive_int, default=None,
                        help="/execute requests served at once; more are refused with a 503 "
                             f"(default: --threads minus {CONTROL_THREADS}, at least 1; "
                             "must be less than --threads)")
    parser.add_argument("--timeout", type=float, default=k.DEFAULT_TIMEOUT,
                        help="seconds a cell may run when its request names no timeout; "
                             f"0 for no limit (default {k.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--max-output", type=_positive_int, default=k.DEFAULT_OUTPUT_LIMIT,
                        help="characters kept of each output stream and of the last "
                             f"expression's repr (default {k.DEFAULT_OUTPUT_LIMIT})")
    parser.add_argument("--max-body", type=_positive_int, default=DEFAULT_MAX_BODY,
                        help=f"largest JSON request body in bytes (default {DEFAULT_MAX_BODY})")
    parser.add_argument("--no-supervisor", action="store_true",
                        help="serve from this process alone: a cell that crashes it (a "
                             "segfault, os._exit, the OOM killer) ends the server. By default "
                             "a small parent process holds the socket and starts a new server "
                             "process at once, and the executions the crash ended say so")
    parser.add_argument("--in-memory", action="store_true",
                        help="keep states in memory only, as with --no-supervisor: cheaper "
                             "cells, but a cell that crashes the server process loses every "
                             "state but 'initial'")
    parser.add_argument("--max-import", type=_positive_int, default=DEFAULT_MAX_IMPORT,
                        help="largest archive PUT /states/<name> takes, in bytes "
                             f"(default {DEFAULT_MAX_IMPORT})")
    _add_connection_limits(parser)
    _add_kernel_options(parser)
    _add_sandbox_options(parser)
    args = parser.parse_args(argv)
    if not args.token:
        parser.error(f"no token: pass --token SECRET or set {TOKEN_ENV}")
    if args.in_memory and args.state_dir is not None:
        parser.error("--in-memory keeps no state directory: drop --state-dir (or "
                     f"${STATE_DIR_ENV}) or --in-memory")
    if args.no_sandbox and args.allow_network:
        parser.error("--allow-network opens the sandbox's network; --no-sandbox has no "
                     "sandbox: drop one of them")
    if args.max_running is None:
        args.max_running = max(1, args.threads - CONTROL_THREADS)
    if args.max_running >= args.threads:
        parser.error(f"--max-running ({args.max_running}) must be less than --threads "
                     f"({args.threads}), so that control requests always find a worker")
    return args


def _add_connection_limits(parser):
    parser.add_argument("--max-connections", type=_positive_int, default=DEFAULT_MAX_CONNECTIONS,
                        help="open connections at most; a new one displaces the one that has "
                             "waited longest for a request, or is refused with a 503 "
                             f"(default {DEFAULT_MAX_CONNECTIONS})")
    parser.add_argument("--max-header", type=_positive_int, default=DEFAULT_MAX_HEAD,
                        help="largest request line plus headers in bytes; more is a 414 or 431 "
                             f"(default {DEFAULT_MAX_HEAD})")
    parser.add_argument("--request-timeout", type=_positive_float,
                        default=DEFAULT_REQUEST_TIMEOUT,
                        help="seconds a client has to send a request line and headers, from "
                             "connecting or from the previous reply; also the longest pause "
                             f"allowed in a body (default {DEFAULT_REQUEST_TIMEOUT:g})")


def _add_sandbox_options(parser):
    parser.set_defaults(sandbox_dir=None)  # main() makes one in the supervisor (private_sandbox_dir)
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run cells with this process's rights: they can read and write "
                             "whatever its user may, open sockets and signal its processes. "
                             "By default a sandbox confines them (docs/security.md)")
    parser.add_argument("--allow-network", action="store_true",
                        help="let cells open outgoing network connections, which the sandbox "
                             "refuses by default (%%pip install needs it to reach the "
                             "package index); they still listen on no port")


def _add_kernel_options(parser):
    parser.set_defaults(private_dir=False)  # main() makes one in the supervisor (private_state_dir)
    parser.add_argument("--workdir", default=None,
                        help="the directory cells run in and /files serves; the server "
                             "changes into it at start (default: where it was started)")
    parser.add_argument("--max-file", type=_positive_int, default=DEFAULT_MAX_FILE,
                        help=f"largest file PUT /files stores, in bytes (default "
                             f"{DEFAULT_MAX_FILE})")
    parser.add_argument("--state-dir", default=os.environ.get(STATE_DIR_ENV) or None,
                        help="keep every state in this directory, written before the reply "
                             "that names it, and load the states it holds at start "
                             f"(default: ${STATE_DIR_ENV}; none: a private directory in "
                             "$TMPDIR, removed when the server stops, keeps the states across "
                             "a crash of a cell)")
    parser.add_argument("--max-memory", type=_positive_int, default=None,
                        help="bytes of stored objects kept in memory, with a state "
                             "directory; the least recently used are dropped and loaded again "
                             "on use (default: no limit)")
    parser.add_argument("--max-cell-memory", type=_whole, default=None,
                        help="bytes of anonymous memory the server process may hold while "
                             "cells run (its objects; not the pages of buffers states share "
                             "copy-on-write); past it, the running cells stop with a "
                             "MemoryError. 0: no limit (default: "
                             f"{memory.DEFAULT_SHARE * 100:.0f}%% of the machine's memory, or of the "
                             "memory cgroup's limit if lower)")
    parser.add_argument("--keep-results", type=_positive_float, default=DEFAULT_KEEP_SECONDS,
                        help="seconds a finished execution's record (status, reply, full "
                             f"output) is kept for GET /executions/<id> "
                             f"(default {DEFAULT_KEEP_SECONDS:g})")
    parser.add_argument("--max-image", type=_positive_int, default=k.DEFAULT_IMAGE_LIMIT,
                        help="largest image in an output, in bytes; a larger one becomes a "
                             f"note (default {k.DEFAULT_IMAGE_LIMIT})")
    parser.add_argument("--max-full-output", type=_positive_int,
                        default=capture.DEFAULT_FULL_LIMIT,
                        help="bytes of each stream's full text kept for "
                             "GET /executions/<id>/output when the reply was cut "
                             f"(default {capture.DEFAULT_FULL_LIMIT})")
    parser.add_argument("--copy-on-write", type=_positive_int, default=cow.THRESHOLD,
                        help="numpy buffers of this many bytes or more are mapped "
                             f"copy-on-write, not copied (default {cow.THRESHOLD})")
    parser.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                        help="leave what earlier cells made in the cyclic garbage "
                             "collector's reach (by default it is frozen once a cell ends "
                             "and the server is idle, so collections inside cells skip it)")


def private_state_dir(args):
    """The crash-safe default: without --state-dir or --in-memory, a supervised server keeps
    its states in a new directory of its own (``private_parent``), which the supervisor
    outlives a crash with and removes when it stops. Its path, set in ``args``; or None.

    The directory's name holds the supervisor's pid: one whose supervisor was killed
    (SIGKILL leaves no chance to clean up) is removed by the next server that starts."""
    if args.no_supervisor or args.in_memory or args.state_dir is not None:
        return None
    for place in {SHARED_MEMORY, tempfile.gettempdir()}:  # wherever the last one kept it
        _sweep_private_dirs(place)
    parent = private_parent(args.max_memory)
    args.state_dir = tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-", dir=parent)
    args.private_dir = True
    return args.state_dir


def private_parent(max_memory, environ=os.environ, shared_memory=None):
    """Where the private state directory goes: ``shared_memory`` (/dev/shm) if it is a
    memory file system with ``SHARED_MEMORY_ROOM`` free, else $TMPDIR's directory; $TMPDIR
    if it is set, and with --max-memory (which asks for stored objects out of memory).

    The directory only has to outlive the server process, not the machine, so memory
    will do; on a disk, a cell that makes a new large buffer waits for the disk: writing
    24 MB took 65 ms on this machine's ext4 once its dirty pages reached the disk's pace,
    and 7-10 ms on /dev/shm (docs/crashes.md)."""
    if max_memory is not None or environ.get("TMPDIR"):
        return tempfile.gettempdir()
    shared_memory = shared_memory or SHARED_MEMORY
    try:
        room = os.statvfs(shared_memory)
        memory = _is_memory_file_system(shared_memory)
    except OSError:
        return tempfile.gettempdir()
    writable = os.access(shared_memory, os.W_OK | os.X_OK)
    if memory and writable and room.f_bavail * room.f_frsize >= SHARED_MEMORY_ROOM:
        return shared_memory
    return tempfile.gettempdir()


def _is_memory_file_system(path):
    """Whether ``path`` is the mount point of a tmpfs (read from /proc/self/mounts)."""
    path, kind = os.path.realpath(path), None
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) >= 3 and fields[1] == path:
                kind = fields[2]  # the last mount on a point is the one seen: read them all
    return kind == "tmpfs"


def private_sandbox_dir(args):
    """The sandbox's private directory (its $TMPDIR, caches and, without a state directory,
    its packages: ``sandbox.policy.Places``), new in $TMPDIR, which the supervisor removes
    when it stops; its path, set in ``args``; or None with --no-sandbox. Named as
    ``private_state_dir``'s, and swept as they are."""
    if args.no_sandbox:
        return None
    parent = tempfile.gettempdir()
    _sweep_private_dirs(parent, SANDBOX_PREFIX)
    args.sandbox_dir = tempfile.mkdtemp(prefix=f"{SANDBOX_PREFIX}{os.getpid()}-", dir=parent)
    return args.sandbox_dir


def _sweep_private_dirs(parent, prefix=PRIVATE_PREFIX):
    """Remove this user's private directories named ``prefix...`` in ``parent`` whose
    server is gone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if not entry.name.startswith(prefix) or not pid.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or _alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def enter_workdir(args):
    """Change into ``--workdir`` (a relative --state-dir still names the directory it
    named from where the server started); the files it serves, as a ``Workdir``."""
    if args.state_dir is not None:
        args.state_dir = os.path.abspath(args.state_dir)
    if args.workdir is not None:
        try:
            os.chdir(args.workdir)
        except OSError as exc:
            raise SystemExit(f"snapshot-kernel: cannot work in --workdir {args.workdir!r} "
                             f"({exc.strerror})") from None
    return Workdir(os.getcwd(), args.max_file)


def journal_for(args, supervised):
    """``(journal, stop)``: where the server notes the executions it runs, and the
    ``crashes.Stop`` of those the last server on the same state directory left, or None.
    With a state directory, the journal is a file there, which outlives every process;
    without one, memory shared with the supervisor, or none for a server alone."""
    if args.state_dir is None:
        return (crashes.Journal() if supervised else None), None
    try:
        os.makedirs(args.state_dir, exist_ok=True)
        journal = crashes.Journal(path=os.path.join(args.state_dir, JOURNAL))
    except OSError as exc:
        raise SystemExit(f"snapshot-kernel: cannot use --state-dir {args.state_dir!r} "
                         f"({exc.strerror})") from None
    return journal, journal.left_over()


def kernel_from(args, crash=None, journal=None):
    """The SnapshotKernel the parsed ``args`` describe; in a supervised server process, told
    how the last one died (``crash``) and where to note running executions (``journal``)."""
    return k.SnapshotKernel(timeout=args.timeout or None, output_limit=args.max_output,
                            image_limit=args.max_image, keep_results=args.keep_results,
                            full_output_limit=args.max_full_output,
                            copy_on_write=args.copy_on_write, state_dir=args.state_dir,
                            max_memory=args.max_memory, crash=crash, journal=journal,
                            private_dir=args.private_dir,
                            max_cell_memory=cell_memory_limit(args.max_cell_memory),
                            workdir=os.getcwd(),  # (enter_workdir went there)
                            gc_freeze=args.gc_freeze)  # (the process is the kernel's)


def cell_memory_limit(flag):
    """The kernel's ``max_cell_memory`` for ``--max-cell-memory``: None (the flag's
    absence) is the default share of the machine's memory, 0 no limit."""
    if flag is None:
        return memory.default_limit()
    return flag or None


def _whole(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes, got {text!r}")
    return int(text)


def _host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


