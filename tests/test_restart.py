"""Durable states with real server processes: SIGKILL, restart on the same --state-dir, probe.

Each test starts ``python -m snapshot_kernel.main --state-dir DIR`` on port 0,
talks to it with ``http.client``, kills it with SIGKILL (no clean stop, no
atexit, as an OOM kill or a crash would), starts it again on the same
directory, and checks what a user sees: every state a reply acknowledged is
back and behaves as before, probed by running cells against it. Every wait is
bounded (``test_server.TIMEOUT`` or its own bound).
"""

import http.client
import itertools
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from test_server import TIMEOUT, TOKEN, Server, call, server_env

pytest.importorskip("pandas")  # the mixed cells keep arrays and frames in states


class Durable:
    """Servers started one after another on one state directory."""

    def __init__(self, state_dir, flags=()):
        self.state_dir, self.flags = str(state_dir), list(flags)
        self.servers = []

    def start(self, cwd=None, env=None):
        """Start a server on the directory, from ``cwd`` with ``env`` added to its environment."""
        server = Server(TOKEN, ["--state-dir", self.state_dir, *self.flags], cwd=cwd, env=env)
        self.servers.append(server)
        server.wait_until_listening()
        return self

    @property
    def server(self):
        return self.servers[-1]

    def kill(self):
        """SIGKILL: nothing of the server runs after it, not even a finally."""
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait(TIMEOUT)

    def restart(self, cwd=None, env=None):
        self.kill()
        return self.start(cwd, env)

    def stop_all(self):
        for server in self.servers:
            server.stop()

    def request(self, method, path, body=None, timeout=TIMEOUT):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=timeout)
        try:
            return call(conn, method, path, body)
        finally:
            conn.close()

    def execute(self, code, state, new_state_name=None, **fields):
        """The reply of a cell that must run (it may raise: the reply says so)."""
        body = {"code": code, "state_name": state, **fields}
        if new_state_name is not None:
            body["new_state_name"] = new_state_name
        status, reply = self.request("POST", "/execute", body)
        assert status == 200, reply
        return reply

    def run(self, code, state, new_state_name=None, **fields):
        """The reply of a cell that must succeed and store ``new_state_name``."""
        reply = self.execute(code, state, new_state_name, **fields)
        assert reply["error"] is None, "".join(reply["error"]["traceback"])
        assert new_state_name is None or reply["state_name"] == new_state_name
        return reply

    def printed(self, code, state):
        """What ``code`` prints when run on ``state``."""
        return stdout(self.run(code, state))

    def describe(self, name):
        status, described = self.request("GET", f"/states/{name}")
        assert status == 200, described
        return described

    def states(self):
        return self.request("GET", "/states")[1]["states"]


def stdout(reply):
    return "".join(item["text"] for item in reply["output"]
                   if item["output_type"] == "stream" and item["name"] == "stdout")


@pytest.fixture
def durable(tmp_path):
    """``durable(*flags)``: a Durable on a fresh state directory, started."""
    made = []

    def start(*flags):
        made.append(Durable(tmp_path / "states", flags).start())
        return made[-1]

    yield start
    for each in made:
        each.stop_all()


def failed_start(state_dir, *flags):
    """``(exit status, stderr)`` of a server that must refuse to start on ``state_dir``."""
    done = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0",
                           "--state-dir", str(state_dir), *flags],
                          env=server_env(TOKEN), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=TIMEOUT)
    return done.returncode, done.stderr


# -- mixed cells, killed right after a reply ---------------------------------------------------

MIXED = {
    "base": ("initial", """
import threading
import numpy as np, pandas as pd
SCALE = 2
class Point:
    def __init__(self, x): self.x = x
    def norm(self): return abs(self.x) * SCALE
def counter():
    n = 0
    def inc():
        nonlocal n
        n += 1
        return n
    return inc
inc = counter(); inc()
pts = [Point(1), Point(-3)]
alias = pts
square = lambda v: v * v * SCALE
lock = threading.Lock()
gen = (i for i in range(3))
"""),
    "data": ("base", """
a = np.arange(300_000) * 1.0  # 2.4 MB: a blob file, mapped copy-on-write
v = a[10:20]
small = np.arange(5)
df = pd.DataFrame({"x": np.arange(4) * 1.5, "o": [[i] for i in range(4)]})
first = df.at[0, "o"]
"""),
    "changed": ("data", """
v[0] = -1.0
a[100_000] = 7.0
df.at[1, "o"].append("x")
pts.append(Point(5))
SCALE = 3
inc()
"""),
    "branch": ("base", """
alias.append(Point(-7))
def total(): return sum(p.norm() for p in pts)
"""),
}

