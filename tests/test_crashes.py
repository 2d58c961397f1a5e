"""Cells that crash the server process, against the real server and its supervisor.

Each crash kind is run on a server started as a user starts it (``test_server.Server``):
by default (a private state directory), with ``--state-dir`` and with ``--in-memory``.
After each, what a user sees: the server answers again within BACK s (connections
made meanwhile wait, none is refused), the states a reply acknowledged are there
(all but ``--in-memory``), the crashed
execution says ``crashed`` and why, new cells run on old states, and SIGTERM
still ends the server within 5 s. Every wait is bounded.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from test_openapi import Described
from test_server import (SERVER_TMPDIR, TIMEOUT, TOKEN, Server, call, server_env,  # noqa: F401
                         start_server)
from snapshot_kernel import cli, crashes, deaths, supervisor
from snapshot_kernel.web.process import SHUTDOWN_TIMEOUT

BACK = 3.0  # seconds from a crash to an answered GET /states, at most (measured: 0.02-0.3 s)
CLIENTS = 4

# kind: (cell, the signal it dies of or None, its exit status or None)
CRASHES = {
    "os._exit": ("import os\nos._exit(7)", None, 7),
    "ctypes NULL read": ("import ctypes\nctypes.string_at(0)", "SIGSEGV", None),
    "faulthandler._sigsegv": ("import faulthandler\nfaulthandler._sigsegv()", "SIGSEGV", None),
    "os.abort": ("import os\nos.abort()", "SIGABRT", None),
}
SLEEPING = "import time\ntime.sleep(60)"  # a cell still running when SIGKILL comes from outside
MODES = ("default", "--state-dir", "--in-memory")


def mode_flags(mode, tmp_path):
    return {"default": [], "--state-dir": ["--state-dir", str(tmp_path / "states")],
            "--in-memory": ["--in-memory"]}[mode]


@pytest.fixture(params=MODES)
def crashable(request, start_server, tmp_path):
    """A server in each mode, holding state ``before`` (x = 41), which a reply acknowledged."""
    server = start_server(flags=mode_flags(request.param, tmp_path))
    server.durable = request.param != "--in-memory"
    status, reply = request_json(server, "POST", "/execute",
                                 {"code": "x = 41", "state_name": "initial",
                                  "new_state_name": "before"})
    assert (status, reply["state_name"]) == (200, "before"), reply
    return server


def request_json(server, method, path, body=None, timeout=TIMEOUT):
    """``(status, JSON body)`` of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        return call(conn, method, path, body)
    finally:
        conn.close()


def crash_with(server, code, exec_id, state="before"):
    """Run ``code``, which kills the server process: no reply comes, the connection ends."""
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        request_json(server, "POST", "/execute",
                     {"code": code, "state_name": state, "exec_id": exec_id})


