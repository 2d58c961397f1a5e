"""The real server as a user starts it: a subprocess on a real socket, stdlib clients only."""

import atexit
import http.client
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"
TOKEN = "server-test-token"
LISTENING = re.compile(r"snapshot-kernel listening on http://(\S+):(\d+)")
TIMEOUT = 10  # seconds: the bound on every wait, so a hung server fails instead of hanging
# The servers' $TMPDIR, where each keeps its private state directory (the crash-safe default):
# a server the suite kills with SIGKILL cannot remove its own, so the suite removes them all.
SERVER_TMPDIR = tempfile.mkdtemp(prefix="snapshot-kernel-tests-")
atexit.register(shutil.rmtree, SERVER_TMPDIR, True)


def _default_sigint():
    """Let SIGINT reach the server even if this suite was started with it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def server_env(token):
    env = {name: value for name, value in os.environ.items() if name != TOKEN_ENV}
    env["TMPDIR"] = SERVER_TMPDIR
    if token is not None:
        env[TOKEN_ENV] = token
    return env


class Server:
    """A running ``python -m snapshot_kernel.main`` and the lines of its stderr."""

    def __init__(self, token, flags=(), cwd=None, env=None):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0", *flags],
            env={**server_env(token), **(env or {})}, cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, encoding="utf-8",
            errors="replace", preexec_fn=_default_sigint)
        self.lines = queue.Queue()
        self.port = None
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_until_listening(self):
        deadline = time.monotonic() + TIMEOUT
        while self.port is None:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the server did not say where it listens within {TIMEOUT} s")
            assert line is not None, "the server exited without saying where it listens"
            match = LISTENING.search(line)
            if match:
                self.port = int(match.group(2))

    def connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(TIMEOUT)


@pytest.fixture
def start_server(tmp_path):
    """Start servers with ``start_server(token, flags)``; every one is killed at teardown.
    They work in ``tmp_path``: the sandbox lets cells write the files tests wait for there."""
    servers = []

    def start(token=TOKEN, flags=()):
        servers.append(Server(token, flags, cwd=tmp_path))
        servers[-1].wait_until_listening()
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def server(start_server):
    return start_server()


def call(conn, method, path, body=None, authorization=f"Bearer {TOKEN}"):
    """One request on ``conn``; returns ``(status, decoded JSON body)``."""
    headers = {"Authorization": authorization} if authorization else {}
    data = json.dumps(body).encode("utf-8") if body is not None else None
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def execute(server, code, **fields):
    return call(server.connect(), "POST", "/execute",
                {"code": code, "state_name": "initial", **fields})


def in_background(fn, *args):
    """Run ``fn(*args)`` in a daemon thread; the list gets its result, or its connection error."""
    outcome = []

    def run():
        try:
            outcome.append(fn(*args))
        except (OSError, http.client.HTTPException) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def wait_for(predicate, what):
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_execute_over_http_stores_a_state(server):
    status, reply = execute(server, "x = 6 * 7\nprint(x)", new_state_name="answer")
    assert status == 200
    assert reply["output"] == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]
    status, state = call(server.connect(), "GET", "/states/answer")
    assert (status, state["variables"]["x"]["repr"]) == (200, "42")


def test_one_keep_alive_connection_serves_several_requests(server):
    conn = server.connect()
    assert call(conn, "POST", "/execute", {"code": "x = 1", "state_name": "initial",
                                            "new_state_name": "a"})[0] == 200
    sock = conn.sock
    assert call(conn, "GET", "/states/nope")[0] == 404
    assert call(conn, "GET", "/states") == (200, {"states": ["initial", "a"]})
    assert call(conn, "DELETE", "/states/a") == (200, {"deleted": "a"})
    assert conn.sock is sock  # no reconnect: every reply left the connection usable


def test_interrupt_stops_a_running_cell_and_the_server_carries_on(server, tmp_path):
    started = tmp_path / "started"
    code = f"print('before the loop')\nopen({str(started)!r}, 'w').close()\nwhile True: pass"
    runner, replies = in_background(lambda: execute(server, code, exec_id="spin"))
    wait_for(started.exists, "the cell to start its loop")
    assert call(server.connect(), "POST", "/interrupt", {"exec_id": "spin"}) == (
        200, {"interrupted": "spin"})
    runner.join(TIMEOUT)
    assert not runner.is_alive(), "no reply after the interrupt"
    [(status, reply)] = replies
    assert (status, reply["state_name"]) == (200, None)
    assert reply["error"]["ename"] == "KeyboardInterrupt"
    assert reply["output"][0] == {"output_type": "stream", "name": "stdout",
                                  "text": "before the loop\n"}
    assert call(server.connect(), "GET", "/states") == (200, {"states": ["initial"]})


EXITING_CELLS = {
    "sys.exit()": ("import sys\nsys.exit()", "SystemExit"),
    "sys.exit(3)": ("import sys\nsys.exit(3)", "SystemExit"),
    "raise SystemExit": ("raise SystemExit", "SystemExit"),
    "raise KeyboardInterrupt": ("raise KeyboardInterrupt", "KeyboardInterrupt"),
}


@pytest.mark.parametrize("code, ename", EXITING_CELLS.values(), ids=EXITING_CELLS)
def test_a_cell_that_exits_is_an_error_not_a_shutdown(server, code, ename):
    status, reply = execute(server, code)
    assert (status, reply["state_name"], reply["error"]["ename"]) == (200, None, ename)
    assert server.process.poll() is None
    assert call(server.connect(), "GET", "/states") == (200, {"states": ["initial"]})


def test_a_non_ascii_token_sent_as_utf8_bearer_is_accepted(start_server):
    server = start_server("s\u00e9cret-\u20ac")
    status, body = call(server.connect(), "GET", "/states",
                        authorization="Bearer s\u00e9cret-\u20ac".encode("utf-8"))
    assert (status, body) == (200, {"states": ["initial"]})


def test_a_state_name_is_read_from_the_path_as_the_client_sent_it(server):
    # Cheroot leaves '%2F' encoded and Bottle drops bytes that are not UTF-8; neither may
    # make a request name a state other than the one its path spells.
    conn = server.connect()
    for name in ("ab", "a%2Fb"):
        assert call(conn, "POST", "/execute", {"code": "x = 1", "state_name": "initial",
                                               "new_state_name": name})[0] == 200
    assert call(conn, "GET", "/states/a%252Fb")[1]["name"] == "a%2Fb"
    status, body = call(conn, "GET", "/states/a%2Fb")  # 'a/b': no such route
    assert status == 404 and "no route '/states/a/b'" in body["error"]
    status, body = call(conn, "DELETE", "/states/a%FFb")
    assert status == 400 and "not UTF-8" in body["error"]
    assert call(conn, "GET", "/states")[1]["states"] == ["initial", "ab", "a%2Fb"]


def test_without_a_token_the_server_exits_naming_the_variable():
    done = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0"],
                          env=server_env(None), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode != 0
    assert TOKEN_ENV in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_cleanly(server, signum):
    assert call(server.connect(), "GET", "/states")[0] == 200
    server.process.send_signal(signum)
    assert server.process.wait(3) == 0


def test_sigterm_stops_the_server_even_while_a_cell_runs(server, tmp_path):
    started = tmp_path / "started"
    code = f"open({str(started)!r}, 'w').close()\nwhile True: pass"
    in_background(execute, server, code)
    wait_for(started.exists, "the cell to start its loop")
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(5) == 0


def test_the_console_script_is_installed_and_has_help():
    script = Path(sys.executable).parent / "snapshot-kernel"
    assert script.is_file(), f"no console script at {script}"
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: snapshot-kernel")
    assert "--bind" in done.stdout and TOKEN_ENV in done.stdout


def test_a_connection_the_server_closed_counts_as_gone():
    """The deadlines thread asks whether a waiting cell's client left. After a reply that
    failed, Cheroot had closed the socket (its fd is -1): the question raised ValueError
    and ended the deadlines thread, so no cell's timeout held any more."""
    import socket
    from snapshot_kernel.web.server import client_gone
    left, right = socket.socketpair()
    with left, right:
        assert client_gone(left) is False
        right.close()
        assert client_gone(left) is True
        left.close()
        assert client_gone(left) is True


@pytest.mark.parametrize("flags", [(), ("--no-gc-freeze",)])
def test_a_server_keeps_what_earlier_cells_left_out_of_its_cells_collections(start_server,
                                                                              flags):
    # Once a cell ended and the server is idle, what the process holds is frozen out of the
    # cyclic collector's reach: a collection inside a later cell goes through what that
    # cell made, not every stored state's objects (0.7-1.1 s a full collection, in cells of
    # a clustering example). --no-gc-freeze leaves them in its reach.
    server = start_server(flags=flags)
    status, reply = execute(server, "rows = [[i] for i in range(200_000)]")
    assert status == 200 and reply["error"] is None
    state, seen = reply["state_name"], None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(0.3)  # idle: the sweeper settles what the cell left
        status, reply = execute(server, "import gc\nlen(gc.get_objects())", state_name=state,
                                store=False)
        seen = int(reply["output"][-1]["data"]["text/plain"])
        if flags or seen < 50_000:
            break
    assert (seen > 200_000) if flags else (seen < 50_000), seen