# state: (probe cell, what it prints). Each probe rebinds a global last and calls the
# state's functions again: they must read the globals of the state they run in.
PROBES = {
    "base": ("print(pts[1].norm(), alias is pts, isinstance(pts[0], Point), "
             "type(pts[1]) is Point, inc(), square(3))\n"
             "SCALE = 10\nprint(pts[1].norm(), square(1))",
             "6 True True True 2 18\n30 10\n"),
    "data": ("print(v.base is a, v[0], a[15], small.sum(), df.x.tolist(), df.o.tolist(), "
             "first is df.at[0, 'o'], len(pts))\n"
             "v[1] = 99.0\nprint(a[11], type(df.at[2, 'o']).__name__)",
             "True 10.0 15.0 10 [0.0, 1.5, 3.0, 4.5] [[0], [1], [2], [3]] True 2\n"
             "99.0 list\n"),
    "changed": ("print(a[10], v[0], v.base is a, a[100000], df.at[1, 'o'], len(pts), "
                "pts[2].norm(), inc(), first is df.at[0, 'o'], isinstance(pts[2], Point))\n"
                "SCALE = 1\nprint(pts[2].norm(), square(2))",
                "-1.0 -1.0 True 7.0 [1, 'x'] 3 15 3 True True\n5 4\n"),
    "branch": ("print(len(pts), total(), alias is pts, pts[2].x)\nSCALE = 1\nprint(total())",
               "3 22 True -7\n11\n"),
}


def build_mixed(durable):
    """Run the MIXED cells; ``{state: its /execute reply}``."""
    return {name: durable.run(code, parent, name) for name, (parent, code) in MIXED.items()}


def assert_probes(durable, probes=PROBES):
    for name, (code, expected) in probes.items():
        assert durable.printed(code, name) == expected, f"probe of {name!r}"


def test_every_acknowledged_state_behaves_as_before_a_sigkill(durable):
    server = durable()
    replies = build_mixed(server)  # the kill follows the last reply at once
    server.restart()
    assert server.states() == ["initial", *MIXED]
    for name, (parent, code) in MIXED.items():
        described = server.describe(name)
        assert (described["parent"], described["code"]) == (parent, code)
        assert replies[name]["parent"] == parent
    assert_probes(server)


def test_a_second_restart_brings_back_the_same_states(durable):
    server = durable()
    build_mixed(server)
    server.restart()
    timestamps = {name: server.describe(name)["timestamp"] for name in MIXED}
    server.restart()
    assert {name: server.describe(name)["timestamp"] for name in MIXED} == timestamps
    assert_probes(server)


LOST = {"lock": "cannot pickle '_thread.lock'", "gen": "cannot pickle 'generator'"}


def test_a_lock_and_a_generator_are_reported_lost_and_fail_saying_why(durable):
    server = durable()
    replies = build_mixed(server)
    assert sorted(replies["base"]["lost"]) == ["gen", "lock"]
    assert all(LOST[name] in replies["base"]["lost"][name] for name in LOST)
    server.restart()
    for state in ("base", "changed", "branch"):  # children lose what their parent lost
        described = server.describe(state)
        assert sorted(described["lost"]) == ["gen", "lock"], state
        assert "lock" not in described["variables"] and "gen" not in described["variables"]
        for name, use in (("lock", "lock.acquire()"), ("gen", "next(gen)")):
            error = server.execute(use, state)["error"]
            assert error["ename"] == "NameError", (state, error)
            assert f"'{name}' was in this state but could not be saved" in error["evalue"]
            assert LOST[name] in error["evalue"]
    assert_probes(server)  # the rest of each state is whole


# -- concurrent load, killed at a random moment ------------------------------------------------

SLOTS = 1 << 18  # float64s: a 2 MiB array, so a blob file with pages changed per state
ROOT = f"""
import numpy as np
big = np.zeros({SLOTS})
path = []
alias = path
def where(): return len(path), (path[-1] if path else None)
"""
STEP = "path.append({name!r})\nbig[len(path) * 997 % {slots}] += len(path)\nalias = path"
LOAD_PROBE = ("print(path, where(), alias is path, int(big.sum()), "
              "np.flatnonzero(big).tolist())")


def expected_probe(path):
    """What LOAD_PROBE prints on the state at the end of ``path`` (ROOT, then STEPs)."""
    depth = len(path)
    indices = sorted(k * 997 % SLOTS for k in range(1, depth + 1))
    return (f"{path} {(depth, path[-1] if path else None)} True {depth * (depth + 1) // 2} "
            f"{indices}\n")