def server_process(server):
    """The pid of the supervisor's server process (its one child)."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            if int(fields[1]) == server.process.pid and fields[0] != "Z":
                children.append(int(entry))
    assert len(children) == 1, f"the supervisor has children {children}"
    return children[0]


def seconds_until_states_answer(server):
    """Seconds until GET /states answers 200 on a fresh connection, asked at once."""
    started = time.monotonic()
    status, body = request_json(server, "GET", "/states", timeout=BACK)
    assert status == 200, body
    return time.monotonic() - started, body["states"]


def assert_told(server, exec_id, signal_name, exit_status):
    """GET /executions/<exec_id> says the execution crashed, and how, as documented."""
    status, report = request_json(server, "GET", f"/executions/{exec_id}")
    assert status == 200, report
    assert report["status"] == "crashed"
    crash = report["crash"]
    assert (crash["signal"], crash["exit_status"]) == (signal_name, exit_status)
    assert crash["likely_out_of_memory"] is False
    assert (signal_name or f"status {exit_status}") in crash["cause"]
    assert report["reply"]["error"]["ename"] == "KernelCrash"
    assert crash["cause"] in report["reply"]["error"]["evalue"]
    kept = "checkpoints" if server.durable else "without --in-memory"
    assert kept in report["reply"]["error"]["evalue"]
    document = request_json(server, "GET", "/openapi.json")[1]
    Described(document).validate(report, "/components/schemas/Execution")
    listed = request_json(server, "GET", "/executions")[1]["finished"]
    assert [run["status"] for run in listed if run["exec_id"] == exec_id] == ["crashed"]


def assert_serves_on(server, states):
    """Acknowledged states survived (but with --in-memory), and new cells run on them."""
    if server.durable:
        assert "before" in states
        status, reply = request_json(server, "POST", "/execute",
                                     {"code": "x + 1", "state_name": "before"})
        assert reply["output"][-1]["data"]["text/plain"] == "42", reply
    else:
        assert states == ["initial"]
    status, reply = request_json(server, "POST", "/execute",
                                 {"code": "y = 1\ny + 1", "state_name": "initial",
                                  "new_state_name": "after"})
    assert (status, reply["error"], reply["state_name"]) == (200, None, "after"), reply


def assert_stops_cleanly(server):
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(SHUTDOWN_TIMEOUT + 1) == 0
    assert time.monotonic() - started < SHUTDOWN_TIMEOUT


@pytest.mark.parametrize("code, signal_name, exit_status", CRASHES.values(), ids=CRASHES)
def test_a_cell_that_crashes_the_process_is_reported_and_the_server_serves_on(
        crashable, code, signal_name, exit_status):
    crash_with(crashable, code, "crasher")
    back, states = seconds_until_states_answer(crashable)
    assert back < BACK
    assert_told(crashable, "crasher", signal_name, exit_status)
    assert_serves_on(crashable, states)
    assert_stops_cleanly(crashable)


def test_a_sigkill_from_outside_is_reported_to_the_async_poller(crashable):
    status, started = request_json(crashable, "POST", "/execute",
                                   {"code": SLEEPING, "state_name": "before",
                                    "exec_id": "sleeper", "wait": False})
    assert (status, started["status"]) == (202, "running")
    os.kill(server_process(crashable), signal.SIGKILL)
    back, states = seconds_until_states_answer(crashable)
    assert back < BACK
    status, polled = request_json(crashable, "GET", "/executions/sleeper?wait=5")
    assert (status, polled["status"], polled["crash"]["signal"]) == (200, "crashed", "SIGKILL")
    assert_told(crashable, "sleeper", "SIGKILL", None)
    assert_serves_on(crashable, states)
    assert_stops_cleanly(crashable)


@pytest.mark.parametrize("mode", MODES[:2])
def test_checkpoints_a_crashed_cell_stored_are_kept_and_listed(start_server, tmp_path, mode):
    server = start_server(flags=mode_flags(mode, tmp_path))
    code = "x = 1\ncheckpoint(progress='half')\nx = 2\nimport os\nos._exit(3)"
    crash_with(server, code, "halfway", "initial")
    _, states = seconds_until_states_answer(server)
    assert "halfway@1" in states
    status, report = request_json(server, "GET", "/executions/halfway")
    assert (report["status"], [point["state_name"] for point in report["checkpoints"]]) == \
        ("crashed", ["halfway@1"])
    assert "the last is 'halfway@1'" in report["reply"]["error"]["evalue"]
    status, reply = request_json(server, "POST", "/execute",
                                 {"code": "x", "state_name": "halfway@1"})
    assert reply["output"][-1]["data"]["text/plain"] == "1"


@pytest.fixture
def memory_cgroup():
    """``limit(pid)``: move ``pid`` into a new memory cgroup (under this process's own) that
    holds OOM_LIMIT bytes, swap included. Skips where no cgroup can be made (not root,
    no writable cgroup file system): an OOM kill cannot be caused safely otherwise."""
    made = []

    def limit(pid):
        for directory, files in _cgroup_candidates():
            try:
                os.mkdir(directory)
            except OSError:  # not ours to write: try the next kind, or skip
                continue
            made.append(directory)
            for name in files:
                if os.path.exists(os.path.join(directory, name)):
                    with open(os.path.join(directory, name), "w") as limit_file:
                        limit_file.write(str(OOM_LIMIT) if "swap" not in name else "0")
            with open(os.path.join(directory, "cgroup.procs"), "w") as procs:
                procs.write(str(pid))
            return
        pytest.skip("no memory cgroup can be made here")

    yield limit
    for directory in made:
        deadline = time.monotonic() + TIMEOUT
        while True:  # the killed process leaves it shortly
            try:
                os.rmdir(directory)
                break
            except OSError:
                assert time.monotonic() < deadline, f"{directory} stayed busy"
                time.sleep(0.05)


OOM_LIMIT = 300 << 20


def _cgroup_candidates():
    """``(new cgroup directory, limit files)`` for this process's memory cgroup, v1 or v2."""
    name = f"snapshot-kernel-test-{os.getpid()}"
    with open("/proc/self/cgroup") as lines:
        entries = [line.rstrip("\n").split(":", 2) for line in lines]
    for _, controllers, path in entries:
        if "memory" in controllers.split(","):
            yield (os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"), name),
                   ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"))
        elif controllers == "":
            yield (os.path.join("/sys/fs/cgroup", path.lstrip("/"), name),
                   ("memory.max", "memory.swap.max"))


def test_an_oom_kill_is_reported_as_likely_out_of_memory(start_server, memory_cgroup):
    server = start_server()
    memory_cgroup(server_process(server))
    crash_with(server, "b = bytearray(2 * 10**9)", "hungry", "initial")
    seconds_until_states_answer(server)
    status, report = request_json(server, "GET", "/executions/hungry")
    assert (status, report["status"]) == (200, "crashed")
    assert (report["crash"]["signal"], report["crash"]["likely_out_of_memory"]) == \
        ("SIGKILL", True)
    assert "likely out of memory" in report["reply"]["error"]["evalue"]


# -- a crash among concurrent clients -------------------------------------------------------


class Clients:
    """CLIENTS threads, each running a chain of cells until a request fails or ``join``; what was
    acknowledged, what was sent without a reply, and refusals (a parent state lost)."""

    def __init__(self, server):
        self.server = server
        self.acked, self.unanswered, self.failed, self.lost_parents = set(), set(), [], []
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(number,), daemon=True)
                        for number in range(CLIENTS)]
        for thread in self.threads:
            thread.start()

    def _run(self, number):
        parent = "before"
        for step in range(10_000):
            if self.stop.is_set():
                return
            name = f"c{number}-{step}"
            body = {"code": f"x += 1\nstep = {step}", "state_name": parent,
                    "new_state_name": name, "exec_id": name}
            try:
                status, reply = request_json(self.server, "POST", "/execute", body)
            except (http.client.HTTPException, ConnectionError):
                with self._lock:
                    self.unanswered.add(name)
                return
            if status == 404:  # its parent was lost with the crashed process
                self.lost_parents.append(reply["error"])
                return
            if status != 200 or reply["error"] is not None:
                self.failed.append(reply)
                return
            with self._lock:
                self.acked.add(name)
            parent = name

    def join(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive(), "a client hung after the crash"


def reported(server, exec_id):
    """The status GET /executions/<exec_id> gives, or None for a 404 (no record)."""
    status, report = request_json(server, "GET", f"/executions/{exec_id}")
    assert status in (200, 404), report
    return report["status"] if status == 200 else None


def test_a_crash_among_four_busy_clients_loses_nothing_acknowledged(crashable):
    clients = Clients(crashable)
    deadline = time.monotonic() + TIMEOUT
    while len(clients.acked) < 20:  # the clients are well under way
        assert time.monotonic() < deadline, "the clients made no progress"
        time.sleep(0.01)
    crash_with(crashable, CRASHES["ctypes NULL read"][0], "crasher")
    clients.join()
    back, states = seconds_until_states_answer(crashable)
    assert back < BACK
    assert clients.failed == []
    assert all("no state named" in error for error in clients.lost_parents)
    assert clients.lost_parents == [] or not crashable.durable
    assert_told(crashable, "crasher", "SIGSEGV", None)
    for exec_id in clients.acked:
        assert reported(crashable, exec_id) in (None, "completed")
    for exec_id in clients.unanswered - set(states):  # cut short: it says so, or it never began
        assert reported(crashable, exec_id) in (None, "crashed")
    if crashable.durable:
        assert clients.acked <= set(states), f"lost {sorted(clients.acked - set(states))}"
        last = max(clients.acked, key=lambda name: int(name.split("-")[1]))
        status, reply = request_json(crashable, "POST", "/execute",
                                     {"code": "x, step", "state_name": last})
        assert reply["output"][-1]["data"]["text/plain"] == \
            f"({41 + int(last.split('-')[1]) + 1}, {last.split('-')[1]})"
    assert_serves_on(crashable, states)
    assert_stops_cleanly(crashable)


# -- the supervisor itself ---------------------------------------------------------------------


def test_sigterm_stops_the_server_even_while_a_cell_holds_the_gil(start_server):  # noqa: F811
    """A regular expression that backtracks for ages never lets the server process's main
    thread run its stop; the supervisor kills it at the deadline instead."""
    server = start_server()
    code = "import re, time\ntime.sleep(0.3)\nre.match(r'(a+)+$', 'a' * 40 + 'b')"
    status, _ = request_json(server, "POST", "/execute",
                             {"code": code, "state_name": "initial", "wait": False})
    assert status == 202
    time.sleep(1)  # the expression has the GIL now
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(SHUTDOWN_TIMEOUT + 1) == 0
    assert time.monotonic() - started < SHUTDOWN_TIMEOUT + 0.5  # 5 s, and a loaded machine's slack


class _Unread:
    """A server started by a process that has gone: nobody reads its stderr."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0"],
            env=server_env(TOKEN), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for line in self.process.stderr:
            if b"listening on" in line:
                self.port = int(line.rsplit(b":", 1)[1])
                break
        self.process.stderr.close()


def test_a_crash_is_survived_when_nobody_reads_stderr():
    """The supervisor's line about the crash, and the next server process's about where it
    listens, once raised BrokenPipeError: the supervisor died, or the new process did."""
    server = _Unread()
    try:
        assert request_json(server, "GET", "/states")[0] == 200  # it serves: handlers are set
        crash_with(server, "import os\nos._exit(3)", "gone", state="initial")
        status, report = request_json(server, "GET", "/executions/gone")
        assert (status, report["status"], report["crash"]["exit_status"]) == (200, "crashed", 3)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(TIMEOUT) == 0
    finally:
        server.process.kill()
        server.process.wait(TIMEOUT)


def test_a_server_process_dying_at_every_start_makes_the_supervisor_give_up(tmp_path):
    """A crash loop is bounded, paced, and explained on stderr."""
    code = ("import os, signal, sys\n"
            "os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGSEGV))\n"
            "from snapshot_kernel.main import main\n"
            "main(sys.argv[1:])\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, "--bind", "127.0.0.1:0"],
                          env=server_env(TOKEN), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    elapsed = time.monotonic() - started
    pauses = sum(supervisor.FIRST_PAUSE * 2 ** n for n in range(supervisor.MAX_START_FAILURES - 1))
    assert done.returncode == 1
    assert pauses <= elapsed < TIMEOUT
    assert done.stderr.count("before it could serve") == supervisor.MAX_START_FAILURES
    assert "SIGSEGV" in done.stderr and "giving up" in done.stderr
    assert "listening" not in done.stderr


def test_a_port_in_use_is_refused_before_any_server_process_starts():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--bind",
                               f"127.0.0.1:{port}"], env=server_env(TOKEN),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_sigkill_of_the_supervisor_ends_its_server_process(start_server):  # noqa: F811
    server = start_server()
    child = server_process(server)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while os.path.exists(f"/proc/{child}") and _state(child) != "Z":
        assert time.monotonic() < deadline, "the server process outlived its supervisor"
        time.sleep(0.02)


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:  # gone
        return "Z"


def test_a_cell_past_the_memory_limit_fails_and_the_server_process_lives_on(start_server):
    server = start_server(flags=["--max-cell-memory", "300000000"])
    before = server_process(server)
    status, reply = request_json(server, "POST", "/execute", {
        "code": "x = []\nwhile True:\n    x.append(bytearray(10 ** 6))", "state_name": "initial",
        "exec_id": "grower"})
    assert (status, reply["error"]["ename"]) == (200, "MemoryError"), reply
    assert "past its --max-cell-memory of 300 MB" in reply["error"]["evalue"]
    status, record = request_json(server, "GET", "/executions/grower")
    assert (record["status"], record["interrupt_reason"]) == ("interrupted", "memory")
    Described(request_json(server, "GET", "/openapi.json")[1]).validate(
        record, "/components/schemas/Execution")
    assert server_process(server) == before  # no crash, no restart
    status, reply = request_json(server, "POST", "/execute", {"code": "1 + 1",
                                                              "state_name": "initial"})
    assert reply["output"][-1]["data"]["text/plain"] == "2"


def test_a_memory_limit_that_is_no_number_is_refused():
    result = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--max-cell-memory",
                             "2GB"], env=server_env(TOKEN), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert "expected a whole number of bytes, got '2GB'" in result.stderr


def test_without_the_supervisor_a_crash_ends_the_server(start_server):  # noqa: F811
    server = start_server(flags=["--no-supervisor"])
    crash_with(server, "import os\nos._exit(7)", "crasher", "initial")
    assert server.process.wait(TIMEOUT) == 7


# -- the private state directory (the default) ------------------------------------------------


def private_dirs(supervisor_pid=None):
    """The private state directories in the servers' $TMPDIR (of one supervisor's, if given)."""
    prefix = cli.PRIVATE_PREFIX + ("" if supervisor_pid is None else f"{supervisor_pid}-")
    return sorted(name for name in os.listdir(SERVER_TMPDIR) if name.startswith(prefix))


def test_the_default_keeps_states_in_a_directory_that_a_clean_stop_removes(start_server):
    server = start_server()
    status, reply = request_json(server, "POST", "/execute",
                                 {"code": "x = 1", "state_name": "initial"})
    assert (status, reply["error"]) == (200, None)
    [directory] = private_dirs(server.process.pid)
    assert os.path.exists(os.path.join(SERVER_TMPDIR, directory, "catalog.sqlite"))
    assert_stops_cleanly(server)
    assert private_dirs(server.process.pid) == []


def test_a_directory_whose_supervisor_was_killed_goes_at_the_next_start(start_server):
    killed = start_server()
    killed.process.kill()  # SIGKILL: the supervisor cannot clean up
    killed.process.wait(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while _state(server_process_of(killed.process.pid)) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # its server process follows it (PR_SET_PDEATHSIG)
    assert len(private_dirs(killed.process.pid)) == 1
    server = start_server()
    assert private_dirs(killed.process.pid) == []
    assert len(private_dirs(server.process.pid)) == 1


def server_process_of(supervisor_pid):
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == supervisor_pid:
                        return int(entry)
            except OSError:
                continue
    return -1  # none left


def _shared_memory_has_room():
    """Whether /dev/shm is a tmpfs this user may write with 1 GiB free, read here apart
    from ``cli``: /proc/mounts' last entry for the point, and statvfs."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            kinds = [line.split()[2] for line in mounts if line.split()[1:2] == ["/dev/shm"]]
        room = os.statvfs("/dev/shm")
    except OSError:
        return False
    return (kinds[-1:] == ["tmpfs"] and os.access("/dev/shm", os.W_OK)
            and room.f_bavail * room.f_frsize >= 1 << 30)


