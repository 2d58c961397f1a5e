"""A waiting POST /execute runs its cell on the HTTP worker that serves it.

Against a real server process on a real socket: a cell that will not stop
still gets its client the stuck reply and costs the server no worker; a
client that hangs up interrupts its cell; a process the cell forks answers
nobody.
"""

import decimal
import json
import socket
import threading
import time

from test_server import (TIMEOUT, TOKEN, call, execute, in_background,  # noqa: F401 (fixtures)
                         server, start_server, wait_for)
from snapshot_kernel.kernel import SnapshotKernel

PROMPT = 1.0  # seconds: what "at once" means
GRACE = 2.0   # the kernel's default grace period after a timeout
HOLD = 8      # seconds a stuck cell stays stuck


def stuck_cell(started, seconds=HOLD):
    """A cell blocked in C (Lock.acquire) for ``seconds``: no interrupt stops it."""
    return ("import threading\nlock = threading.Lock()\nlock.acquire()\n"
            f"open({str(started)!r}, 'w').close()\nlock.acquire(timeout={seconds})")


def raw_exchange(port, body):
    """POST /execute ``body`` on a fresh socket; every byte the server sends until it closes."""
    data = json.dumps(body).encode()
    head = (f"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(head + data)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk


def split_reply(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return lines[0], headers, body


def test_a_stuck_cell_gets_its_reply_and_the_connection_closes(server, tmp_path):
    body = {"code": stuck_cell(tmp_path / "started"), "state_name": "initial",
            "exec_id": "stuck", "timeout": 0.3}
    start = time.monotonic()
    status_line, headers, reply = split_reply(raw_exchange(server.port, body))
    took = time.monotonic() - start
    assert status_line == "HTTP/1.1 200 OK" and headers["Connection"] == "close"
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(reply)  # one whole reply, then the close
    reply = json.loads(reply)
    assert reply["error"]["ename"] == "TimeoutError" and "stuck" in reply["error"]["evalue"]
    assert reply["state_name"] is None and reply["exec_id"] == "stuck"
    assert 0.3 + GRACE <= took < 0.3 + GRACE + PROMPT
    listed = call(server.connect(), "GET", "/executions/stuck")[1]
    assert listed["status"] == "stuck"
    wait_for(lambda: call(server.connect(), "GET", "/executions/stuck")[1]["status"]
             == "timed_out", "the stuck cell to end")
    assert call(server.connect(), "GET", "/states") == (200, {"states": ["initial"]})


def test_a_stuck_cell_in_text_format_gets_the_text_reply(server, tmp_path):
    body = {"code": "print('so far')\n" + stuck_cell(tmp_path / "started", 4),
            "state_name": "initial", "exec_id": "stuck-text", "timeout": 0.3, "format": "text"}
    status_line, headers, reply = split_reply(raw_exchange(server.port, body))
    assert status_line == "HTTP/1.1 200 OK"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Exec-Id"] == "stuck-text" and headers["X-Error-Name"] == "TimeoutError"
    assert reply.decode().startswith("<stdout>\nso far\n</stdout>\n<error>\n"
                                     "TimeoutError: the cell did not stop within 2 s")


def test_a_stuck_cell_costs_no_worker(start_server, tmp_path):
    """Two workers: one held by the stuck cell, one running a slow cell; a control
    request still answers at once, served by the worker that stands in."""
    server = start_server(flags=["--threads", "2", "--max-running", "1"])
    stuck = in_background(lambda: execute(server, stuck_cell(tmp_path / "stuck"), timeout=0.3))
    stuck[0].join(TIMEOUT)
    assert stuck[1][0][1]["error"]["ename"] == "TimeoutError"
    assert call(server.connect(), "GET", "/executions")[1]["executions"][0]["stuck"]
    slow_started = tmp_path / "slow"
    slow = in_background(execute, server, f"open({str(slow_started)!r}, 'w').close()\n"
                                          "import time\ntime.sleep(3)\n'slept'")
    wait_for(slow_started.exists, "the slow cell to start")
    start = time.monotonic()
    assert call(server.connect(), "GET", "/states")[0] == 200
    assert time.monotonic() - start < PROMPT
    slow[0].join(TIMEOUT)
    assert slow[1][0][1]["output"][0]["data"]["text/plain"] == "'slept'"
    # Once the stuck cell ends, its worker goes back to serving: the server is as before.
    wait_for(lambda: not call(server.connect(), "GET", "/executions")[1]["executions"],
             "the stuck cell to end")
    for n in range(4):
        assert execute(server, f"{n} * 2")[1]["output"][0]["data"]["text/plain"] == str(2 * n)


def test_a_client_that_hangs_up_interrupts_its_cell(server, tmp_path):
    started = tmp_path / "started"
    code = (f"open({str(started)!r}, 'w').close()\n"
            "import time\nwhile True:\n    time.sleep(0.01)")
    data = json.dumps({"code": code, "state_name": "initial", "exec_id": "left"}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(f"POST /execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        wait_for(started.exists, "the cell to start")
    start = time.monotonic()
    wait_for(lambda: call(server.connect(), "GET", "/executions/left")[1]["status"]
             == "interrupted", "the cell to be interrupted")
    assert time.monotonic() - start < PROMPT
    assert call(server.connect(), "GET", "/executions/left")[1]["interrupt_reason"] == "disconnect"


def test_a_process_the_cell_forks_ends_with_the_cell_and_answers_nobody(server):
    code = "import os\nchild = os.fork()\nprint('child' if child == 0 else 'parent')\nchild"
    status_line, headers, body = split_reply(raw_exchange(server.port, {
        "code": code, "state_name": "initial", "new_state_name": "forked"}))
    assert status_line == "HTTP/1.1 200 OK"
    assert int(headers["Content-Length"]) == len(body)  # the child wrote nothing after it
    reply = json.loads(body)
    stdout = [item["text"] for item in reply["output"] if item.get("name") == "stdout"]
    assert stdout == ["parent\n"] and reply["state_name"] == "forked"
    child = int(reply["output"][-1]["data"]["text/plain"])  # (3.12+ also warns on stderr)
    wait_for(lambda: _ended(child), "the forked child to end")
    assert call(server.connect(), "GET", "/states") == (200, {"states": ["initial", "forked"]})


def _ended(pid):
    """True once ``pid`` has exited (a zombie the server has not reaped counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_cells_run_on_the_callers_thread_each_in_a_fresh_context():
    kernel = SnapshotKernel()
    try:
        code = ("import decimal, threading\ndecimal.getcontext().prec = 5\n"
                "threading.current_thread().name")
        thread = threading.current_thread()
        name = thread.name
        reply = kernel.execute_here(code, "initial", exec_id="named")
        assert reply["output"][0]["data"]["text/plain"] == "'snapshot-kernel cell named'"
        assert thread.name == name
        again = kernel.execute_here("import decimal\ndecimal.getcontext().prec", "initial")
        assert again["output"][0]["data"]["text/plain"] == "28"
        assert decimal.getcontext().prec == 28  # nor did the cell change the caller's
    finally:
        kernel.close()
