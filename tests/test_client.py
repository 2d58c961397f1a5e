"""snapshot_kernel.client against a real server on a loopback port: every method, every
exception type, keep-alive, and files streamed both ways."""

import http.server
import io
import os
import shutil
import socket
import socketserver
import threading
import time

import pytest

from helpers import WAIT
from snapshot_kernel import client as client_module
from snapshot_kernel.client import (BadRequest, Busy, Client, ClientError, Conflict, NotFound,
                                    TooLarge, Unauthorized)
from test_server import TOKEN, Server, start_server  # noqa: F401

MAX_FILE = 1_000_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module: a working directory of its own, files up to MAX_FILE,
    one request at a time that waits on a cell, idle connections closed after 1 s."""
    work = tmp_path_factory.mktemp("served")
    server = Server(TOKEN, ["--workdir", str(work), "--max-file", str(MAX_FILE),
                            "--threads", "4", "--max-running", "1", "--request-timeout", "1"])
    server.wait_until_listening()
    yield server, work
    server.stop()


@pytest.fixture
def kernel(served):
    """A client of the module's server; its states and files are cleared after each test."""
    with Client(f"http://127.0.0.1:{served[0].port}", TOKEN, timeout=WAIT) as client:
        yield client
        client.reset()
    for entry in served[1].iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


@pytest.fixture
def work(served):
    return served[1]


def wait_cell(path):
    """A cell that waits (bounded) until ``path`` exists, then gives 42."""
    return (f"import os, time\nend = time.monotonic() + {WAIT}\n"
            f"while not os.path.exists({str(path)!r}) and time.monotonic() < end:\n"
            "    time.sleep(0.02)\n6 * 7")


# -- executions ------------------------------------------------------------------------

def test_execute_waits_for_the_reply_and_names_the_new_state(kernel):
    reply = kernel.execute("x = 41\nprint(x + 1)", new_state_name="one", exec_id="first",
                           timeout=5, max_output=100)
    assert (reply["state_name"], reply["exec_id"], reply["parent"]) == ("one", "first",
                                                                       "initial")
    assert reply["output"] == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]
    assert kernel.execute("x + 1", "one")["output"][0]["data"]["text/plain"] == "42"


def test_a_cell_that_raises_is_a_reply_not_an_exception(kernel):
    reply = kernel.execute("1 / 0")
    assert reply["error"]["ename"] == "ZeroDivisionError" and reply["state_name"] is None


def test_a_job_started_without_waiting_is_followed_to_its_end(kernel, tmp_path):
    started = kernel.execute(wait_cell(tmp_path / "go"), wait=False, exec_id="job")
    assert started == {"exec_id": "job", "status": "running", "location": "/executions/job"}
    running = kernel.execution("job", wait=0.1)
    assert (running["status"], running["reply"]) == ("running", None)
    assert [run["exec_id"] for run in kernel.executions()["executions"]] == ["job"]
    (tmp_path / "go").touch()
    done = kernel.execution("job", wait=WAIT)
    assert done["status"] == "completed"
    assert done["reply"]["output"][0]["data"]["text/plain"] == "42"
    assert kernel.executions()["finished"][0]["exec_id"] == "job"