def test_without_tmpdir_the_default_keeps_states_in_shared_memory_where_it_has_room(
        start_server, tmp_path):
    """Shared memory outlives the server process as the disk does, and a new large buffer
    is written there at memory's pace (cli.private_parent). Where /dev/shm is small (a
    container's 64 MB), or $TMPDIR or --max-memory is set, the directory is in $TMPDIR."""
    expected = "/dev/shm" if _shared_memory_has_room() else tempfile.gettempdir()
    server = Server(TOKEN, cwd=tmp_path, env={"TMPDIR": ""})
    try:
        server.wait_until_listening()
        status, reply = request_json(server, "POST", "/execute",
                                     {"code": "import numpy as np\nbig = np.ones(200_000)",
                                      "state_name": "initial", "new_state_name": "big"})
        assert (status, reply["error"]) == (200, None)
        prefix = f"{cli.PRIVATE_PREFIX}{server.process.pid}-"
        [directory] = [entry.path for entry in os.scandir(expected)
                       if entry.name.startswith(prefix)]
        assert os.listdir(os.path.join(directory, "blobs"))  # big's buffer is there
        status, reply = request_json(server, "POST", "/execute",
                                     {"code": "print(big.sum())", "state_name": "big"})
        assert (status, reply["output"][0]["text"]) == (200, "200000.0\n")
        assert_stops_cleanly(server)
        assert not os.path.exists(directory)
    finally:
        server.stop()


