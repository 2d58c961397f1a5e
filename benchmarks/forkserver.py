"""A minimal fork-based snapshot server: the copy-on-write baseline of ``bigdata.py``.

    FORKSERVER_TOKEN=SECRET python benchmarks/forkserver.py --bind 127.0.0.1:0

Every state is a paused process holding its namespace. ``POST /execute
{"code", "state_name", "new_state_name"?, "timeout"?}`` asks the state's process
to fork: the child runs the cell on its copy-on-write copy of the namespace and
replies; on success it stays alive as the new state's process, on error it
exits. Pages nobody writes stay shared by the OS. ``GET /states`` lists the
states. SIGINT or SIGTERM stops the server and every state process. Served by
Bottle + Cheroot, like the product. Linux only (``prctl``, ``SCM_RIGHTS``).

It is the reference for copy-on-write, not part of the product, and not a
sandbox: no interrupts, no output limits, no deletion. Replies have the
product's shape (``output``, ``error``, ``state_name``, ``parent``), with whole
tracebacks.

Processes and channels. The HTTP process forks the ``initial`` state's process
before it starts any thread, since forking a threaded process is unsafe. It
holds one end of a socketpair per state; the state's process holds the other.
To execute, the server makes a new socketpair, sends one end to the source
state's process over SCM_RIGHTS, then the code. That process forks; the child
keeps the new end as its channel and closes its parent's. Each state process
is killed when its parent process dies (``PR_SET_PDEATHSIG``), so killing the
HTTP process takes every state with it, even by SIGKILL.
"""

import argparse
import ast
import builtins
import ctypes
import gc
import hmac
import io
import itertools
import json
import os
import signal
import socket
import struct
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Optional

import bottle
import cheroot.wsgi

TOKEN_ENV = "FORKSERVER_TOKEN"
DEFAULT_TIMEOUT = 600.0
INITIAL = "initial"
_LENGTH = struct.Struct("!Q")
_PR_SET_PDEATHSIG = 1

# -- the channel: length-prefixed JSON frames ----------------------------------------


