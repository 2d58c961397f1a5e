"""The parts of ``snapshot-kernel mcp`` that need no MCP SDK, so they run on every Python,
3.9 included: the command line, and the two backends the tools run on (a kernel in the
process, a server over HTTP), which must answer alike."""

import contextlib
import socket
import socketserver
import subprocess
import sys
import threading
import wsgiref.simple_server

import pytest

from helpers import WAIT
from snapshot_kernel.mcp import cli as mcp_cli
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from snapshot_kernel.files import Workdir
from snapshot_kernel.mcp.backends import BackendError, HttpBackend, KernelBackend

TOKEN = "backend-token"
MAX_FILE = 1000
MCP = [sys.executable, "-m", "snapshot_kernel.main", "mcp"]


# -- the command line --

def test_mcp_help_works_without_the_sdk_and_names_the_tools_and_modes():
    done = subprocess.run(MCP + ["--help"], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: snapshot-kernel mcp")
    for word in ("execute_code", "--transport", "--url", "SNAPSHOT_KERNEL_TOKEN", "--state-dir"):
        assert word in done.stdout


def test_the_server_help_points_at_the_mcp_command():
    done = subprocess.run(MCP[:-1] + ["--help"], capture_output=True, text=True, timeout=WAIT)
    assert "snapshot-kernel mcp --help" in done.stdout


def test_without_the_sdk_mcp_says_how_to_install_it():
    hide_sdk = ("import sys; sys.modules['mcp'] = None; "  # what find_spec sees when it is absent
                "from snapshot_kernel.main import main; main(['mcp'])")
    done = subprocess.run([sys.executable, "-c", hide_sdk], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 1
    assert "pip install 'snapshot-kernel[mcp]' (Python 3.10 or later)" in done.stderr


REFUSED_FLAGS = {
    "url without token": (["--url", "http://127.0.0.1:8080"], "no token"),
    "http without token": (["--transport", "http"], "no token"),
    "url not http": (["--url", "ftp://host", "--token", "t"], "must start with http://"),
    "kernel flag with url": (["--url", "http://h:1", "--token", "t", "--state-dir", "d",
                              "--timeout", "5"], "--timeout, --state-dir: these shape a kernel"),
    "bind with stdio": (["--bind", "127.0.0.1:0"], "--bind is for --transport http"),
    "bad bind": (["--transport", "http", "--bind", "nowhere"], "expected HOST:PORT"),
    "bad transport": (["--transport", "sse"], "invalid choice"),
}


@pytest.mark.parametrize("argv, message", REFUSED_FLAGS.values(), ids=REFUSED_FLAGS)
def test_flags_that_cannot_work_are_refused_with_the_reason(argv, message, monkeypatch, capsys):
    monkeypatch.delenv("SNAPSHOT_KERNEL_TOKEN", raising=False)
    with pytest.raises(SystemExit) as refused:
        mcp_cli.parse_args(argv)
    assert refused.value.code == 2
    assert message in capsys.readouterr().err


def test_http_defaults_to_loopback_and_takes_the_token_from_the_environment(monkeypatch):
    monkeypatch.setenv("SNAPSHOT_KERNEL_TOKEN", "from-env")
    args = mcp_cli.parse_args(["--transport", "http"])
    assert (args.bind, args.token) == (("127.0.0.1", 8000), "from-env")


# -- the backends --

class _ThreadingWSGIServer(socketserver.ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    daemon_threads = True


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(app):
    """``app`` on a free loopback port, served from threads; yields its URL."""
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, _ThreadingWSGIServer, _Quiet)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["kernel", "http"])
def backend(request, tmp_path):
    """Each backend on a fresh kernel and working directory (``tmp_path``): in this
    process, and behind the HTTP API."""
    kernel, files = SnapshotKernel(), Workdir(tmp_path, max_file=MAX_FILE)
    if request.param == "kernel":
        yield KernelBackend(kernel, files)
    else:
        with serving(create_app(kernel, TOKEN, files=files)) as url:
            yield HttpBackend(url + "/", TOKEN)
    kernel.close()


def test_a_started_cell_is_waited_for_and_gives_the_reply_of_the_http_api(backend):
    exec_id = backend.start("x = 6 * 7\nprint(x)", "initial", "b-one", "b-job")
    assert exec_id == "b-job"
    report = backend.execution("b-job", WAIT)
    assert report["status"] == "completed"
    assert report["reply"]["output"] == [{"output_type": "stream", "name": "stdout",
                                          "text": "42\n"}]
    assert (report["reply"]["state_name"], report["reply"]["parent"]) == ("b-one", "initial")
    assert backend.states() == {"states": ["initial", "b-one"]}
    assert backend.describe("b-one")["variables"]["x"] == {"type": "int", "repr": "42"}
    assert backend.executions()["finished"][0]["exec_id"] == "b-job"
    assert backend.delete("b-one") == {"deleted": "b-one"}


def test_trees_diffs_throwaway_cells_and_branches_alike(backend):
    backend.start("xs = [1]", "initial", "b-a", "b-a-job")
    backend.execution("b-a-job", WAIT)
    backend.start("xs = xs + [2]", "b-a", "b-b", "b-b-job")
    backend.execution("b-b-job", WAIT)
    backend.start("len(xs)", "b-b", exec_id="b-probe", store=False)
    assert backend.execution("b-probe", WAIT)["reply"]["state_name"] is None
    assert [(e["name"], e["depth"]) for e in backend.states(tree=True)["states"]] == [
        ("initial", 0), ("b-a", 1), ("b-b", 2)]
    assert set(backend.diff("b-a", "b-b")["changed"]) == {"xs"}
    assert backend.delete("b-a", descendants=True) == {"deleted": "b-a", "descendants": ["b-b"]}
    assert backend.states() == {"states": ["initial"]}


def test_names_that_urls_would_mangle_arrive_whole(backend):
    name = "a b?c#d%20e&f"
    backend.start("y = 1", "initial", name, name)
    assert backend.execution(name, WAIT)["reply"]["state_name"] == name
    assert backend.describe(name)["name"] == name
    assert backend.delete(name) == {"deleted": name}


def test_an_interrupted_cell_ends_interrupted(backend):
    backend.start("import time\nwhile True: time.sleep(0.01)", "initial", exec_id="b-spin")
    assert backend.interrupt("b-spin") == {"interrupted": "b-spin"}
    assert backend.execution("b-spin", WAIT)["status"] == "interrupted"


def test_the_full_output_is_paged_alike(backend):
    backend.start("print('x' * 300)", "initial", exec_id="b-loud", max_output=50)
    reply = backend.execution("b-loud", WAIT)["reply"]
    assert "stdout" in reply["truncated"]
    page = backend.output("b-loud", "stdout", 290, 1000)
    assert (page["text"], page["total"], page["complete"]) == ("x" * 10 + "\n", 301, True)


def test_files_are_written_read_and_listed_alike(backend, tmp_path):
    assert backend.write_file("d/a.bin", b"\x00\xff") == {"name": "d/a.bin", "size": 2}
    assert (tmp_path / "d" / "a.bin").read_bytes() == b"\x00\xff"
    assert backend.read_file("d/a.bin") == {"name": "d/a.bin", "size": 2,
                                            "content_type": "application/octet-stream",
                                            "data": b"\x00\xff"}
    assert [item["name"] for item in backend.list_files("d")["files"]] == ["a.bin"]
    assert backend.list_files()["files"][0]["is_dir"] is True


REFUSALS = {
    "unknown state": (lambda b: b.describe("nope"), "no state named 'nope'"),
    "run on an unknown state": (lambda b: b.start("1", "nope"), "no state named 'nope'"),
    "delete initial": (lambda b: b.delete("initial"), "cannot be deleted"),
    "name taken": (lambda b: b.start("1", "initial", "initial"), "already exists"),
    "bad timeout": (lambda b: b.start("1", "initial", timeout=-1), "timeout"),
    "interrupt nothing": (lambda b: b.interrupt("nope"), "no running execution 'nope'"),
    "force without a supervisor": (lambda b: b.interrupt("nope", force=True),
                                   "only a server with its supervisor can do"),
    "unknown execution": (lambda b: b.execution("nope"), "no execution 'nope'"),
    "a file outside": (lambda b: b.read_file("../x"), "'..'"),
    "a missing file": (lambda b: b.read_file("nope"), "no file or directory 'nope'"),
    "a file too large to read": (lambda b: b.write_file("big", b"x" * 11) and
                                 b.read_file("big", limit=10),
                                 "'big' is 11 bytes; read_file returns files of up to 10"),
    "a file too large to write": (lambda b: b.write_file("big", b"x" * (MAX_FILE + 1)),
                                  "--max-file"),
    "a missing directory": (lambda b: b.list_files("nope"), "no file or directory"),
}


@pytest.mark.parametrize("act, message", REFUSALS.values(), ids=REFUSALS)
def test_refusals_are_backend_errors_with_the_kernels_message(backend, act, message):
    with pytest.raises(BackendError, match=message):
        act(backend)


def test_a_wrong_token_is_a_backend_error_that_says_so():
    kernel = SnapshotKernel()
    with serving(create_app(kernel, TOKEN)) as url:
        with pytest.raises(BackendError, match="missing or wrong token"):
            HttpBackend(url, "not-the-token").states()


def test_a_server_that_is_not_there_is_a_backend_error_naming_its_url():
    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        with pytest.raises(BackendError, match=f"cannot reach the snapshot-kernel server at {url}"):
            HttpBackend(url, TOKEN).states()
