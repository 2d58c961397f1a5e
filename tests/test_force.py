"""A forced stop (POST /interrupt with "force": true) and the output a crash keeps, against
the real server and its supervisor, as a user starts it.

A cell blocked in a call that releases the GIL and never checks for signals (a second
``Lock.acquire`` of a held lock, here; an SVD in LAPACK for a user) cannot be
interrupted. A forced stop gives the interrupt FORCE_GRACE s, then replaces the server
process: every acknowledged state survives, the cell is reported stopped with what it
printed, the other cells running then crashed, with the reason. Every wait is bounded.
"""

import http.client
import os
import signal

import pytest

from test_crashes import BACK, mode_flags, request_json, server_process
from test_openapi import Described
from test_server import TIMEOUT, in_background, start_server, wait_for  # noqa: F401

BLOCKED = ("import threading\nlock = threading.Lock()\nlock.acquire()\n"
           "print('about to block', flush=True)\nlock.acquire()")


def asked_again(server, path):
    """GET ``path`` until the new server process answers: a request the old one took
    before it ended sees its connection close, and a client asks again."""
    outcome = []

    def answered():
        try:
            outcome.append(request_json(server, "GET", path, timeout=BACK))
        except (http.client.HTTPException, ConnectionError):
            return False
        return True

    wait_for(answered, f"GET {path} to be answered")
    return outcome[-1]


def started(server, code, exec_id, state="before"):
    status, reply = request_json(server, "POST", "/execute", {
        "code": code, "state_name": state, "exec_id": exec_id, "wait": False})
    assert status == 202, reply


def running(server, exec_id):
    return request_json(server, "GET", f"/executions/{exec_id}")[1]["status"] == "running"


def printed(server, exec_id, text):
    report = request_json(server, "GET", f"/executions/{exec_id}")[1]
    return text in "".join(item.get("text", "") for item in report["output"])


@pytest.fixture
def supervised(start_server, tmp_path, request):
    """A server (the default, or the mode ``request.param`` names) holding state ``before``."""
    server = start_server(flags=mode_flags(getattr(request, "param", "default"), tmp_path))
    status, reply = request_json(server, "POST", "/execute", {
        "code": "x = 41", "state_name": "initial", "new_state_name": "before"})
    assert (status, reply["state_name"]) == (200, "before"), reply
    return server


@pytest.mark.parametrize("supervised", ["default", "--state-dir"], indirect=True)
def test_a_forced_stop_ends_a_cell_an_interrupt_cannot_reach(supervised):
    server = supervised
    started(server, BLOCKED, "stuck")
    started(server, "print('napping', flush=True)\nimport time\ntime.sleep(60)", "bystander")
    wait_for(lambda: printed(server, "stuck", "about to block")
             and printed(server, "bystander", "napping"), "both cells to print")
    before = server_process(server)
    status, reply = request_json(server, "POST", "/interrupt", {"exec_id": "stuck",
                                                                "force": True})
    assert (status, reply) == (200, {"interrupted": "stuck", "replaced": True})
    status, report = asked_again(server, "/executions/stuck")
    assert server_process(server) != before
    assert (report["status"], report["interrupt_reason"]) == ("interrupted", "force")
    assert report["reply"]["error"]["ename"] == "KeyboardInterrupt"
    assert "stopped by force" in report["reply"]["error"]["evalue"]
    assert report["output"][0] == {"output_type": "stream", "name": "stdout",
                                   "text": "about to block\n"}
    other = request_json(server, "GET", "/executions/bystander")[1]
    assert other["status"] == "crashed" and "'stuck'" in other["crash"]["cause"]
    assert other["reply"]["error"]["ename"] == "KernelCrash"
    assert other["output"][0]["text"] == "napping\n"
    document = request_json(server, "GET", "/openapi.json")[1]
    for each in (report, other):
        Described(document).validate(each, "/components/schemas/Execution")
    assert request_json(server, "GET", "/states")[1]["states"] == ["initial", "before"]
    status, reply = request_json(server, "POST", "/execute", {"code": "x + 1",
                                                              "state_name": "before"})
    assert reply["output"][-1]["data"]["text/plain"] == "42"


def test_a_forced_stop_of_a_cell_the_interrupt_reaches_keeps_the_process(supervised):
    started(supervised, "print('looping', flush=True)\nwhile True:\n    pass", "loop")
    wait_for(lambda: printed(supervised, "loop", "looping"), "the cell to print")
    before = server_process(supervised)
    status, reply = request_json(supervised, "POST", "/interrupt", {"exec_id": "loop",
                                                                    "force": True})
    assert (status, reply) == (200, {"interrupted": "loop", "replaced": False})
    report = request_json(supervised, "GET", "/executions/loop")[1]
    assert (report["status"], report["interrupt_reason"]) == ("interrupted", "request")
    assert server_process(supervised) == before


@pytest.mark.parametrize("flags, says", [(["--in-memory"], "--in-memory"),
                                         (["--no-supervisor"], "supervisor")])
def test_a_forced_stop_is_refused_where_states_or_the_process_would_not_survive(
        start_server, flags, says):
    server = start_server(flags=flags)
    started(server, "import time\ntime.sleep(30)", "nap", "initial")
    wait_for(lambda: running(server, "nap"), "the cell to start")
    status, reply = request_json(server, "POST", "/interrupt", {"exec_id": "nap",
                                                                "force": True})
    assert status == 409 and says in reply["error"]
    assert running(server, "nap")  # refused: nothing was done
    assert request_json(server, "POST", "/interrupt", {"exec_id": "nap"})[0] == 200


def test_a_forced_stop_of_nothing_running_is_404(supervised):
    status, reply = request_json(supervised, "POST", "/interrupt", {"exec_id": "none",
                                                                    "force": True})
    assert status == 404 and "no running execution 'none'" in reply["error"]


def test_a_crash_record_keeps_what_the_cell_printed_before_it(supervised):
    code = ("import sys\nfor i in range(3):\n    print('step', i)\n"
            "print('careful', file=sys.stderr, flush=True)\n"
            "import ctypes\nctypes.string_at(0)")
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        request_json(supervised, "POST", "/execute", {"code": code, "state_name": "before",
                                                      "exec_id": "segv"})
    report = request_json(supervised, "GET", "/executions/segv", timeout=BACK)[1]
    assert report["status"] == "crashed"
    assert report["output"][:2] == [
        {"output_type": "stream", "name": "stdout", "text": "step 0\nstep 1\nstep 2\n"},
        {"output_type": "stream", "name": "stderr", "text": "careful\n"}]
    assert report["output"][-1]["ename"] == "KernelCrash"


def test_a_sigkill_from_outside_keeps_what_an_async_job_printed(supervised):
    started(supervised, "for i in range(100):\n    print('line', i)\n"
                        "import sys\nsys.stdout.flush()\nimport time\ntime.sleep(60)", "job")
    wait_for(lambda: printed(supervised, "job", "line 99"), "the job to print")
    os.kill(server_process(supervised), signal.SIGKILL)
    report = request_json(supervised, "GET", "/executions/job?wait=1", timeout=BACK + 1)[1]
    assert report["status"] == "crashed"
    assert report["output"][0]["text"] == "".join(f"line {i}\n" for i in range(100))
