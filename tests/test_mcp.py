"""``snapshot-kernel mcp`` driven by the MCP SDK's own client, as an agent host drives it:
over stdio with a kernel in the server's process, in front of a real HTTP server, and
over streamable HTTP. Each server is a subprocess started as users start it."""

import base64
import contextlib
import functools
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (it needs Python 3.10 or later)")

import anyio  # noqa: E402  (after the skip: both come with the mcp extra)
from anyio.from_thread import start_blocking_portal  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from test_server import TOKEN as SERVER_TOKEN, Server, call  # noqa: E402  (a server to front)

TIMEOUT = 10  # seconds: the bound on every wait and every tool call
TOKEN = "mcp-test-token"
TOOLS = {"execute_code", "list_states", "get_state", "diff_states", "delete_state", "interrupt",
         "list_executions", "get_execution", "read_output", "read_file", "write_file",
         "list_files"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LISTENING = re.compile(r"snapshot-kernel mcp listening on (http://\S+)")
MCP = [sys.executable, "-m", "snapshot_kernel.main", "mcp"]


class Client:
    """An MCP client session, called from synchronous tests through an anyio portal."""

    def __init__(self, portal, session):
        self.portal, self.session = portal, session

    def call(self, tool, progress=None, **arguments):
        return self.portal.call(functools.partial(
            self.session.call_tool, tool, arguments, read_timeout_seconds=TIMEOUT,
            progress_callback=progress))

    def tools(self):
        return {tool.name: tool for tool in self.portal.call(self.session.list_tools).tools}


@contextlib.asynccontextmanager
async def _initialized(read, write):
    async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
        with anyio.fail_after(TIMEOUT):
            await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def _over_stdio(flags, env, errlog):
    params = StdioServerParameters(command=sys.executable, args=MCP[1:] + list(flags), env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with _initialized(read, write) as session:
            yield session


@contextlib.asynccontextmanager
async def _over_http(url, token):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with _initialized(read, write) as session:
            yield session


@pytest.fixture(scope="module")
def portal():
    with start_blocking_portal() as portal:
        yield portal


@pytest.fixture(scope="module")
def stdio_log(tmp_path_factory):
    with open(tmp_path_factory.mktemp("mcp") / "stderr", "w") as log:
        yield log


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("workdir")


@pytest.fixture(scope="module")
def mcp(portal, stdio_log, workdir):
    """One ``snapshot-kernel mcp`` over stdio with its own kernel and working directory,
    for the module's tests: each test uses names of its own."""
    flags = ["--workdir", str(workdir)]
    with portal.wrap_async_context_manager(_over_stdio(flags, {}, stdio_log)) as session:
        yield Client(portal, session)


def texts(result):
    return [block.text for block in result.content if block.type == "text"]


def progress_recorder():
    """An async progress callback and the list of ``(progress, message)`` it fills."""
    seen = []

    async def record(progress, total, message):
        seen.append((progress, message))

    return record, seen


def wait_cell(path):
    """Code for a cell that prints, waits (bounded) until ``path`` exists, then gives 42."""
    return (f"import os, time\nprint('waiting')\nend = time.monotonic() + {TIMEOUT}\n"
            f"while not os.path.exists({str(path)!r}) and time.monotonic() < end:\n"
            "    time.sleep(0.02)\n6 * 7")


# -- the tool list --

def test_the_tools_are_listed_with_valid_names_descriptions_and_schemas(mcp):
    tools = mcp.tools()
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert TOOL_NAME.match(tool.name) and len(tool.description) > 40
        assert tool.input_schema["type"] == "object"
    execute = tools["execute_code"].input_schema
    assert execute["required"] == ["code"]
    assert execute["properties"]["state_name"]["default"] == "initial"
    assert execute["properties"]["wait"] == {**execute["properties"]["wait"], "type": "boolean",
                                             "default": True}
    assert {"new_state_name", "timeout", "exec_id", "max_output"} <= set(execute["properties"])
    for tool in ("get_state", "delete_state"):  # named as execute_code names it
        assert tools[tool].input_schema["required"] == ["state_name"]
    assert tools["list_states"].annotations.read_only_hint is True


# -- execute_code --

def test_a_cell_answers_with_concise_text_a_note_and_the_reply_as_structured_content(mcp):
    result = mcp.call("execute_code", code="print('hello')\nx = 41\nx + 1",
                      new_state_name="mcp-base")
    assert result.is_error is False
    output, note = texts(result)
    assert output == "<stdout>\nhello\n</stdout>\n<execute_result>\n42\n</execute_result>"
    reply = result.structured_content
    assert note == f"exec_id {reply['exec_id']!r}: new state 'mcp-base' (from 'initial')"
    assert reply["state_name"] == "mcp-base" and reply["error"] is None
    assert reply["output"][0] == {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    branch = mcp.call("execute_code", code="x * 2", state_name="mcp-base")
    assert texts(branch)[0] == "82"  # one output alone is bare


def test_a_failing_cell_is_an_error_result_with_its_output_and_traceback(mcp):
    result = mcp.call("execute_code", code="print('partial')\n1 / 0")
    assert result.is_error is True
    output, note = texts(result)
    assert output.startswith("<stdout>\npartial\n</stdout>\n<error>\nTraceback")
    assert output.endswith("ZeroDivisionError: division by zero\n</error>")
    assert note.endswith("ZeroDivisionError, no state stored ('initial' is unchanged)")
    assert result.structured_content["error"]["ename"] == "ZeroDivisionError"
    assert result.structured_content["state_name"] is None


def test_a_plot_comes_back_as_png_image_content(mcp):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('mcp')\nplt.show()"
    result = mcp.call("execute_code", code=code)
    assert result.is_error is False
    [image] = [block for block in result.content if block.type == "image"]
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    assert re.fullmatch(r"\[image/png \d+x\d+, \d+ KB\]", texts(result)[0])


def test_a_long_cell_sends_progress_notifications_with_its_hint(mcp):
    code = ("import time\nfor i in range(3):\n    time.sleep(0.8)\n"
            "    checkpoint(progress=f'{i + 1}/3 steps')\n'done'")
    record, seen = progress_recorder()
    result = mcp.call("execute_code", progress=record, code=code, new_state_name="mcp-long")
    assert texts(result)[0] == "'done'"
    assert len(seen) >= 2, seen
    assert [value for value, _ in seen] == sorted({value for value, _ in seen})  # growing
    assert all(message.startswith("running for ") for _, message in seen)
    assert any("progress: 1/3 steps; last checkpoint 'mcp-long@1'" in message
               for _, message in seen), seen
    assert "checkpoints: 'mcp-long@1', 'mcp-long@2', 'mcp-long@3'" in texts(result)[-1]


def test_a_cut_stream_is_paged_in_full_with_read_output(mcp):
    code = "for i in range(3000):\n    print(f'{i:05d}')"
    result = mcp.call("execute_code", code=code, max_output=100, exec_id="mcp-loud")
    assert ("stdout was cut: read_output(exec_id='mcp-loud', stream='stdout') pages through "
            "all of it") in texts(result)[-1]
    first = mcp.call("read_output", exec_id="mcp-loud", limit=12)
    assert texts(first) == ["00000\n00001\n", "stdout characters 0-12 of 18000; more: "
                            "read_output(exec_id='mcp-loud', stream='stdout', offset=12)"]
    rest = mcp.call("read_output", exec_id="mcp-loud", offset=12)
    assert first.structured_content["text"] + rest.structured_content["text"] == "".join(
        f"{i:05d}\n" for i in range(3000))


# -- states --

def test_states_are_listed_described_and_deleted(mcp):
    mcp.call("execute_code", code="import math\nitems = [1, 2]", new_state_name="mcp-described")
    named = mcp.call("list_states", tree=False)
    assert "mcp-described" in texts(named)[0].split("\n")
    assert named.structured_content["states"][0] == "initial"
    listed = mcp.call("list_states")
    line = next(line for line in texts(listed)[0].splitlines() if "mcp-described" in line)
    assert line.startswith(("├── mcp-described  [", "└── mcp-described  [")), line
    assert line.endswith("]  import math")
    assert listed.structured_content["states"][0]["name"] == "initial"
    described = mcp.call("get_state", state_name="mcp-described")
    text = texts(described)[0]
    assert text.startswith("state 'mcp-described', child of 'initial', made ")
    assert "code:\nimport math\nitems = [1, 2]\n" in text and "  items: list = [1, 2]" in text
    assert described.structured_content["variables"]["items"] == {"type": "list",
                                                                   "repr": "[1, 2]"}
    deleted = mcp.call("delete_state", state_name="mcp-described")
    assert deleted.structured_content == {"deleted": "mcp-described"}
    assert "mcp-described" not in mcp.call("list_states", tree=False).structured_content[
        "states"]


def test_a_branch_is_diffed_and_deleted_whole_and_a_throwaway_cell_stores_nothing(mcp):
    mcp.call("execute_code", code="xs = [1, 2]\nlr = 0.1", new_state_name="mcp-trunk")
    mcp.call("execute_code", code="xs = xs + [3]\nlr = 0.1\nnote = 'n'",
             state_name="mcp-trunk", new_state_name="mcp-branch")
    mcp.call("execute_code", code="y = 1", state_name="mcp-branch", new_state_name="mcp-twig")
    diff = mcp.call("diff_states", state_name="mcp-trunk", other="mcp-branch")
    assert texts(diff)[0] == ("from 'mcp-trunk' to 'mcp-branch': 1 added, 0 removed, 1 changed\n"
                              "added:\n  note: str of 1 = 'n'\nchanged:\n"
                              "  xs: list of 2 = [1, 2]\n      -> list of 3 = [1, 2, 3]")
    assert set(diff.structured_content["changed"]) == {"xs"}  # lr: equal, so unchanged
    probe = mcp.call("execute_code", code="len(xs)", state_name="mcp-branch", store=False)
    assert texts(probe)[0] == "3" and probe.structured_content["state_name"] is None
    assert "no state stored, as asked" in texts(probe)[-1]
    gone = mcp.call("delete_state", state_name="mcp-branch", descendants=True)
    assert texts(gone)[0] == "deleted state 'mcp-branch' and the 1 made from it: 'mcp-twig'"
    left = mcp.call("list_states", tree=False).structured_content["states"]
    assert "mcp-trunk" in left and not {"mcp-branch", "mcp-twig"} & set(left)


REFUSED_CALLS = {
    "unknown state": ("get_state", {"state_name": "mcp-nope"}, "no state named 'mcp-nope'"),
    "unknown state, said how to list them": ("get_state", {"state_name": "zzz"},
                                             "no state named 'zzz'; list_states lists them"),
    "unknown state, by the old argument name": ("get_state", {"name": "mcp-nope"},
                                                "no state named 'mcp-nope'"),
    "run on an unknown state": ("execute_code", {"code": "1", "state_name": "mcp-nope"},
                                "no state named 'mcp-nope'"),
    "delete initial": ("delete_state", {"name": "initial"}, "cannot be deleted"),
    "name taken": ("execute_code", {"code": "1", "new_state_name": "initial"}, "already exists"),
    "bad name": ("execute_code", {"code": "1", "new_state_name": "a/b"}, "new_state_name"),
    "negative timeout": ("execute_code", {"code": "1", "timeout": -1},
                         "timeout: Input should be greater than or equal to 0: execute_code "
                         "takes code, state_name?, new_state_name?, timeout?, wait?"),
    "a wrong argument name": ("get_state", {"state": "initial"},
                              "no argument 'state'; 'state_name' is required: get_state "
                              "takes state_name"),
    "an unknown argument": ("execute_code", {"code": "1", "cell": "2"},
                            "no argument 'cell': execute_code takes code, state_name?"),
    "a missing argument": ("execute_code", {"state_name": "initial"},
                           "'code' is required: execute_code takes code, state_name?"),
    "interrupt nothing": ("interrupt", {"exec_id": "mcp-nope"}, "no running execution"),
    "force without a supervisor": ("interrupt", {"exec_id": "mcp-nope", "force": True},
                                   "only a server with its supervisor can do"),
    "diff of an unknown state": ("diff_states", {"state_name": "initial", "other": "mcp-nop"},
                                 "no state named 'mcp-nop'"),
    "unknown execution": ("get_execution", {"exec_id": "mcp-nope"},
                          "list_executions lists the running ones"),
    "bad stream": ("read_output", {"exec_id": "mcp-nope", "stream": "stdin"}, "stdout"),
}


@pytest.mark.parametrize("tool, arguments, message", REFUSED_CALLS.values(), ids=REFUSED_CALLS)
def test_a_refused_call_is_an_error_result_that_says_why(mcp, tool, arguments, message):
    result = mcp.call(tool, **arguments)
    assert result.is_error is True
    assert message in texts(result)[0]
    assert "\n" not in texts(result)[0].strip() and "pydantic" not in texts(result)[0]


# -- files --

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAW"
                       "jR9awAAAABJRU5ErkJggg==")


def test_a_file_written_is_read_back_as_text_and_seen_by_cells(mcp, workdir):
    written = mcp.call("write_file", path="mcp-files/notes.txt", content="caf\u00e9\n")
    assert written.structured_content == {"name": "mcp-files/notes.txt", "size": 6}
    assert (workdir / "mcp-files" / "notes.txt").read_text("utf-8") == "caf\u00e9\n"
    read = mcp.call("read_file", path="mcp-files/notes.txt")
    assert texts(read) == ["caf\u00e9\n", "'mcp-files/notes.txt': 6 bytes, text/plain, text"]
    assert read.structured_content["encoding"] == "utf-8"
    cell = mcp.call("execute_code", code="open('mcp-files/notes.txt').read().strip()")
    assert texts(cell)[0] == "'caf\u00e9'"


def test_an_image_file_is_read_as_image_content_and_bytes_as_base64(mcp):
    mcp.call("write_file", path="mcp-files/dot.png", content=base64.b64encode(PNG).decode(),
             encoding="base64")
    image = mcp.call("read_file", path="mcp-files/dot.png")
    assert image.content[0].type == "image" and image.content[0].mime_type == "image/png"
    assert base64.b64decode(image.content[0].data) == PNG
    mcp.call("write_file", path="mcp-files/raw.bin", content="AAH/", encoding="base64")
    raw = mcp.call("read_file", path="mcp-files/raw.bin")
    assert texts(raw)[0] == "AAH/" and "binary, shown as base64" in texts(raw)[1]


def test_files_are_listed(mcp):
    mcp.call("write_file", path="mcp-list/a/b.txt", content="b")
    listed = mcp.call("list_files", path="mcp-list")
    assert texts(listed)[0] == "'mcp-list':\n  a/"
    assert listed.structured_content["files"][0]["is_dir"] is True
    inner = mcp.call("list_files", path="mcp-list/a")
    assert inner.structured_content["files"][0]["name"] == "b.txt"
    assert "b.txt  1 bytes" in texts(inner)[0]


REFUSED_FILES = {
    "outside": ("read_file", {"path": "../x"}, "'..'"),
    "missing": ("read_file", {"path": "mcp-nope.txt"}, "no file or directory"),
    "bad base64": ("write_file", {"path": "x", "content": "!!", "encoding": "base64"},
                   "cannot be written as base64"),
    "list a missing directory": ("list_files", {"path": "mcp-nope"}, "no file or directory"),
}


@pytest.mark.parametrize("tool, arguments, message", REFUSED_FILES.values(), ids=REFUSED_FILES)
def test_a_refused_file_call_is_an_error_result_that_says_why(mcp, tool, arguments, message):
    result = mcp.call(tool, **arguments)
    assert result.is_error is True and message in texts(result)[0]


# -- executions --

def test_a_job_that_does_not_wait_is_polled_to_its_result(mcp, tmp_path):
    go = tmp_path / "go"
    started = mcp.call("execute_code", code=wait_cell(go), wait=False, exec_id="mcp-job")
    assert started.structured_content == {"exec_id": "mcp-job", "status": "running"}
    assert "get_execution(exec_id='mcp-job'" in texts(started)[0]
    running = mcp.call("list_executions")
    assert [run["exec_id"] for run in running.structured_content["executions"]] == ["mcp-job"]
    assert "exec_id 'mcp-job' (running)" in texts(running)[0]
    polled = mcp.call("get_execution", exec_id="mcp-job", wait=0.3)
    assert polled.is_error is False and polled.structured_content["status"] == "running"
    assert polled.structured_content["reply"] is None
    go.touch()
    done = mcp.call("get_execution", exec_id="mcp-job", wait=TIMEOUT)
    assert done.structured_content["status"] == "completed"
    assert texts(done)[0] == "<stdout>\nwaiting\n</stdout>\n<execute_result>\n42\n</execute_result>"
    assert texts(done)[-1].startswith("exec_id 'mcp-job' (completed): new state 'state-")


def test_interrupt_stops_a_running_cell_and_its_result_says_so(mcp):
    code = "import time\nprint('spinning', flush=True)\nwhile True: time.sleep(0.01)"
    mcp.call("execute_code", code=code, wait=False, exec_id="mcp-spin")
    assert mcp.call("interrupt", exec_id="mcp-spin").structured_content == {
        "interrupted": "mcp-spin"}
    ended = mcp.call("get_execution", exec_id="mcp-spin", wait=TIMEOUT)
    assert ended.is_error is True
    assert ended.structured_content["status"] == "interrupted"
    assert texts(ended)[-1].startswith("exec_id 'mcp-spin' (interrupted): KeyboardInterrupt, "
                                       "no state stored")


def test_a_call_the_host_cancels_interrupts_its_cell(mcp):
    async def give_up_after_a_second():
        with anyio.move_on_after(1):
            await mcp.session.call_tool("execute_code", {
                "code": "import time\nwhile True: time.sleep(0.01)", "exec_id": "mcp-dropped"})

    mcp.portal.call(give_up_after_a_second)
    ended = mcp.call("get_execution", exec_id="mcp-dropped", wait=TIMEOUT)
    assert ended.structured_content["status"] == "interrupted"


def test_what_a_cell_writes_to_file_descriptor_1_does_not_reach_the_protocol(mcp):
    code = ("import os, subprocess\nos.write(1, b'raw bytes\\n')\n"
            "subprocess.run(['echo', 'child'])\n7")
    result = mcp.call("execute_code", code=code)
    assert texts(result)[0] == "7"
    assert mcp.call("list_states").is_error is False  # the session still reads the wire


def test_the_stdio_server_ends_when_the_host_closes_stdin_even_with_a_cell_running():
    process = subprocess.Popen(MCP, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    replies = queue.Queue()
    threading.Thread(target=lambda: [replies.put(json.loads(line)) for line in process.stdout],
                     daemon=True).start()

    def send(message):
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        process.stdin.flush()

    try:  # by hand, as a host on the 2025-06-18 protocol would
        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
        assert replies.get(timeout=TIMEOUT)["result"]["serverInfo"]["name"] == "snapshot-kernel"
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": "execute_code", "arguments": {
            "code": "while True: pass", "wait": False}}})
        assert replies.get(timeout=TIMEOUT)["result"]["structuredContent"]["status"] == "running"
        process.stdin.close()
        assert process.wait(TIMEOUT) == 0
    finally:
        process.kill()