def test_a_wait_longer_than_the_server_allows_is_several_polls(kernel, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_POLL", 0.2)
    kernel.execute("import time\ntime.sleep(1)", wait=False, exec_id="slow")
    assert kernel.execution("slow", wait=WAIT)["status"] == "completed"


def test_a_cut_stream_is_read_in_pages(kernel):
    reply = kernel.execute("print('x' * 300)", exec_id="loud", max_output=50)
    assert "stdout" in reply["truncated"]
    page = kernel.output("loud", offset=290, limit=1000)
    assert (page["text"], page["total"], page["complete"]) == ("x" * 10 + "\n", 301, True)
    assert kernel.output("loud", "stderr")["text"] == ""


def test_interrupt_stops_a_running_cell(kernel):
    kernel.execute("import time\nwhile True: time.sleep(0.01)", wait=False, exec_id="spin")
    assert kernel.interrupt("spin") == {"interrupted": "spin"}
    assert kernel.execution("spin", wait=WAIT)["status"] == "interrupted"


# -- states ------------------------------------------------------------------------------

def test_states_are_listed_described_diffed_deleted_and_reset(kernel):
    kernel.execute("x = 1", new_state_name="a b?c%")  # a name that URLs would mangle
    kernel.execute("x = 2\ny = 'y'", "a b?c%", new_state_name="d#e")
    assert kernel.states() == {"states": ["initial", "a b?c%", "d#e"]}
    assert kernel.describe("d#e")["variables"]["y"] == {"type": "str", "repr": "'y'"}
    diff = kernel.diff("a b?c%", "d#e")
    assert (set(diff["added"]), set(diff["changed"]), diff["removed"]) == ({"y"}, {"x"}, {})
    assert kernel.delete("a b?c%") == {"deleted": "a b?c%"}
    assert kernel.execute("x = 3", store=False)["state_name"] is None
    kernel.execute("f = 1", "d#e", new_state_name="f")
    assert [(e["name"], e["depth"]) for e in kernel.states(tree=True)["states"]] == [
        ("initial", 0), ("d#e", 0), ("f", 1)]  # d#e's parent is gone: it is a root
    assert kernel.delete("d#e", descendants=True) == {"deleted": "d#e", "descendants": ["f"]}
    assert kernel.reset() == {"states": ["initial"]}
    assert kernel.states() == {"states": ["initial"]}


# -- the exceptions ------------------------------------------------------------------------

REFUSALS = {
    "unknown state": (lambda k: k.describe("nope"), NotFound, 404, "no state named 'nope'"),
    "diff with an unknown state": (lambda k: k.diff("initial", "nope"), NotFound, 404, "nope"),
    "unknown execution": (lambda k: k.execution("nope"), NotFound, 404, "no execution"),
    "interrupt nothing": (lambda k: k.interrupt("nope"), NotFound, 404, "no running"),
    "run on an unknown state": (lambda k: k.execute("1", "nope"), NotFound, 404, "nope"),
    "a name taken": (lambda k: k.execute("1", new_state_name="initial"), Conflict, 409,
                     "already exists"),
    "delete initial": (lambda k: k.delete("initial"), Conflict, 409, "cannot be deleted"),
    "a bad timeout": (lambda k: k.execute("1", timeout=-1), BadRequest, 400, "timeout"),
    "a bad name": (lambda k: k.execute("1", new_state_name=" x"), BadRequest, 400, "whitespace"),
    "a bad stream": (lambda k: k.output("x", "stdin"), BadRequest, 400, "stdout or stderr"),
    "a missing file": (lambda k: k.read_file("nope.txt"), NotFound, 404, "no file"),
    "a path outside": (lambda k: k.upload("../x", b"x"), BadRequest, 400, ".."),
    "delete a missing file": (lambda k: k.delete_file("nope"), NotFound, 404, "no file"),
    "list a missing directory": (lambda k: k.list_files("nope"), NotFound, 404, "no file"),
    "a file too large": (lambda k: k.upload("big", b"x" * (MAX_FILE + 1)), TooLarge, 413,
                         "--max-file"),
}


@pytest.mark.parametrize("act, kind, status, words", REFUSALS.values(), ids=REFUSALS)
def test_an_error_reply_is_the_exception_of_its_status_with_the_servers_message(
        kernel, act, kind, status, words):
    with pytest.raises(kind) as raised:
        act(kernel)
    assert isinstance(raised.value, ClientError)
    assert raised.value.status == status and words in raised.value.message
    assert str(raised.value) == raised.value.message


def test_a_wrong_token_is_unauthorized(served):
    with Client(f"http://127.0.0.1:{served[0].port}", "not-the-token") as wrong:
        with pytest.raises(Unauthorized, match="missing or wrong token") as raised:
            wrong.states()
    assert raised.value.status == 401


def test_past_max_running_a_waiting_execute_is_busy_and_a_long_poll_falls_back(
        kernel, served, tmp_path):
    holding = threading.Thread(target=kernel.execute, args=(wait_cell(tmp_path / "go"),),
                               kwargs={"exec_id": "hold"})
    holding.start()
    deadline = time.monotonic() + WAIT
    while not kernel.executions()["executions"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with pytest.raises(Busy, match="--max-running") as raised:
        kernel.execute("1")
    assert raised.value.status == 503
    assert kernel.execution("hold", wait=0.3)["status"] == "running"  # polled without a slot
    (tmp_path / "go").touch()
    holding.join(WAIT)


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers every request 418 with a body that is not the API's, and records paths."""

    paths = []

    def do_GET(self):
        self.paths.append(self.path)
        self.send_response(418)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"teapot"[:5])

    def log_message(self, *args):
        pass


def test_another_status_and_body_is_a_plain_client_error_and_a_path_prefix_is_kept():
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=fake.serve_forever, args=(0.01,), daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{fake.server_port}/kernels/7/", TOKEN) as behind:
            with pytest.raises(ClientError) as raised:
                behind.describe("a b")
    finally:
        fake.shutdown()
        fake.server_close()
    assert type(raised.value) is ClientError and raised.value.status == 418
    assert raised.value.message == "the server answered 418 I'm a Teapot"
    assert _Fake.paths == ["/kernels/7/states/a%20b"]


def test_a_server_that_is_not_there_is_an_os_error():
    with Client("http://127.0.0.1:9", TOKEN) as nowhere:  # the discard port: not listening
        with pytest.raises(OSError):
            nowhere.states()


def test_a_url_that_is_not_http_is_refused():
    with pytest.raises(ValueError, match="http:// or https://"):
        Client("ftp://host", TOKEN)


# -- a reply lost with its connection ----------------------------------------------------------

def test_a_cell_that_crashes_the_server_process_gets_the_crash_as_its_reply(start_server):
    server = start_server()  # as a user starts it: a supervisor, states in a private directory
    with Client(f"http://127.0.0.1:{server.port}", TOKEN, timeout=WAIT) as kernel:
        kernel.execute("x = 41", new_state_name="before")
        reply = kernel.execute("import os\nos._exit(7)", "before")
        assert (reply["state_name"], reply["error"]["ename"]) == (None, "KernelCrash")
        assert "exited with status 7" in reply["error"]["evalue"]
        record = kernel.execution(reply["exec_id"])
        assert (record["status"], record["crash"]["exit_status"]) == ("crashed", 7)
        named = kernel.execute("import ctypes\nctypes.string_at(0)", "before", exec_id="segv")
        assert named["exec_id"] == "segv" and "SIGSEGV" in named["error"]["evalue"]
        assert kernel.execute("x + 1", "before")["output"][-1]["data"]["text/plain"] == "42"


class _HangUp(socketserver.BaseRequestHandler):
    """Reads a request and closes the connection without a reply."""

    requests = []

    def handle(self):
        self.requests.append(self.request.recv(65536).split(b"\r\n", 1)[0])


def test_a_hang_up_before_the_server_knows_the_execution_is_raised():
    fake = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HangUp)
    threading.Thread(target=fake.serve_forever, args=(0.01,), daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{fake.server_address[1]}", TOKEN) as nowhere:
            with pytest.raises(ConnectionError):
                nowhere.execute("1 + 1", exec_id="e1")
    finally:
        fake.shutdown()
        fake.server_close()
    assert _HangUp.requests == [b"POST /execute HTTP/1.1",  # then the lookup, which fails too
                                b"GET /executions/e1?wait=60.000 HTTP/1.1"]


def test_a_proxy_hanging_up_under_a_cell_gets_the_servers_reply(served, tmp_path):
    """The server interrupts a cell whose client left; the client hears how it ended."""
    proxy = _DroppingProxy(served[0].port, after=0.5)
    try:
        with Client(f"http://127.0.0.1:{proxy.port}", TOKEN, timeout=WAIT) as behind:
            reply = behind.execute(wait_cell(tmp_path / "never"), exec_id="dropped")
            record = behind.execution("dropped")
    finally:
        proxy.close()
    assert reply["error"]["ename"] == "KeyboardInterrupt" and reply["exec_id"] == "dropped"
    assert (record["status"], record["interrupt_reason"]) == ("interrupted", "disconnect")


class _DroppingProxy:
    """Forwards connections to ``port``; the first one it closes ``after`` s."""

    def __init__(self, port, after):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port, self.upstream, self.after = self.listener.getsockname()[1], port, after
        self.connections = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.connections += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=_pipe, args=(source, target), daemon=True).start()
            if len(self.connections) == 2:
                threading.Timer(self.after, _close, (client, server)).start()

    def close(self):
        self.listener.close()
        _close(*self.connections)