class Load:
    """Client threads that chain and branch cells until the server dies, recording what
    they sent (``sent``: name -> parent, before sending) and what replies acknowledged."""

    def __init__(self, durable, seed, clients=4):
        self.durable, self.seed = durable, seed
        self.sent, self.acked, self.failed = {"root": None}, ["root"], []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(n,), daemon=True)
                        for n in range(clients)]

    def _client(self, number):
        rng = random.Random(self.seed * 1000 + number)
        mine = "root"
        for count in itertools.count():
            with self._lock:
                parent = mine if rng.random() < 0.6 else rng.choice(self.acked)
                name = f"c{number}-{count}"
                self.sent[name] = parent
            code = STEP.format(name=name, slots=SLOTS)
            try:
                status, reply = self.durable.request("POST", "/execute", {
                    "code": code, "state_name": parent, "new_state_name": name,
                    "exec_id": name})
            except (OSError, http.client.HTTPException):  # the server was killed
                return
            with self._lock:
                if status == 200 and reply["state_name"] == name:
                    self.acked.append(name)
                    mine = name
                else:
                    self.failed.append((status, reply))

    def run_until_killed(self, delay):
        for thread in self.threads:
            thread.start()
        time.sleep(delay)
        self.durable.kill()
        for thread in self.threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive(), "a client hung after the kill"
        with self._lock:
            return list(self.acked)

    def path(self, name):
        path = []
        while name != "root":
            path.append(name)
            name = self.sent[name]
        return path[::-1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_under_concurrent_load_a_sigkill_loses_no_acknowledged_state(durable, seed):
    server = durable()
    server.run(ROOT, "initial", "root")
    load = Load(server, seed)
    acked = load.run_until_killed(random.Random(seed).uniform(0.3, 1.5))
    assert load.failed == [], f"seed {seed}: cells failed before the kill"
    assert len(acked) > 10, f"seed {seed}: too little load to mean anything"
    server.start()
    states = server.states()
    assert set(acked) <= set(states), f"seed {seed}: lost {sorted(set(acked) - set(states))}"
    assert set(states) <= set(load.sent) | {"initial"}, f"seed {seed}: states nobody made"
    assert_executions_agree_with_states(server, load, states)
    for name in states[1:]:  # acknowledged or not, a state that is there is whole
        assert server.printed(LOAD_PROBE, name) == expected_probe(load.path(name)), (seed, name)


def assert_executions_agree_with_states(server, load, states):
    """No execution whose state exists is reported as ended by the restart, and those
    reported so are executions the server received but never answered (read before any
    probe runs, so every execution listed is from before the kill)."""
    ended = {run["exec_id"]: run for run in server.request("GET", "/executions")[1]["finished"]}
    for exec_id, run in ended.items():
        assert run["interrupt_reason"] == "restart", run
        assert exec_id in load.sent and exec_id not in load.acked, run
        assert exec_id not in states, f"{exec_id} stored its state, yet is reported as cut short"


# -- a restart elsewhere: what cells chose stays, the rest is the new server's -------------------

CHOSEN = {  # state: (its cell on "base", a probe, what it prints after the restart: {B} is there)
    "base": ("pass", "print(os.getcwd(), os.environ.get('SK_SERVER'))", "{B} b"),
    "inside": ("os.makedirs('data', exist_ok=True)\nos.chdir('data')", "print(os.getcwd())",
               "{B}/data"),
    "env": ("os.environ['SK_CELL'] = 'chosen'",
            "print(os.environ.get('SK_CELL'), os.environ.get('SK_SERVER'))", "chosen b"),
    "path": ("sys.path.append('/sk-cell')",
             "print([p for p in sys.path if p.startswith('/sk-')], '{A}' in sys.path)",
             "['/sk-cell'] False"),
    "warned": ("warnings.simplefilter('error', UserWarning)",
               "print([f[0] for f in warnings.filters if f[2] is UserWarning][:1])", "['error']"),
    "umask": ("os.umask(0o077)", "m = os.umask(0o022); os.umask(m); print(oct(m))", "0o77"),
}


def test_a_restart_in_another_directory_keeps_what_cells_chose_and_nothing_else(
        durable, tmp_path):
    """The server killed with SIGKILL and started again from another directory, with
    another environment (a new pod, a deploy): nine checks."""
    here, there, gone = (tmp_path / name for name in ("a", "b", "gone"))
    for each in (here, there / "data", gone):
        each.mkdir(parents=True)
    first = durable()  # started from the test's directory: restarted below from ``here``
    first.restart(cwd=str(here), env={"SK_SERVER": "a", "PYTHONPATH": str(here)})
    first.run("import os, sys, random, warnings", "initial", "base")
    for name, (cell, _, _) in CHOSEN.items():
        if name != "base":
            first.run(cell, "base", name)
    first.run(f"os.chdir({str(gone)!r})", "base", "elsewhere")
    first.run("random.seed(3)", "base", "seeded")
    draws = first.printed("print(random.random())", "seeded")
    first.restart(cwd=str(there), env={"SK_SERVER": "b"})
    gone.rmdir()
    assert set(first.states()) >= {*CHOSEN, "elsewhere", "seeded"}                    # 1
    for name, (_, probe, expected) in CHOSEN.items():                                # 2-7
        expected = expected.format(A=here, B=there.resolve())
        assert first.printed(probe, name) == expected + "\n", name
    assert first.printed("print(random.random())", "seeded") == draws                # 8
    reply = first.execute("print('ran')", "elsewhere")                               # 9
    assert reply["error"]["ename"] == "SettingError" and str(gone) in reply["error"]["evalue"]
    assert first.printed("print('ran')", "base") == "ran\n"