# -- in front of a server, and over streamable HTTP --

@pytest.fixture
def http_server(tmp_path):
    server = Server(SERVER_TOKEN, ["--workdir", str(tmp_path)])
    server.wait_until_listening()
    yield server
    server.stop()


def test_in_front_of_a_server_the_tools_act_on_its_states(portal, stdio_log, http_server,
                                                         tmp_path):
    url = f"http://127.0.0.1:{http_server.port}"
    env = {"SNAPSHOT_KERNEL_TOKEN": SERVER_TOKEN}
    with portal.wrap_async_context_manager(_over_stdio(["--url", url], env, stdio_log)) as s:
        front = Client(portal, s)
        result = front.call("execute_code", code="x = 6 * 7\nx", new_state_name="fronted")
        assert texts(result)[0] == "42" and result.is_error is False
        status, state = call(http_server.connect(), "GET", "/states/fronted")
        assert (status, state["variables"]["x"]["repr"]) == (200, "42")
        failed = front.call("execute_code", code="undefined_name", state_name="fronted")
        assert failed.is_error is True and "NameError" in texts(failed)[0]
        record, seen = progress_recorder()
        slow = front.call("execute_code", progress=record, state_name="fronted",
                          code="import time\ntime.sleep(1.5)\nx + 1")
        assert texts(slow)[0] == "43" and seen
        assert "no state named 'nope'" in texts(front.call("get_state", state_name="nope"))[0]
        assert front.call("list_states", tree=False).structured_content["states"] == [
            "initial", "fronted", slow.structured_content["state_name"]]
        front.call("write_file", path="sub/fronted.txt", content="on the server")
        assert (tmp_path / "sub" / "fronted.txt").read_text() == "on the server"
        assert texts(front.call("read_file", path="sub/fronted.txt"))[0] == "on the server"
        assert front.call("list_files", path="sub").structured_content["files"][0]["size"] == 13


