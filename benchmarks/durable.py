"""What ``--state-dir`` costs, and how fast a server comes back with its states (issue 9).

    python benchmarks/durable.py [--quick]

Every figure is against a baseline measured in the same run, on servers that
are separate processes (see ``harness.py``), each with a state directory of
its own in a temporary folder.

Write cost. Two servers, one in memory and one with ``--state-dir``, build the
same base state (a 400 MB float array and a 2-million-row frame; 10x smaller
with ``--quick``), then run each cell below CHILDREN times from it, each time
as a new child, the two servers taking turns. Time is the median round trip;
"stored" is the growth of the state directory (catalogue and blob files, with
SQLite's write-ahead log folded in) per child. Target: a small
cell (``n = n + 1``) on the big state within 1.5x its in-memory time, and
kilobytes stored per child.

Restart. A server with ``--state-dir`` is given STATES small cells, each a
child of the previous state or of a random earlier one, and is then killed with
SIGKILL. Restarting it on the same directory is timed until it answers
``GET /states`` with all of them, against starting on an empty directory, and
the first cell on a restored state (its values are loaded then) against the
second one on it. Memory is the restarted server's against a fresh one's.
"""

import argparse
import contextlib
import os
import random
import shutil
import signal
import sqlite3
import statistics
import tempfile
import time

import harness
from harness import heading, ms_range, running, settled_memory, verdict

CHILDREN = 10
STATES = 10_000
TIME_TARGET = 1.5
MIB = 1024 ** 2


def base_cell(scale):
    floats, rows = 50_000_000 // scale, 2_000_000 // scale
    return ("import numpy as np, pandas as pd\n"
            f"a = np.random.default_rng(0).random({floats})\n"
            f"df = pd.DataFrame({{f'c{{i}}': np.random.default_rng(i).random({rows}) "
            "for i in range(6)})\n"
            "n = 0")


def write_cells(scale):
    return {"n = n + 1": "n = n + 1",
            "a[0] = 1": "a[0] = 1",
            "a.sum()": "a.sum()",
            f"fresh {100 // scale} MB array": f"b = np.ones({12_500_000 // scale})"}


