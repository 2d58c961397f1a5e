"""snapshot_kernel.client against a real server on a loopback port: every method, its
typed reply and every exception type, files streamed both ways; each test runs with
``Client`` and with ``AsyncClient`` (``clients.py``). Connections and lost replies:
test_client_connections.py."""

import errno
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import clients
from helpers import WAIT
from snapshot_kernel.client import calls, sync
from snapshot_kernel.client import (BadRequest, Busy, CellFailed, ClientError, Conflict,
                                    ExecutionReply, NotFound, ProtocolError, TextReply, TimedOut,
                                    TooLarge, Unauthorized, Unreachable, UsageError)
from test_server import TOKEN, Server, start_server  # noqa: F401

MAX_FILE = 1_000_000


@pytest.fixture(scope="module", params=clients.KINDS)
def served(request, tmp_path_factory):
    """One server for the module's tests with each kind of client (an exec_id whose record
    is kept cannot be sent again): a working directory of its own, files up to MAX_FILE,
    one request at a time that waits on a cell, idle connections closed after 1 s."""
    work = tmp_path_factory.mktemp("served")
    server = Server(TOKEN, ["--workdir", str(work), "--max-file", str(MAX_FILE),
                            "--threads", "4", "--max-running", "1", "--request-timeout", "1"])
    server.wait_until_listening()
    yield server, work, request.param
    server.stop()


@pytest.fixture
def make(served):
    """``make(url, token=TOKEN, **options)``: a client of the kind the test runs with, closed
    at teardown."""
    made = []

    def client(url, token=TOKEN, **options):
        made.append(clients.make(served[2], url, token, **options))
        return made[-1]

    yield client
    for each in made:
        each.close()


@pytest.fixture
def kernel(served, make):
    """A client of the module's server; its states and files are cleared after each test."""
    with make(f"http://127.0.0.1:{served[0].port}", timeout=WAIT) as client:
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
    monkeypatch.setattr(calls, "MAX_POLL", 0.2)
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


def test_a_wrong_token_is_unauthorized(served, make):
    with make(f"http://127.0.0.1:{served[0].port}", "not-the-token") as wrong:
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


def test_another_status_and_body_is_a_plain_client_error_and_a_path_prefix_is_kept(make):
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=fake.serve_forever, args=(0.01,), daemon=True).start()
    _Fake.paths.clear()
    try:
        with make(f"http://127.0.0.1:{fake.server_port}/kernels/7/") as behind:
            with pytest.raises(ClientError) as raised:
                behind.describe("a b")
    finally:
        fake.shutdown()
        fake.server_close()
    assert type(raised.value) is ClientError and raised.value.status == 418
    assert raised.value.message == "the server answered 418 I'm a Teapot"
    assert _Fake.paths == ["/kernels/7/states/a%20b"]


def test_a_server_that_is_not_there_is_unreachable_a_client_error_and_an_os_error(make):
    with make("http://127.0.0.1:9") as nowhere:  # the discard port: not listening
        with pytest.raises(Unreachable, match="cannot reach the snapshot-kernel server at "
                                              "http://127.0.0.1:9") as raised:
            nowhere.states()
    assert isinstance(raised.value, ClientError) and isinstance(raised.value, ConnectionError)
    assert raised.value.errno == errno.ECONNREFUSED and raised.value.status is None


class _Silent(http.server.BaseHTTPRequestHandler):
    """Reads a request and answers nothing until the test is over."""

    over = threading.Event()

    def do_GET(self):
        self.over.wait(WAIT)

    def log_message(self, *args):
        pass


class _Garbage(http.server.BaseHTTPRequestHandler):
    """Answers with what is not HTTP."""

    def do_GET(self):
        self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("handler, kind, words", [
    (_Silent, TimedOut, "did not answer"), (_Garbage, ProtocolError, "not HTTP")],
    ids=["silent", "not HTTP"])
def test_a_server_that_does_not_answer_or_speaks_no_http_is_a_client_error(make, handler,
                                                                          kind, words):
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=fake.serve_forever, args=(0.01,), daemon=True).start()
    _Silent.over.clear()
    try:
        with make(f"http://127.0.0.1:{fake.server_port}", timeout=0.3) as behind:
            with pytest.raises(kind, match=words) as raised:
                behind.states()
    finally:
        _Silent.over.set()
        fake.shutdown()
        fake.server_close()
    assert isinstance(raised.value, ClientError)
    assert isinstance(raised.value, TimeoutError) == (kind is TimedOut)


def test_a_url_that_is_not_http_is_refused(make):
    with pytest.raises(UsageError, match="http:// or https://") as raised:
        make("ftp://host")
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, ClientError)


def test_the_token_is_read_from_the_environment_when_none_is_given(served, make, monkeypatch):
    url = f"http://127.0.0.1:{served[0].port}"
    monkeypatch.delenv(calls.TOKEN_VARIABLE, raising=False)
    with pytest.raises(UsageError, match="SNAPSHOT_KERNEL_TOKEN"):
        make(url, None)
    monkeypatch.setenv(calls.TOKEN_VARIABLE, TOKEN)
    assert make(url, None).states() == {"states": ["initial"]}
    with pytest.raises(Unauthorized):
        make(url, "given-wins").states()


def test_a_token_in_utf_8_is_sent_as_the_server_compares_it(start_server, make):
    server = start_server(token="t\u00f6k\u00e9n-\u2713")
    with make(f"http://127.0.0.1:{server.port}", "t\u00f6k\u00e9n-\u2713") as kernel:
        assert kernel.states() == {"states": ["initial"]}