def test_in_front_of_a_server_a_forced_stop_ends_a_cell_stuck_in_c(portal, stdio_log,
                                                                   http_server):
    url = f"http://127.0.0.1:{http_server.port}"
    env = {"SNAPSHOT_KERNEL_TOKEN": SERVER_TOKEN}
    with portal.wrap_async_context_manager(_over_stdio(["--url", url], env, stdio_log)) as s:
        front = Client(portal, s)
        front.call("execute_code", code="kept = 1", new_state_name="kept")
        code = ("import threading\nlock = threading.Lock()\nlock.acquire()\n"
                "print('blocking', flush=True)\nlock.acquire()")
        front.call("execute_code", code=code, exec_id="mcp-stuck", wait=False)
        deadline = time.monotonic() + TIMEOUT
        while "blocking" not in texts(front.call("get_execution", exec_id="mcp-stuck"))[0]:
            assert time.monotonic() < deadline, "the cell did not start"
            time.sleep(0.05)
        stopped = front.call("interrupt", exec_id="mcp-stuck", force=True)
        assert stopped.structured_content == {"interrupted": "mcp-stuck", "replaced": True}
        while True:  # the old process ends; the front asks again, of the new one
            record = front.call("get_execution", exec_id="mcp-stuck", wait=1)
            if record.structured_content is not None:  # not a refusal: the record
                break
            assert time.monotonic() < deadline + TIMEOUT, texts(record)
        assert record.structured_content["status"] == "interrupted"
        assert record.structured_content["interrupt_reason"] == "force"
        assert texts(record)[0].startswith("<stdout>\nblocking\n</stdout>")
        assert "stopped by force" in texts(record)[0]
        names = front.call("list_states", tree=False).structured_content["states"]
        assert names == ["initial", "kept"]