def stored_bytes(path):
    """Bytes the state directory holds once SQLite's write-ahead log is folded into the
    catalogue (the log is reused, so its size says nothing about what a state added)."""
    catalogue = os.path.join(path, "catalog.sqlite")
    if os.path.exists(catalogue):
        with contextlib.closing(sqlite3.connect(catalogue)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except FileNotFoundError:  # a blob deleted while we walked
                pass
    return total


def measure_writes(scale, root):
    """``{cell: {"memory": times, "durable": times, "stored": bytes per child}}``.

    Both servers run at once and take turns, child by child, so that drift in the
    machine's speed hits both alike."""
    state_dir = os.path.join(root, "writes")
    results = {}
    with running("product") as memory, running("product", ("--state-dir", state_dir)) as durable:
        servers = {"memory": memory, "durable": durable}
        for server in servers.values():
            server.execute(base_cell(scale), "initial", "base")
        for cell, code in write_cells(scale).items():
            before = stored_bytes(state_dir)
            times = {mode: [] for mode in servers}
            for _ in range(CHILDREN):
                for mode, server in servers.items():
                    times[mode].append(server.execute(code, "base")[0])
            results[cell] = dict(times, stored=(stored_bytes(state_dir) - before) / CHILDREN)
    return results


def build_tree(server, count, seed=0):
    """``count`` small states, each a child of the last or of a random earlier one."""
    rng = random.Random(seed)
    names = ["initial"]
    server.execute("n = 0\nsquares = {}", "initial", "s0")
    names.append("s0")
    for index in range(1, count):
        parent = names[-1] if rng.random() < 0.7 else rng.choice(names[1:])
        name = f"s{index}"
        server.execute(f"n = n + 1\nsquares[n] = n * n\nlast = {index}", parent, name)
        names.append(name)
    return names


def timed_start(flags):
    """A started server, and seconds until it answered ``GET /states``; the listing's length."""
    start = time.perf_counter()
    server = harness.Server("product", flags)
    listed = server.request("GET", "/states")["states"]
    return server, time.perf_counter() - start, len(listed)


def measure_restart(count, root):
    state_dir = os.path.join(root, "tree")
    empty_dir = os.path.join(root, "empty")
    with running("product", ("--state-dir", state_dir)) as server:
        build_start = time.perf_counter()
        names = build_tree(server, count)
        build = time.perf_counter() - build_start
        os.kill(server.pid, signal.SIGKILL)  # no clean stop: as an OOM kill would
        server.process.wait()
    results = {"build": build / count, "states": len(names), "store": stored_bytes(state_dir)}
    fresh, results["fresh"], _ = timed_start(("--state-dir", empty_dir))
    try:
        results["fresh memory"] = settled_memory(fresh).anon
    finally:
        fresh.stop()
    restarted, results["restart"], results["listed"] = timed_start(("--state-dir", state_dir))
    try:
        results["restart memory"] = settled_memory(restarted).anon
        deepest = names[-1]
        code = "print(n, len(squares), last)"
        results["first cell"] = restarted.execute(code, deepest)[0]
        results["second cell"] = statistics.median(
            restarted.execute(code, deepest)[0] for _ in range(CHILDREN))
    finally:
        restarted.stop()
    return results


def print_writes(results, scale):
    heading("write cost of --state-dir per execute",
            f"{CHILDREN} children of one base state ({400 // scale} MB array + "
            f"{2_000_000 // scale:,}-row frame); ms median (min-max); target for "
            f"`n = n + 1`: <= {TIME_TARGET}x in memory, kilobytes stored")
    print(f"   {'cell':<20} {'in memory ms':>22} {'--state-dir ms':>22} {'ratio':>6} "
          f"{'stored/child':>13}")
    for cell, result in results.items():
        ratio = statistics.median(result["durable"]) / statistics.median(result["memory"])
        stored = result["stored"]
        shown = (f"{stored:.0f} B" if stored < 10 * 1024 else f"{stored / 1024:.1f} KiB"
                 if stored < MIB else f"{stored / MIB:.1f} MiB")
        mark = f"  {verdict(ratio <= TIME_TARGET and stored < MIB)}" if cell == "n = n + 1" else ""
        print(f"   {cell:<20} {ms_range(result['memory']):>22} {ms_range(result['durable']):>22} "
              f"{ratio:6.2f} {shown:>13}{mark}")


def print_restart(results, count):
    heading(f"restart after SIGKILL with {count:,} states",
            "start until GET /states answers, against an empty state directory in the same run")
    print(f"   built at {results['build'] * 1000:.2f} ms per state over HTTP; "
          f"store {results['store'] / MIB:.1f} MiB ({results['store'] / count:.0f} bytes/state)")
    print(f"   empty directory: {results['fresh']:.2f} s; with the states: "
          f"{results['restart']:.2f} s ({results['restart'] / results['fresh']:.2f}x); "
          f"listed {results['listed']:,} of {results['states']:,} "
          f"{verdict(results['listed'] == results['states'])}")
    print(f"   first cell on the deepest restored state {results['first cell'] * 1000:.1f} ms, "
          f"then {results['second cell'] * 1000:.2f} ms (values load on first use)")
    print(f"   memory (anonymous PSS): fresh {results['fresh memory'] / MIB:.1f} MiB, "
          f"restarted {results['restart memory'] / MIB:.1f} MiB")


def main(quick=False):
    scale, count = (10, STATES // 10) if quick else (1, STATES)
    root = tempfile.mkdtemp(prefix="durable-bench-")
    try:
        for title, measure, show in (
                ("write cost", lambda: measure_writes(scale, root),
                 lambda found: print_writes(found, scale)),
                ("restart", lambda: measure_restart(count, root),
                 lambda found: print_restart(found, count))):
            try:
                found = measure()
            except harness.MEASURE_ERRORS as exc:
                print(f"\n== {title}: failed: {type(exc).__name__}: {exc}")
                continue
            show(found)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller data, 1,000 states")
    main(parser.parse_args().quick)