def test_a_dead_server_s_directory_goes_from_both_places_whichever_the_next_uses(
        tmp_path, monkeypatch):
    """A directory left in /dev/shm holds memory: a server starting sweeps both places."""
    shared, tmpdir = tmp_path / "shm", tmp_path / "tmp"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    left = [place / f"{cli.PRIVATE_PREFIX}{dead.stdout.strip()}-abc" for place in (shared, tmpdir)]
    for directory in left:
        (directory / "blobs").mkdir(parents=True)
    monkeypatch.setattr(cli, "SHARED_MEMORY", str(shared))  # not a tmpfs: not chosen
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    args = cli.parse_args(["--token", TOKEN])
    made = cli.private_state_dir(args)
    assert os.path.dirname(made) == str(tmpdir) and args.private_dir
    assert not any(directory.exists() for directory in left)


@pytest.mark.parametrize("max_memory, environ, room, expected", [
    (None, {}, 0, "shm"),
    (None, {"TMPDIR": "/somewhere"}, 0, "tmp"),
    (10 ** 9, {}, 0, "tmp"),
    (None, {}, 1 << 62, "tmp"),  # too small
], ids=["room", "TMPDIR set", "--max-memory", "too small"])
def test_the_private_directory_s_place(monkeypatch, max_memory, environ, room, expected):
    if not _shared_memory_has_room():
        expected = "tmp"
    if room:
        monkeypatch.setattr(cli, "SHARED_MEMORY_ROOM", room)
    place = cli.private_parent(max_memory, environ)
    assert place == ("/dev/shm" if expected == "shm" else tempfile.gettempdir())