class HttpMcp:
    """A ``snapshot-kernel mcp --transport http`` subprocess on a free port."""

    def __init__(self):
        env = {**os.environ, "SNAPSHOT_KERNEL_TOKEN": TOKEN}
        self.process = subprocess.Popen(
            MCP + ["--transport", "http", "--bind", "127.0.0.1:0"], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, errors="replace")
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.process.stderr],
                         daemon=True).start()
        self.url = None
        while self.url is None:
            line = lines.get(timeout=TIMEOUT)
            match = LISTENING.search(line)
            self.url = match.group(1) if match else None

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(TIMEOUT)


@pytest.fixture
def http_mcp():
    server = HttpMcp()
    yield server
    server.stop()


def test_streamable_http_serves_the_tools_to_clients_with_the_token(portal, http_mcp):
    assert http_mcp.url.endswith("/mcp")
    with portal.wrap_async_context_manager(_over_http(http_mcp.url, TOKEN)) as session:
        client = Client(portal, session)
        assert set(client.tools()) == TOOLS
        record, seen = progress_recorder()
        result = client.call("execute_code", progress=record,
                             code="import time\ntime.sleep(1.5)\nprint('over http')")
        assert texts(result)[0] == "over http\n" and seen
    request = urllib.request.Request(http_mcp.url, b"{}", {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert refused.value.code == 401
    assert b"missing or wrong token" in refused.value.read()
    http_mcp.process.send_signal(signal.SIGTERM)
    assert http_mcp.process.wait(TIMEOUT) == 0


def test_an_address_in_use_is_refused_with_a_message():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(MCP + ["--transport", "http", "--bind", f"127.0.0.1:{port}"],
                              env={**os.environ, "SNAPSHOT_KERNEL_TOKEN": TOKEN},
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in done.stderr