def send_frame(sock, obj):
    """Send ``obj`` as one length-prefixed JSON frame."""
    data = json.dumps(obj).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_frame(sock):
    """The next frame's object; EOFError if the peer closed the channel first."""
    (size,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    return json.loads(_recv_exactly(sock, size))


def _recv_exactly(sock, size):
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError("the channel closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# -- inside a state's process ------------------------------------------------------------


def start_initial():
    """Fork the ``initial`` state's process; return ``(pid, server end of its channel)``."""
    ours, theirs = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        theirs.close()
        return pid, ours
    ours.close()
    become_state_process(parent)
    serve_state(theirs, {"__name__": "__main__", "__doc__": None, "__builtins__": builtins})


def become_state_process(parent):
    """Die with ``parent``; leave Ctrl-C to the server, which stops every state."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(1)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def serve_state(channel, namespace):
    """Be a state's process: fork a child per request on ``channel``; never returns.

    A child that ran its cell successfully goes on in this same loop as the new
    state's process; one whose cell failed exits.
    """
    children = set()
    while True:
        _reap(children)
        try:
            marker, fds, _, _ = socket.recv_fds(channel, 1, 1)
            code = recv_frame(channel)["code"] if marker else None
        except (OSError, EOFError):  # the server is gone: so is this state
            code = None
        if code is None:
            os._exit(0)
        gc.freeze()  # the children's collector must not touch (so copy) the state's objects
        parent = os.getpid()
        pid = os.fork()
        if pid:
            os.close(fds[0])
            children.add(pid)
            continue
        become_state_process(parent)
        channel.close()
        channel, children = socket.socket(fileno=fds[0]), set()
        try:
            succeeded = run_and_reply(channel, namespace, code)
        except OSError:  # the server went away while the cell ran
            succeeded = False
        if not succeeded:
            os._exit(0)


def _reap(children):
    """Collect the exit status of children that have ended (failed cells)."""
    for pid in list(children):
        if os.waitpid(pid, os.WNOHANG)[0]:
            children.discard(pid)


def run_and_reply(channel, namespace, code):
    """Send this process's pid, run the cell, send the reply; True if the cell succeeded."""
    send_frame(channel, {"pid": os.getpid()})
    output, error = run_cell(code, namespace)
    send_frame(channel, {"output": output, "error": error})
    return error is None


def run_cell(code, namespace):
    """Run ``code`` in ``namespace`` as a notebook cell: ``(Jupyter-shaped outputs, error)``."""
    streams = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = streams["stdout"], streams["stderr"]
    shown = error = None
    try:
        value = _execute(code, namespace)
        shown = None if value is None else repr(value)
    except BaseException as exc:  # the user-code boundary: whatever the cell raises is its error
        error = {"ename": type(exc).__name__, "evalue": str(exc),
                 "traceback": traceback.format_exception(type(exc), exc, _cell_frames(exc))}
    finally:
        sys.stdout, sys.stderr = saved
    output = [{"output_type": "stream", "name": name, "text": stream.getvalue()}
              for name, stream in streams.items() if stream.getvalue()]
    if shown is not None:
        output.append({"output_type": "execute_result", "data": {"text/plain": shown}})
    if error is not None:
        output.append({"output_type": "error", **error})
    return output, error


def _cell_frames(exc):
    """The traceback from the cell's first frame on, without this server's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    return tb


def _execute(code, namespace):
    """Exec ``code``; return the value of its last statement if that is an expression."""
    tree = ast.parse(code, "<cell>", "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    return None


# -- in the HTTP process ------------------------------------------------------------------


class UnknownState(LookupError):
    pass


class StateExists(ValueError):
    pass


@dataclass
class StateProcess:
    """A state's paused process and the server's end of its channel."""

    pid: int
    channel: socket.socket
    parent: Optional[str]
    lock: threading.Lock = field(default_factory=threading.Lock)  # one request on it at a time


class ForkStates:
    """The state table. Its lock guards only the table; forks and cells run outside it."""

    def __init__(self):
        pid, channel = start_initial()  # first: this process has no other thread yet
        self._initial_pid = pid
        self._states = {INITIAL: StateProcess(pid, channel, None)}
        self._reserved = set()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def names(self):
        with self._lock:
            return list(self._states)

    def execute(self, code, state_name, new_state_name=None, timeout=DEFAULT_TIMEOUT):
        """Run ``code`` in a fork of ``state_name``; keep the child as a state if it succeeds."""
        source, name = self._reserve(state_name, new_state_name)
        try:
            pid, channel, reply = self._fork_and_run(source, code, timeout)
            if reply["error"] is None:
                with self._lock:
                    self._states[name] = StateProcess(pid, channel, state_name)
            else:
                channel.close()
        finally:
            with self._lock:
                self._reserved.discard(name)
        return {**reply, "state_name": name if reply["error"] is None else None,
                "parent": state_name}

    def _reserve(self, state_name, new_state_name):
        with self._lock:
            if state_name not in self._states:
                raise UnknownState(f"no state named {state_name!r}; GET /states lists them")
            name = new_state_name
            while name is None or (new_state_name is None and self._taken(name)):
                name = f"state-{next(self._numbers)}"
            if self._taken(name):
                raise StateExists(f"a state named {name!r} exists already")
            self._reserved.add(name)
            return self._states[state_name], name

    def _taken(self, name):
        return name in self._states or name in self._reserved

    def _fork_and_run(self, source, code, timeout):
        """``(child pid, channel, reply)`` for ``code`` run in a fork of ``source``."""
        ours, theirs = socket.socketpair()
        pid = None
        try:
            with source.lock:
                socket.send_fds(source.channel, [b"F"], [theirs.fileno()])
                send_frame(source.channel, {"code": code})
            theirs.close()
            ours.settimeout(timeout)
            pid = recv_frame(ours)["pid"]
            return pid, ours, recv_frame(ours)
        except socket.timeout:
            if pid is not None:
                with source.lock:  # the source reaps children only under this lock: pid is ours
                    os.kill(pid, signal.SIGKILL)
            return pid, ours, _kernel_error(
                "TimeoutError", f"the cell ran past its {timeout:g} s timeout and was killed")
        except (EOFError, OSError) as exc:  # the child (or the source) died without replying
            return pid, ours, _kernel_error("ProcessDied", f"the cell's process died: {exc!r}")
        finally:
            theirs.close()

    def close(self):
        """Kill every state process: the initial one, and the rest follow by PDEATHSIG."""
        os.kill(self._initial_pid, signal.SIGKILL)
        os.waitpid(self._initial_pid, 0)
        with self._lock:
            for state in self._states.values():
                state.channel.close()


def _kernel_error(ename, evalue):
    error = {"ename": ename, "evalue": evalue, "traceback": []}
    return {"output": [{"output_type": "error", **error}], "error": error}


# -- HTTP -------------------------------------------------------------------------------------

EXECUTE_FIELDS = {"code": str, "state_name": str, "new_state_name": (str, type(None)),
                  "timeout": (int, float, type(None))}


def create_app(states, token):
    """A Bottle app serving ``states`` to clients that send ``Authorization: Bearer token``."""
    app = bottle.Bottle()
    app.default_error_handler = _json_error
    expected = token.encode("utf-8")
    app.add_hook("before_request", lambda: _authorize(expected))

    @app.post("/execute")
    def execute():
        body = _execute_body()
        try:
            return states.execute(body["code"], body["state_name"], body.get("new_state_name"),
                                  body.get("timeout") or DEFAULT_TIMEOUT)
        except UnknownState as exc:
            raise bottle.HTTPError(404, str(exc)) from None
        except StateExists as exc:
            raise bottle.HTTPError(409, str(exc)) from None

    @app.get("/states")
    def list_states():
        return {"states": states.names()}

    return app


def _authorize(expected):
    scheme, _, value = bottle.request.environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    presented = value.strip().encode("latin-1", "replace")  # WSGI passes headers as latin-1
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented, expected):
        raise bottle.HTTPError(401, "missing or wrong token: send 'Authorization: Bearer <token>'")


def _execute_body():
    try:
        body = json.loads(bottle.request.body.read())
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        raise bottle.HTTPError(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict) or set(body) - set(EXECUTE_FIELDS):
        raise bottle.HTTPError(400, f"send a JSON object with fields {', '.join(EXECUTE_FIELDS)}")
    for name, types in EXECUTE_FIELDS.items():
        if not isinstance(body.get(name), types) or isinstance(body.get(name), bool):
            raise bottle.HTTPError(400, f"field {name!r} is missing or of the wrong type")
    return body


def _json_error(error):
    bottle.response.content_type = "application/json"
    return json.dumps({"error": error.body if isinstance(error.body, str) else error.status_line})


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bind", default="127.0.0.1:8081",
                        help="HOST:PORT (port 0 picks a free one, printed on stderr)")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                        help=f"the secret clients must send (default ${TOKEN_ENV})")
    parser.add_argument("--threads", type=int, default=16, help="HTTP worker threads")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error(f"no token: pass --token SECRET or set {TOKEN_ENV}")
    host, _, port = args.bind.rpartition(":")
    args.bind = (host.strip("[]"), int(port))
    return args


def main(argv=None):
    args = parse_args(argv)
    states = ForkStates()
    server = cheroot.wsgi.Server(args.bind, create_app(states, args.token),
                                 numthreads=args.threads, server_name="forkserver")
    server.prepare()
    host, port = server.bind_addr[:2]
    print(f"forkserver listening on http://{host}:{port}", file=sys.stderr, flush=True)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    serving = threading.Thread(target=server.serve, name="forkserver serve", daemon=True)
    serving.start()
    try:
        while serving.is_alive() and not stopping.wait(0.5):
            pass
    finally:
        states.close()  # first: requests waiting on cells then answer, and stop() can join
        server.stop()


if __name__ == "__main__":
    main()