def test_a_shared_memory_place_that_is_no_memory_file_system_is_not_used(tmp_path):
    assert cli.private_parent(None, {}, shared_memory=str(tmp_path)) == tempfile.gettempdir()
    assert cli.private_parent(None, {}, shared_memory=str(tmp_path / "none")) == \
        tempfile.gettempdir()


def test_in_memory_with_a_state_dir_is_refused(tmp_path):
    result = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--in-memory",
                             "--state-dir", str(tmp_path)], env=server_env(TOKEN),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 2
    assert "--in-memory keeps no state directory" in result.stderr
    assert not os.listdir(tmp_path)


# -- the pieces, without a server --------------------------------------------------------------


class Run:
    """What a Journal reads of an execution."""

    def __init__(self, exec_id, state_name="initial", new_state_name=None, timeout=None):
        self.exec_id, self.state_name, self.new_state_name = exec_id, state_name, new_state_name
        self.started_at, self.timeout = time.time(), timeout


def test_the_journal_lists_what_runs_and_empties_when_taken():
    journal = crashes.Journal(slots=3)
    for run in (Run("a", new_state_name="made"), Run("b", timeout=5.0), Run("c"), Run("d")):
        journal.running(run)  # "d" finds no slot: it runs, unnoted
    journal.ended("b")
    journal.ready()
    ready, summaries = journal.take()
    assert ready is True
    assert [(s["exec_id"], s["new_state_name"]) for s in summaries] == [("a", "made"),
                                                                        ("c", None)]
    assert journal.take() == (False, ())