def _pipe(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:  # one side was closed
        pass
    _close(source, target)


def _close(*sockets):
    for each in sockets:
        try:
            each.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        each.close()


# -- the connection ------------------------------------------------------------------------

def wait_until_the_server_closes(sock):
    """Return once the server has closed ``sock``, which it does after --request-timeout
    (1 s) idle, checked every half second or so: a fixed sleep was once too short on CI."""
    deadline = time.monotonic() + WAIT
    while not client_module._closed_by_peer(sock):
        assert time.monotonic() < deadline, "the server kept an idle connection open"
        time.sleep(0.05)


def test_a_get_meeting_a_closed_connection_is_sent_again(kernel, monkeypatch):
    kernel.states()
    wait_until_the_server_closes(kernel._local.conn.sock)
    monkeypatch.setattr(client_module, "_closed_by_peer", lambda sock: False)  # not seen
    assert kernel.states() == {"states": ["initial"]}


def test_calls_share_one_connection_and_survive_the_server_closing_it(kernel):
    kernel.states()
    first = kernel._local.conn.sock
    kernel.states()
    assert kernel._local.conn.sock is first
    wait_until_the_server_closes(first)
    assert kernel.execute("1 + 1")["error"] is None  # a POST is never sent twice: it must
    assert kernel._local.conn.sock is not first      # see the closed connection first


def test_each_thread_has_its_own_connection(kernel):
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(kernel.states()))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert answers == [{"states": ["initial"]}] * 3


