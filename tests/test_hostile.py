"""Hostile and careless clients against a real server process on a real socket.

Each attack must leave the server answering a probe (``GET /states`` with the
token, on a fresh connection) within a second throughout. The attacks
themselves live in ``attacks.py``, which also measures them as a script.
"""

import json
import os
import signal
import socket
import time

import pytest

from attacks import (LEFT_BEHIND, SLOW_BODY, SLOWLORIS, Attack, closed_by_peer, execute,
                     flood_head, peak_rss_kib, probe, probes_during, seconds_to_stop)
from test_server import (TIMEOUT, TOKEN, call, in_background, server,  # noqa: F401 (fixtures)
                         start_server, wait_for)
from snapshot_kernel.web.process import SHUTDOWN_TIMEOUT

PROMPT = 1.0  # seconds: what "at once" means for a probe or a refusal
GET_STATES = b"GET /states HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def with_token(request_line, headers=b"", protocol=b"HTTP/1.1"):
    """A request head that carries the token."""
    return (request_line + b" " + protocol + b"\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n".encode() + headers + b"\r\n")


def with_json(path, body):
    data = json.dumps(body).encode()
    return with_token(b"POST " + path, f"Content-Length: {len(data)}\r\n".encode()) + data


def blocking_cell(started, release):
    """A cell that creates ``started``, then waits (30 s at most) until ``release`` exists."""
    return (f"import os, time\nopen({str(started)!r}, 'w').close()\n"
            "deadline = time.monotonic() + 30\n"
            f"while not os.path.exists({str(release)!r}) and time.monotonic() < deadline:\n"
            "    time.sleep(0.02)")


def assert_probes_answer(server, seconds=1.0):
    latencies = probes_during(server.port, seconds)
    assert max(latencies) < PROMPT, f"probe latencies {latencies}"


