"""The clients' connections, and replies lost with them, against real servers: keep-alive,
connections the server closed while idle, one per thread or per concurrent call, and a
waiting execute whose connection closes under its cell (a crash, a proxy hanging up)."""

import asyncio
import socket
import socketserver
import threading
import time

import pytest

from helpers import WAIT
from snapshot_kernel.client import AsyncClient, Client, Unreachable, http11, sync
from test_client import make, served, wait_cell  # noqa: F401,F811 (fixtures)
from test_server import TOKEN, start_server  # noqa: F401


@pytest.fixture
def kernel(served):
    """A ``Client`` of the module's server, whose connections these tests look into."""
    with Client(f"http://127.0.0.1:{served[0].port}", TOKEN, timeout=WAIT) as client:
        yield client


@pytest.fixture(autouse=True)
def reset(served):
    """After each test: no state but ``initial``, no cell running (so no slot is held)."""
    yield
    with Client(f"http://127.0.0.1:{served[0].port}", TOKEN, timeout=WAIT) as client:
        client.reset()
        deadline = time.monotonic() + WAIT
        while client.executions().executions:
            assert time.monotonic() < deadline, "a cell outlived its test"
            time.sleep(0.02)


# -- a reply lost with its connection ----------------------------------------------------------

def test_a_cell_that_crashes_the_server_process_gets_the_crash_as_its_reply(start_server, make):
    server = start_server()  # as a user starts it: a supervisor, states in a private directory
    with make(f"http://127.0.0.1:{server.port}", timeout=WAIT) as kernel:
        kernel.execute("x = 41", new_state_name="before")
        reply = kernel.execute("import os\nos._exit(7)", "before")
        assert (reply["state_name"], reply["error"]["ename"]) == (None, "KernelCrash")
        assert "exited with status 7" in reply["error"]["evalue"]
        record = kernel.execution(reply["exec_id"])
        assert (record["status"], record["crash"]["exit_status"]) == ("crashed", 7)
        named = kernel.execute("import ctypes\nctypes.string_at(0)", "before", exec_id="segv")
        assert named["exec_id"] == "segv" and "SIGSEGV" in named["error"]["evalue"]
        assert kernel.execute("x + 1", "before")["output"][-1]["data"]["text/plain"] == "42"
        text = kernel.execute("import os\nos._exit(3)", "before", format="text")
        assert (text.error_name, text.state_name) == ("KernelCrash", None)
        assert text.startswith("KernelCrash: the server process exited with status 3")


class _HangUp(socketserver.BaseRequestHandler):
    """Reads a request and closes the connection without a reply."""

    requests = []

    def handle(self):
        self.requests.append(self.request.recv(65536).split(b"\r\n", 1)[0])


def test_a_hang_up_before_the_server_knows_the_execution_is_raised(make):
    fake = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HangUp)
    threading.Thread(target=fake.serve_forever, args=(0.01,), daemon=True).start()
    _HangUp.requests.clear()
    try:
        with make(f"http://127.0.0.1:{fake.server_address[1]}") as nowhere:
            with pytest.raises(Unreachable, match="without a reply|closed connection"):
                nowhere.execute("1 + 1", exec_id="e1")
    finally:
        fake.shutdown()
        fake.server_close()
    assert _HangUp.requests == [b"POST /execute HTTP/1.1",  # then the lookup, which fails too
                                b"GET /executions/e1?wait=60.000 HTTP/1.1"]


def test_a_proxy_hanging_up_under_a_cell_gets_the_servers_reply(served, make, tmp_path):
    """The server interrupts a cell whose client left; the client hears how it ended."""
    proxy = _DroppingProxy(served[0].port, after=0.5)
    try:
        with make(f"http://127.0.0.1:{proxy.port}", timeout=WAIT) as behind:
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
    while not sync._closed_by_peer(sock):
        assert time.monotonic() < deadline, "the server kept an idle connection open"
        time.sleep(0.05)


def test_a_get_meeting_a_closed_connection_is_sent_again(kernel, monkeypatch):
    kernel.states()
    wait_until_the_server_closes(kernel._local.conn.sock)
    monkeypatch.setattr(sync, "_closed_by_peer", lambda sock: False)  # not seen
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




# -- AsyncClient's connections ----------------------------------------------------------------

def run_async(served, test):
    """Run ``test(client)`` in an event loop of its own, with an AsyncClient of the server."""
    async def main():
        async with AsyncClient(f"http://127.0.0.1:{served[0].port}", TOKEN,
                               timeout=WAIT) as client:
            return await test(client)
    return asyncio.run(main())


async def until_the_server_closes(conn):
    deadline = time.monotonic() + WAIT
    while not conn.reader.at_eof():
        assert time.monotonic() < deadline, "the server kept an idle connection open"
        await asyncio.sleep(0.05)


def test_concurrent_async_calls_each_take_a_connection_kept_for_later_calls(served):
    async def test(client):
        replies = await asyncio.gather(*(client.describe("initial") for _ in range(3)))
        assert [reply.name for reply in replies] == ["initial"] * 3
        kept = list(client._idle)
        assert len(kept) == 3
        await client.states()
        assert sorted(map(id, client._idle)) == sorted(map(id, kept))
    run_async(served, test)


def test_an_async_client_survives_the_server_closing_an_idle_connection(served):
    async def test(client):
        await client.states()
        [first] = client._idle
        await until_the_server_closes(first)
        assert (await client.execute("1 + 1")).error is None  # a POST is never sent twice
        assert client._idle and first not in client._idle
    run_async(served, test)


def test_an_async_get_meeting_a_closed_connection_is_sent_again(served, monkeypatch):
    async def test(client):
        await client.states()
        await until_the_server_closes(client._idle[0])
        monkeypatch.setattr(http11.Connection, "usable", lambda conn: True)  # not seen
        return await client.states()
    assert run_async(served, test) == {"states": ["initial"]}


def test_an_async_download_left_half_read_costs_only_its_connection(served):
    async def test(client):
        await client.upload("big.txt", b"a" * 500_000)
        async with await client.open_file("big.txt") as remote:
            assert await remote.read(10) == b"a" * 10
        assert client._idle == []  # closed, not kept: the rest of the file was on it
        return (await client.list_files()).files[0]["name"]
    assert run_async(served, test) == "big.txt"
