"""Every execution a client started can be found after any stop of a server on a state
directory: a SIGTERM (a deploy), a SIGKILL of the server process, of its supervisor, or of a
server without one. Executions whose client waits, async ones, checkpointed ones and one
still waiting for other branches' cells alike are then reported by GET /executions/<exec_id>,
with the status and the reason the docs give (durable-states.md, crashes.md), by the server
that takes over the directory."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import types

import pytest

from helpers import WAIT
from test_crashes import request_json, server_process
from test_openapi import Described
from test_server import TOKEN, server_env, start_server  # noqa: F401

SPIN = "import time\nwhile True:\n    time.sleep(0.01)"
# exec_id: (state, cell, whether its request waits); each runs until the stop, but "held",
# whose state patched json.dumps: cells of such a state run alone, so it waits for the others
EXECUTIONS = {"waiting": ("base", SPIN, True), "async": ("base", SPIN, False),
              "checkpointed": ("base", "checkpoint()\n" + SPIN, False),
              "held": ("patched", SPIN, False)}


def sigterm(server):
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(WAIT) == 0


def kill_supervisor(server):
    server.process.kill()  # its server process dies with it (PR_SET_PDEATHSIG)
    server.process.wait(WAIT)


def kill_server_process(server):
    os.kill(server_process(server), signal.SIGKILL)  # the supervisor starts another


# how: (flags besides --state-dir, stop, whether the same server goes on, status, reason,
# the reply's error)
STOPS = {
    "SIGTERM": ([], sigterm, False, "interrupted", "shutdown", "KernelShutdown"),
    "SIGKILL of the supervisor": ([], kill_supervisor, False, "interrupted", "restart",
                                  "KernelRestart"),
    "SIGKILL of the server process": ([], kill_server_process, True, "crashed", None,
                                      "KernelCrash"),
    "SIGTERM, no supervisor": (["--no-supervisor"], sigterm, False, "interrupted", "shutdown",
                               "KernelShutdown"),
    "SIGKILL, no supervisor": (["--no-supervisor"], kill_supervisor, False, "interrupted",
                               "restart", "KernelRestart"),
}


def start_executions(server):
    """Make the states ``base`` and ``patched``, start each of EXECUTIONS, and return once
    they run (``held`` waits); the waiting request goes on in a thread, whose connection the
    stop ends."""
    for name, code in (("base", "x = 1"),
                       ("patched", "import json\njson.dumps = lambda obj, **k: 'patched'")):
        assert request_json(server, "POST", "/execute", {"code": code, "state_name": "initial",
                                                         "new_state_name": name})[0] == 200
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
    waiting = threading.Thread(target=_wait_quietly, args=(conn,), daemon=True)
    for exec_id, (state, code, waits) in EXECUTIONS.items():
        body = {"code": code, "state_name": state, "exec_id": exec_id, "wait": waits}
        if waits:
            conn.request("POST", "/execute", json.dumps(body),
                         {"Authorization": f"Bearer {TOKEN}"})
            waiting.start()
        else:
            assert request_json(server, "POST", "/execute", body)[0] == 202
    for _ in range(int(WAIT / 0.02)):
        running = request_json(server, "GET", "/executions")[1]["executions"]
        checkpointed = request_json(server, "GET", "/states")[1]["states"]
        statuses = sorted(run["status"] for run in running)
        if statuses == ["running"] * 3 + ["waiting"] and "checkpointed@1" in checkpointed:
            return waiting
        threading.Event().wait(0.02)
    pytest.fail(f"the executions did not all start: {running}")


def _wait_quietly(conn):
    try:
        conn.getresponse().read()
    except (OSError, http.client.HTTPException):  # the stop ended the connection
        pass


@pytest.mark.parametrize("flags, stop, goes_on, status, reason, ename", STOPS.values(),
                         ids=STOPS)
def test_an_execution_running_at_a_stop_is_reported_by_the_next_server(
        start_server, tmp_path, flags, stop, goes_on, status, reason, ename):
    flags = ["--state-dir", str(tmp_path / "states"), *flags]
    server = start_server(flags=flags)
    waiting = start_executions(server)
    stop(server)
    waiting.join(WAIT)
    if not goes_on:
        server = start_server(flags=flags)
    document = Described(request_json(server, "GET", "/openapi.json")[1])
    for exec_id in EXECUTIONS:
        code, report = request_json(server, "GET", f"/executions/{exec_id}")
        assert code == 200, (exec_id, report)
        assert (report["status"], report["interrupt_reason"]) == (status, reason), exec_id
        assert report["reply"]["error"]["ename"] == ename, exec_id
        document.validate(report, "/components/schemas/Execution")
    checkpointed = request_json(server, "GET", "/executions/checkpointed")[1]
    assert "'checkpointed@1'" in checkpointed["reply"]["error"]["evalue"]
    assert request_json(server, "GET", "/states")[1]["states"] == ["initial", "base", "patched",
                                                                  "checkpointed@1"]
    finished = request_json(server, "GET", "/executions")[1]["finished"]
    assert sorted(run["exec_id"] for run in finished) == sorted(EXECUTIONS)


def test_the_next_server_reports_them_once(start_server, tmp_path):
    """Reported records are the new server's own: one more restart does not report them."""
    flags = ["--state-dir", str(tmp_path / "states")]
    server = start_server(flags=flags)
    waiting = start_executions(server)
    sigterm(server)
    waiting.join(WAIT)
    sigterm(start_server(flags=flags))
    server = start_server(flags=flags)
    assert request_json(server, "GET", "/executions/async")[0] == 404
    assert request_json(server, "GET", "/executions")[1] == {"executions": [], "finished": []}


@pytest.mark.parametrize("flags", [[], ["--no-supervisor"]], ids=["supervised", "alone"])
def test_a_server_whose_stderr_nobody_reads_still_stops(flags):
    """Once the process that started it (and read its stderr) has gone, SIGTERM still ends
    the server, with status 0. Alone, it once never exited: the line saying it stops raised
    BrokenPipeError, and the exit waited for the threads of its cells."""
    server = subprocess.Popen([sys.executable, "-m", "snapshot_kernel.main", "--bind",
                               "127.0.0.1:0", *flags], env=server_env(TOKEN),
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for line in server.stderr:
            if b"listening on" in line:
                port = int(line.rsplit(b":", 1)[1])
                break
        server.stderr.close()  # its reader has gone
        # It serves: its handlers are in place (a SIGTERM before them ends it with -15).
        assert request_json(types.SimpleNamespace(port=port), "GET", "/states")[0] == 200
        server.send_signal(signal.SIGTERM)
        assert server.wait(WAIT) == 0
    finally:
        server.kill()
        server.wait(WAIT)