# -- files -----------------------------------------------------------------------------------

class _Pipe(io.RawIOBase):
    """A stream that cannot say its length: it goes up chunked."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._data.readinto(buffer)


SOURCES = {
    "bytes": lambda data, tmp: data,
    "a local file's name": lambda data, tmp: _local(tmp, data),
    "a file object": lambda data, tmp: open(_local(tmp, data), "rb"),
    "a stream of unknown length": lambda data, tmp: _Pipe(data),
}


def _local(tmp, data):
    path = tmp / "local.bin"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES)
def test_upload_takes_bytes_files_and_streams(kernel, work, tmp_path, source):
    data = os.urandom(300_000)
    assert kernel.upload("up/data.bin", source(data, tmp_path)) == {"name": "up/data.bin",
                                                                    "size": len(data)}
    assert (work / "up" / "data.bin").read_bytes() == data
    assert kernel.read_file("up/data.bin") == data
    kernel.delete_file("up/data.bin")
    kernel.delete_file("up")


def test_a_file_object_goes_up_from_where_it_stands(kernel, work, tmp_path):
    with open(_local(tmp_path, b"skip-this|keep this"), "rb") as source:
        source.seek(10)
        assert kernel.upload("rest.txt", source)["size"] == 9
    assert (work / "rest.txt").read_bytes() == b"keep this"


def test_download_writes_a_local_file_or_a_file_object(kernel, work, tmp_path):
    (work / "plot.png").write_bytes(b"\x89PNG" + bytes(100_000))
    copied = kernel.download("plot.png", tmp_path / "here.png")
    assert copied == {"name": "plot.png", "size": 100_004, "content_type": "image/png"}
    assert (tmp_path / "here.png").read_bytes() == (work / "plot.png").read_bytes()
    assert not (tmp_path / "here.png.part").exists()
    buffer = io.BytesIO()
    assert kernel.download("plot.png", buffer)["size"] == 100_004
    assert buffer.getvalue() == (work / "plot.png").read_bytes()


def test_a_failed_download_leaves_no_local_file(kernel, tmp_path):
    with pytest.raises(NotFound):
        kernel.download("nope.png", tmp_path / "here.png")
    assert os.listdir(tmp_path) == []


def test_a_file_opened_and_left_half_read_costs_only_its_connection(kernel, work):
    (work / "big.txt").write_bytes(b"a" * 500_000)
    with kernel.open_file("big.txt") as remote:
        assert (remote.size, remote.content_type) == (500_000, "text/plain")
        assert remote.read(10) == b"a" * 10
    assert kernel.list_files()["files"][0]["name"] == "big.txt"  # on a new connection


def test_directories_are_listed_and_deleted_when_empty(kernel, work):
    kernel.upload("dir/sub/a.txt", b"a")
    assert [item["name"] for item in kernel.list_files("dir")["files"]] == ["sub"]
    assert kernel.list_files("dir/sub/")["files"][0]["size"] == 1
    with pytest.raises(Conflict, match="not empty"):
        kernel.delete_file("dir")
    assert kernel.delete_file("dir/sub/a.txt") == {"deleted": "dir/sub/a.txt"}
    assert kernel.delete_file("dir/sub") == {"deleted": "dir/sub"}
    assert kernel.delete_file("dir") == {"deleted": "dir"}


def test_a_large_file_object_over_the_limit_is_refused_and_the_413_is_heard(kernel, work):
    with pytest.raises(TooLarge, match="--max-file"):
        kernel.upload("huge.bin", io.BytesIO(bytes(30 * MAX_FILE)))
    assert "huge.bin" not in os.listdir(work)
    assert kernel.states() == {"states": ["initial"]}  # the client carries on


def test_the_module_reads_only_the_standard_library():
    import ast
    import sys
    tree = ast.parse(open(client_module.__file__).read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0}
    stdlib = getattr(sys, "stdlib_module_names", imported)  # 3.10+
    assert imported <= set(stdlib), imported - set(stdlib)
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.level > 0]


def test_a_state_exported_to_a_file_imports_as_a_new_state(kernel, tmp_path):
    kernel.execute("import numpy as np\nbig = np.arange(300_000)\ndef total():\n"
                   "    return int(big.sum())", new_state_name="to-move")
    archive = tmp_path / "to-move.tar"
    exported = kernel.export_state("to-move", archive)
    assert exported["size"] == archive.stat().st_size and exported["size"] > 2_400_000
    assert exported["content_type"] == "application/x-tar"
    with open(archive, "rb") as opened:
        reply = kernel.import_state("moved", opened)
    assert reply["imported"] == "moved" and reply["original"]["name"] == "to-move"
    assert kernel.execute("total()", "moved")["output"][-1]["data"]["text/plain"] == \
        str(sum(range(300_000)))
    with pytest.raises(Conflict, match="already exists"):
        kernel.import_state("moved", archive)
    with pytest.raises(BadRequest, match="not a state archive|damaged|truncated"):
        kernel.import_state("broken", archive.read_bytes()[:5000])
    with pytest.raises(NotFound):
        kernel.export_state("no-such-state", io.BytesIO())
    assert "broken" not in kernel.states()["states"]