def exchange(port, data):
    """Send raw ``data`` on a fresh connection and read until the server closes it."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(data)
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except ConnectionResetError:
            pass
    return received


def parse_reply(data):
    """``(status, headers with lower-case names, body, bytes after the reply)``."""
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip()
               for name, _, value in (line.partition(":") for line in lines)}
    length = int(headers.get("content-length", 0))
    return int(status_line.split()[1]), headers, rest[:length], rest[length:]


def assert_json_refusal(data, status):
    got, headers, body, rest = parse_reply(data)
    assert got == status, data[:300]
    assert headers["content-type"] == "application/json"
    assert isinstance(json.loads(body)["error"], str)
    return headers, json.loads(body)["error"], rest


# -- connections ----------------------------------------------------------------------


def test_idle_connections_hold_no_worker_and_are_closed_at_the_request_timeout(start_server):
    server = start_server(flags=["--request-timeout", "2"])
    idle = Attack(server.port, 32)  # twice the workers
    try:
        assert_probes_answer(server)
        wait_for(lambda: idle.closed_by_server() == 32, "the server to close idle connections")
    finally:
        idle.stop()


@pytest.mark.parametrize("opening, trickle", [SLOWLORIS, SLOW_BODY], ids=["slowloris", "slow body"])
def test_200_trickling_connections_do_not_delay_a_probe(start_server, opening, trickle):
    server = start_server(flags=["--request-timeout", "2"])
    attack = Attack(server.port, 200, opening, trickle, interval=0.2)
    try:
        assert_probes_answer(server, seconds=2.5)
        wait_for(lambda: attack.closed_by_server() == 200, "the server to close them all")
    finally:
        attack.stop()


@pytest.mark.parametrize("head, status", [
    (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /states HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n", 431),
    (b"GET /states HTTP/1.1\r\n" + b"X-Pad: aaaaaaaaaa\r\n" * 1000 + b"\r\n", 431),
], ids=["request line", "one header", "many headers"])
def test_a_head_over_max_header_is_refused_as_json(server, head, status):
    headers, message, rest = assert_json_refusal(exchange(server.port, head), status)
    assert "16384" in message and headers["connection"] == "close"
    assert rest == b""


def test_a_200_mb_request_line_costs_no_memory(server):
    before = peak_rss_kib(server.process.pid)
    assert flood_head(server.port, 200 << 20) < 200 << 20  # refused part-way
    assert probe(server.port) < PROMPT
    assert peak_rss_kib(server.process.pid) - before < 4096


def test_past_max_connections_the_longest_waiting_ones_are_dropped(start_server):
    server = start_server(flags=["--max-connections", "8"])
    idle = Attack(server.port, 20)
    try:
        assert_probes_answer(server)
        assert idle.closed_by_server() >= 12
        assert all(closed_by_peer(sock) for sock in idle.sockets[:12])  # the oldest went first
    finally:
        idle.stop()


def test_with_every_connection_busy_a_new_one_is_refused_with_503(start_server, tmp_path):
    server = start_server(flags=["--max-connections", "2"])
    release = tmp_path / "release"
    runners = [in_background(execute, server.port, blocking_cell(tmp_path / f"started-{n}",
                                                                  release))
               for n in range(2)]
    wait_for(lambda: len(list(tmp_path.glob("started-*"))) == 2, "both cells to start")
    start = time.monotonic()
    headers, message, _ = assert_json_refusal(exchange(server.port, GET_STATES), 503)
    assert time.monotonic() - start < PROMPT
    assert headers["retry-after"] == "1" and "--max-connections" in message
    release.touch()
    for thread, outcome in runners:
        thread.join(TIMEOUT)
        assert outcome[0][0] == 200
    assert probe(server.port) < PROMPT


def test_a_refused_request_closes_its_connection(server):
    headers, _, rest = assert_json_refusal(exchange(server.port, GET_STATES + GET_STATES), 401)
    assert headers["connection"] == "close"
    assert rest == b""  # the pipelined second request was not served


# -- control never starves --------------------------------------------------------------


def answered_at_once(server, method, path, body=None):
    start = time.monotonic()
    answer = call(server.connect(), method, path, body)
    assert time.monotonic() - start < PROMPT, f"{method} {path} took too long"
    return answer


def test_control_answers_at_once_while_16_cells_sleep(server):
    """The default --max-running (12 of 16 threads) refuses four of the 16 at once."""
    start = time.monotonic()
    runners = [in_background(lambda: execute(server.port, "import time\ntime.sleep(40)", TIMEOUT))
               for _ in range(16)]
    wait_for(lambda: sum(1 for _, outcome in runners if outcome) == 4, "four refusals")
    assert time.monotonic() - start < 2 * PROMPT
    assert all(outcome[0][0] == 503 for _, outcome in runners if outcome)
    wait_for(lambda: len(call(server.connect(), "GET", "/executions")[1]["executions"]) == 12,
             "twelve cells to run")
    status, listed = answered_at_once(server, "GET", "/executions")
    assert (status, len(listed["executions"])) == (200, 12)
    victim = listed["executions"][0]["exec_id"]
    assert answered_at_once(server, "GET", "/states") == (200, {"states": ["initial"]})
    assert answered_at_once(server, "POST", "/interrupt", {"exec_id": victim}) == (
        200, {"interrupted": victim})
    assert answered_at_once(server, "POST", "/reset") == (200, {"states": ["initial"]})
    for thread, _ in runners:
        thread.join(TIMEOUT)
    errors = [reply["error"]["ename"] for status, reply in (o[0] for _, o in runners)
              if status == 200]
    assert len(errors) == 12  # the interrupted cell may finish before or after the reset
    assert set(errors) <= {"KernelReset", "KeyboardInterrupt"}


def test_a_request_whose_client_left_while_it_queued_is_not_run(start_server, tmp_path):
    server = start_server(flags=["--threads", "3", "--max-running", "2"])
    assert execute(server.port, "x = 1", new_state_name="keep")[0] == 200
    release, ran = tmp_path / "release", tmp_path / "ran"
    runner, _ = in_background(execute, server.port, blocking_cell(tmp_path / "started", release))
    wait_for((tmp_path / "started").exists, "the cell to start")
    stalled_head = with_token(b"POST /interrupt", b"Content-Length: 9\r\n")
    stalled = Attack(server.port, 2, stalled_head + b"{")
    time.sleep(0.5)  # the other two workers now wait for bodies that do not come
    reset = Attack(server.port, 1, with_token(b"POST /reset", b"Content-Length: 0\r\n"))
    cell = {"code": f"open({str(ran)!r}, 'w').close()", "state_name": "keep"}
    execute_ = Attack(server.port, 1, with_json(b"/execute", cell))
    time.sleep(0.3)
    reset.stop()  # both clients give up waiting
    execute_.stop()
    time.sleep(0.3)
    stalled.stop()  # frees the workers, which reach the requests of the clients who left first
    assert probe(server.port) < PROMPT
    time.sleep(0.3)
    assert not ran.exists()
    assert call(server.connect(), "GET", "/states") == (200, {"states": ["initial", "keep"]})
    release.touch()
    runner.join(TIMEOUT)


# -- malformed requests -------------------------------------------------------------------

DEEP = b"[" * 1000 + b"]" * 1000
MALFORMED = {
    "not HTTP": (b"HELLO\r\n\r\n", 400),
    "bare LF line ends": (b"GET /states HTTP/1.1\n\n", 400),
    "lower-case method": (b"get /states HTTP/1.1\r\n\r\n", 400),
    "Content-Length not a number": (with_token(b"POST /execute", b"Content-Length: x\r\n"), 400),
    "HTTP/2.0": (b"GET /states HTTP/2.0\r\n\r\n", 505),
    "JSON nested 1,000 deep": (with_token(b"POST /execute", b"Content-Length: 2000\r\n"
                                                            b"Connection: close\r\n") + DEEP, 400),
    "HTTP/1.0, Transfer-Encoding not UTF-8": (
        with_token(b"POST /execute", b"Transfer-Encoding: \xff\xfe\r\n", b"HTTP/1.0"), 411),
    "HTTP/1.1, Transfer-Encoding not UTF-8": (
        with_token(b"POST /execute", b"Transfer-Encoding: \xff\xfe\r\n"), 501),
}


@pytest.mark.parametrize("request_bytes, status", MALFORMED.values(), ids=MALFORMED)
def test_a_malformed_request_gets_a_json_error(server, request_bytes, status):
    assert_json_refusal(exchange(server.port, request_bytes), status)
    assert probe(server.port) < PROMPT


def test_a_body_that_stalls_is_a_408_after_the_request_timeout(start_server):
    server = start_server(flags=["--request-timeout", "1"])
    start = time.monotonic()
    stalled = with_token(b"POST /execute", b"Content-Length: 20\r\n") + b"{"
    headers, message, rest = assert_json_refusal(exchange(server.port, stalled), 408)
    assert 1 <= time.monotonic() - start < 1 + 2 * PROMPT
    assert headers["connection"] == "close" and rest == b""


def test_a_chunked_body_refused_with_411_is_not_read_as_the_next_request(server):
    chunked = with_token(b"POST /execute", b"Transfer-Encoding: chunked\r\n") + \
        b"5\r\n{\"a\":\r\n0\r\n\r\n"
    headers, message, rest = assert_json_refusal(exchange(server.port, chunked + GET_STATES), 411)
    assert "Content-Length" in message and headers["connection"] == "close"
    assert rest == b""


# -- shutdown -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", LEFT_BEHIND.values(), ids=LEFT_BEHIND)
def test_sigterm_ends_the_server_whatever_a_cell_left_running(server, code):
    status, reply = execute(server.port, code)
    assert (status, reply["error"]) == (200, None)
    assert seconds_to_stop(server, SHUTDOWN_TIMEOUT + 1) < SHUTDOWN_TIMEOUT
    assert server.process.returncode == 0


def test_sigterm_ends_the_server_while_clients_trickle(server):
    attack = Attack(server.port, 20, *SLOWLORIS, interval=0.1)
    try:
        assert seconds_to_stop(server, SHUTDOWN_TIMEOUT + 1) < SHUTDOWN_TIMEOUT
    finally:
        attack.stop()


def test_a_process_a_cell_starts_can_be_terminated(server):
    code = ("import multiprocessing, time\n"
            "p = multiprocessing.Process(target=time.sleep, args=(60,))\n"
            "p.start()\np.terminate()\np.join(3)\np.exitcode")
    status, reply = execute(server.port, code)
    assert (status, reply["output"][-1]["data"]["text/plain"]) == (200, str(-signal.SIGTERM))


def test_a_forked_child_does_not_keep_the_port(start_server):
    first = start_server()
    code = "import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(30)\n    os._exit(0)\n"
    status, reply = execute(first.port, code + "pid")
    assert (status, reply["error"]) == (200, None)
    child = int(reply["output"][-1]["data"]["text/plain"])
    try:
        assert seconds_to_stop(first, SHUTDOWN_TIMEOUT + 1) < SHUTDOWN_TIMEOUT
        os.kill(child, 0)  # still alive, and it was forked with the listening socket
        second = start_server(flags=["--bind", f"127.0.0.1:{first.port}"])
        assert (second.port, probe(second.port) < PROMPT) == (first.port, True)
    finally:
        os.kill(child, signal.SIGKILL)