def test_the_repr_names_the_server_and_never_the_token(kernel, served):
    shown = repr(kernel.client if isinstance(kernel, clients.Blocking) else kernel)
    assert shown.endswith(f"Client('http://127.0.0.1:{served[0].port}', timeout={WAIT})")
    assert TOKEN not in shown


# -- typed replies -----------------------------------------------------------------------------

def test_a_reply_is_a_dict_whose_keys_are_typed_attributes(kernel):
    reply = kernel.execute("print('out')\nx = 6\nx * 7", new_state_name="six", exec_id="e6")
    assert isinstance(reply, ExecutionReply) and isinstance(reply, dict)
    assert (reply.state_name, reply.exec_id, reply.parent, reply.error) == ("six", "e6",
                                                                          "initial", None)
    assert (reply.stdout, reply.stderr, reply.result) == ("out\n", "", "42")
    assert (reply.checkpoints, reply.truncated, reply.lost) == ([], {}, {})  # keys left out
    assert json.loads(json.dumps(reply)) == reply == dict(reply)
    described = kernel.describe("six")
    assert described.variables["x"] == {"type": "int", "repr": "6"} == described["variables"]["x"]
    assert (described.parent, described.checkpoint, described.progress) == ("initial", False,
                                                                            None)
    diff = kernel.diff("initial", "six")
    assert (diff.from_, diff.to, sorted(diff.added)) == ("initial", "six", ["_", "x"])
    record = kernel.execution("e6")
    assert (record.status, record.reply.result, record.crash) == ("completed", "42", None)
    listed = kernel.executions()
    assert listed.finished[0].exec_id == "e6" and listed.executions == []  # the latest
    assert kernel.states().states == ["initial", "six"]


def test_raise_for_error_gives_the_reply_back_or_raises_the_cells_error(kernel):
    ok = kernel.execute("1 + 1")
    assert ok.raise_for_error() is ok
    failed = kernel.execute("def f():\n    1 / 0\nf()", exec_id="bad")
    with pytest.raises(CellFailed, match="ZeroDivisionError: division by zero") as raised:
        failed.raise_for_error()
    error = raised.value
    assert (error.ename, error.evalue, error.reply, error.status) == (
        "ZeroDivisionError", "division by zero", failed, None)
    assert error.traceback == failed.error.traceback and "f()" in "".join(error.traceback)
    with pytest.raises(CellFailed, match="ZeroDivisionError"):
        kernel.execution("bad").raise_for_error()
    started = kernel.execute("import time\ntime.sleep(60)", wait=False)  # reset stops it
    assert kernel.execution(started.exec_id).raise_for_error().reply is None  # running


def test_format_text_is_the_servers_concise_text_with_the_names_beside_it(kernel):
    reply = kernel.execute("print('hi')\n41 + 1", new_state_name="t", exec_id="tx",
                           format="text")
    assert isinstance(reply, TextReply)
    assert reply == ("<stdout>\nhi\n</stdout>\n<execute_result>\n42\n</execute_result>\n"
                     "[new state 't' (from 'initial')]")
    assert (reply.exec_id, reply.state_name, reply.parent, reply.error_name) == (
        "tx", "t", "initial", None)
    assert reply.raise_for_error() is reply
    failed = kernel.execute("print('partial')\n1 / 0", format="text")
    assert (failed.state_name, failed.error_name) == (None, "ZeroDivisionError")
    with pytest.raises(CellFailed, match="ZeroDivisionError: division by zero"):
        failed.raise_for_error()
    assert kernel.execute("1", wait=False, format="text").status == "running"
    with pytest.raises(UsageError, match="'json' or 'text'"):
        kernel.execute("1", format="xml")


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


def test_an_import_onto_a_taken_name_is_a_conflict_however_large_the_archive(kernel,
                                                                           tmp_path):
    """The server refuses it before reading the body; each client hears the 409, not a
    broken pipe (the server reads and drops the rest, AsyncClient stops sending)."""
    archive = tmp_path / "big.tar"
    with open(archive, "wb") as out:
        out.truncate(48 << 20)
    kernel.execute("x = 1", new_state_name="taken")
    with pytest.raises(Conflict, match="already exists"):
        kernel.import_state("taken", archive)
    assert kernel.states().states == ["initial", "taken"]  # and the client carries on


def test_the_client_is_typed_throughout(tmp_path):
    """``mypy --strict`` passes on it (pyproject.toml keeps the untyped server out). In a
    process of its own: mypy sets this one's recursion limit, which cells would inherit."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(sync.__file__)))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file",
                           os.path.join(root, "pyproject.toml"), "--cache-dir", str(tmp_path),
                           os.path.join(root, "snapshot_kernel", "client")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_client_reads_only_the_standard_library_and_its_own_folder():
    """So copying snapshot_kernel/client/ alone is enough."""
    import ast
    folder = os.path.dirname(sync.__file__)
    stdlib = getattr(sys, "stdlib_module_names", None)  # 3.10+
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(folder, name)).read())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        assert stdlib is None or imported <= stdlib | {"__future__"}, (name, imported - stdlib)
        assert all(node.level == 1 for node in ast.walk(tree)  # from .x, never from ..x
                   if isinstance(node, ast.ImportFrom) and node.level), name


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