def test_a_torn_journal_record_reads_as_no_record():
    journal = crashes.Journal(slots=2)
    journal.running(Run("whole", timeout=1.5))
    journal.running(Run("torn"))
    offset = crashes._HEADER + crashes._SLOT  # the second slot: its record cut in half
    length = int.from_bytes(journal._map[offset:offset + 4], "little")
    journal._map[offset + 4 + length // 2:offset + 4 + length] = bytes(length - length // 2)
    ready, summaries = journal.take()
    assert [(s["exec_id"], s["timeout"]) for s in summaries] == [("whole", 1.5)]


def test_an_execution_whose_state_was_saved_before_the_crash_is_not_reported():
    journal = crashes.Journal(slots=4)
    for run in (Run("saved"), Run("saving"), Run("checkpointed"), Run("running")):
        journal.running(run)
    journal.saving("saved", "state-7")     # its transaction committed, then the crash
    journal.saving("saving", "state-8")    # the crash came first: state-8 is not stored
    journal.ready()
    crash = crashes.Crash({}, time.time(), journal.take()[1])
    noted = [{"exec_id": "checkpointed", "checkpoints": [{"state_name": "checkpointed@1"}]}]
    cut_short = crash.cut_short({"initial": None, "state-7": None}, noted)
    assert [summary["exec_id"] for summary in cut_short] == ["checkpointed", "saving", "running"]
    # The state directory's record lists the checkpoints; the journal kept the output.
    assert cut_short[0]["checkpoints"] == noted[0]["checkpoints"]
    assert cut_short[0]["output"] == []


def test_the_journal_keeps_the_latest_output_of_each_execution_in_order():
    journal = crashes.Journal(slots=2)
    first, second = (journal.running(Run(exec_id)) for exec_id in ("first", "second"))
    first.write("stdout", "loading\n")
    first.write("stderr", "a warning\n")
    first.write("stdout", "é and \ud800 kept\n")
    for number in range(5000):
        second.write("stdout", f"{number}\n")
    journal.ready()
    outputs = {summary["exec_id"]: summary["output"] for summary in journal.take()[1]}
    assert outputs["first"] == [
        {"output_type": "stream", "name": "stdout", "text": "loading\n"},
        {"output_type": "stream", "name": "stderr", "text": "a warning\n"},
        {"output_type": "stream", "name": "stdout", "text": "é and \ufffd\ufffd\ufffd kept\n"}]
    [kept] = outputs["second"]
    marker, rest = kept["text"].split("\n", 1)
    assert re.fullmatch(r"\[\.\.\. \d+ bytes of earlier output not kept \.\.\.\]", marker)
    assert rest.endswith("4998\n4999\n")
    numbers = [int(line) for line in rest.splitlines()]
    assert numbers == list(range(numbers[0], 5000))  # whole lines, none missing


def test_an_output_write_cut_short_by_the_crash_spoils_nothing_read():
    journal = crashes.Journal(slots=1)
    tail = journal.running(Run("cut"))
    for number in range(3000):
        tail.write("stdout", f"{number}\n")
    before = tail.outputs()
    # A write that died after copying its bytes and before counting them: the bytes it
    # overwrote are the ring's oldest, which a reader leaves out.
    start = int.from_bytes(journal._map[crashes._HEADER + crashes._RECORD:][:8], "little")
    ring = crashes._HEADER + crashes._RECORD + 8
    size = crashes._RING - 8
    for index in range(crashes._MAX_PIECE):
        journal._map[ring + (start + index) % size] = 0x41
    assert tail.outputs() == before


def test_a_slot_used_again_starts_with_no_output():
    journal = crashes.Journal(slots=1)
    journal.running(Run("one")).write("stdout", "old\n")
    journal.ended("one")
    journal.running(Run("two"))
    assert journal.take()[1][0]["output"] == []


def test_the_journal_names_the_execution_a_forced_stop_ends_the_process_for():
    journal = crashes.Journal(slots=1)
    assert journal.stopped() is None
    journal.forced("stuck-svd")
    assert journal.stopped() == "stuck-svd"
    journal.take()
    assert journal.stopped() is None


def test_a_journal_in_a_file_outlives_its_processes_and_tells_a_stop_from_a_kill(tmp_path):
    path = str(tmp_path / "journal")
    first = crashes.Journal(slots=4, path=path)
    for run in (Run("kept"), Run("ended"), Run("saved")):
        first.running(run)
    first.ended("ended")
    first.saving("saved", "state-1")
    left = crashes.Journal(slots=4, path=path).left_over()  # as after a kill -9: no stopping()
    assert (left.reason, [s["exec_id"] for s in left.running]) == ("restart", ["kept", "saved"])
    assert [s["exec_id"] for s in left.cut_short({"state-1": None}, [])] == ["kept"]
    before = time.time()
    first.stopping()
    first.ended("kept")  # a cell ended by the stop: it stays noted
    left = crashes.Journal(slots=4, path=path).left_over()
    assert (left.reason, [s["exec_id"] for s in left.running]) == ("shutdown", ["kept", "saved"])
    assert before <= left.died_at <= time.time()
    crashes.Journal(slots=4, path=path).forget()
    assert crashes.Journal(slots=4, path=path).left_over() is None
    assert crashes.Journal(slots=8, path=path).left_over() is None  # another size: not one


@pytest.mark.parametrize("status, before, after, expected", [
    (signal.SIGKILL, {"vmstat": 3}, {"vmstat": 4}, ("SIGKILL", None, True)),
    (signal.SIGKILL, {"vmstat": 3}, {"vmstat": 3}, ("SIGKILL", None, False)),
    (signal.SIGKILL, {}, {}, ("SIGKILL", None, False)),
    (signal.SIGSEGV, {"vmstat": 3}, {"vmstat": 4}, ("SIGSEGV", None, False)),
    (3 << 8, {"vmstat": 3}, {"vmstat": 4}, (None, 3, False)),
], ids=["oom", "kill", "unknown", "segv", "exit"])
def test_the_cause_names_the_signal_or_status_and_the_oom_evidence(status, before, after,
                                                                    expected):
    cause = deaths.cause_of(status, before, after)
    assert (cause["signal"], cause["exit_status"], cause["likely_out_of_memory"]) == expected
    assert ("likely out of memory" in cause["cause"]) is expected[2]


def test_oom_kills_are_read_from_the_cgroup_and_the_machine(tmp_path):
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("4:memory:/box\n0::/slice/box\n")
    (proc / "vmstat").write_text("pgfault 10\noom_kill 2\n")
    (cgroups / "memory" / "box").mkdir(parents=True)
    (cgroups / "memory" / "box" / "memory.oom_control").write_text("under_oom 0\noom_kill 5\n")
    (cgroups / "slice" / "box").mkdir(parents=True)
    (cgroups / "slice" / "box" / "memory.events").write_text("oom 1\noom_kill 1\n")
    counts = deaths.oom_kills(str(proc), str(cgroups))
    assert sorted(counts.values()) == [1, 2, 5]
    assert json.dumps(counts)  # plain data
