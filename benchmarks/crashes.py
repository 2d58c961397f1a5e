"""Back fast: from a crash of the server process to the first answered GET /states (issue 17).

    python benchmarks/crashes.py            # 10,000 states in the state directory: ~1 minute
    python benchmarks/crashes.py --quick    # 1,000

A program, not a test: it prints figures and exits 0 whatever they are. Each
server is ``python -m snapshot_kernel.main`` on loopback (``harness.py``), with
its supervisor; the server process is its one child. A crash is a SIGKILL of
that child from here, as the OOM killer would send it: the time runs from just
before ``os.kill`` to the reply of a GET /states sent at once on a fresh
connection (it waits in the listening socket's backlog while the supervisor
starts the next server process, which loads the state directory). Also timed:
a cell calling ``os._exit(1)``, from the moment its connection closes. Servers:
--in-memory, the default (a private state directory), on an empty state directory, and on one holding a chain of STATES
states built over HTTP (each cell ``n += 1`` and one small dict, as in
``durable.py``). Each figure is the median (min-max) of CRASHES crashes; after
each, the test checks that GET /states listed every state.

Target (issue 17): within 1 s for a directory of 10,000 states.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import harness
from harness import heading, ms_range, running, verdict

STATES = 10_000
CRASHES = 10
TARGET = 1.0  # seconds
NAMES = 100


def child_of(server):
    """The pid of the server process: the supervisor's one child."""
    children = [pid for pid in harness.tree_pids(server.pid)
                if pid != server.pid and harness._parent_pid(pid) == server.pid]
    if len(children) != 1:
        raise harness.ServerFailed(f"the supervisor has children {children}")
    return children[0]


def states_now(server):
    """GET /states on a fresh connection (the crash closed the kept-alive one)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/states", headers={"Authorization": f"Bearer {harness.TOKEN}"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise harness.ServerFailed(f"GET /states: {response.status} {body[:200]!r}")
        return json.loads(body)["states"]
    finally:
        conn.close()


def after_sigkill(server, expected):
    """Seconds from SIGKILL of the server process to an answered GET /states."""
    child = child_of(server)
    started = time.perf_counter()
    os.kill(child, signal.SIGKILL)
    names = states_now(server)
    elapsed = time.perf_counter() - started
    if len(names) != expected:
        raise harness.ServerFailed(f"GET /states listed {len(names)}, not {expected}")
    return elapsed


def after_exit_cell(server, expected):
    """Seconds from the close of a cell's connection (it called os._exit) to GET /states."""
    server.connection.close()
    try:
        server.request("POST", "/execute", {"code": "import os\nos._exit(1)",
                                            "state_name": "initial"})
        raise harness.ServerFailed("the cell that calls os._exit got a reply")
    except (http.client.HTTPException, ConnectionError):
        started = time.perf_counter()
    names = states_now(server)
    elapsed = time.perf_counter() - started
    if len(names) != expected:
        raise harness.ServerFailed(f"GET /states listed {len(names)}, not {expected}")
    server.connection.close()  # it was the crashed process's
    return elapsed


def build_chain(server, count):
    for number in range(count):
        start = "n = 0\n" if number == 0 else ""
        parent = "initial" if number == 0 else f"c{number - 1}"
        server.execute(f'{start}n += 1\nv{number % NAMES} = {{"i": {number}}}', parent,
                       f"c{number}")
        if number % 2000 == 1999:
            print(f"   ... {number + 1:,} states", file=sys.stderr, flush=True)


def measure(label, options, states, rows):
    with running("product", options) as server:
        if states:
            build_chain(server, states)
        kills = [after_sigkill(server, states + 1) for _ in range(CRASHES)]
        exits = [after_exit_cell(server, states + 1) for _ in range(CRASHES)]
    rows.append((label, kills, exits))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{STATES // 10:,} states")
    states = STATES // 10 if parser.parse_args(argv).quick else STATES
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = tempfile.mkdtemp(prefix="crash-bench-")
    rows = []
    try:
        measure("--in-memory", ("--in-memory",), 0, rows)
        measure("default (private directory)", (), 0, rows)
        measure("empty --state-dir", ("--state-dir", os.path.join(scratch, "empty")), 0, rows)
        measure(f"--state-dir, {states:,} states",
                ("--state-dir", os.path.join(scratch, "full")), states, rows)
    except harness.MEASURE_ERRORS as exc:
        print(f"\nfailed: {harness.failure(exc)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    heading("back after a crash", f"ms from the crash to an answered GET /states, median "
            f"(min-max) of {CRASHES}; target <= {TARGET * 1000:g} ms with {STATES:,} states")
    print(f"   {'server':28} {'SIGKILL of the process':>24} {'a cell calling os._exit':>24}")
    for label, kills, exits in rows:
        print(f"   {label:28} {ms_range(kills):>24} {ms_range(exits):>24}  "
              f"{verdict(max(kills + exits) <= TARGET)}")


if __name__ == "__main__":
    main()
    harness.finish()
