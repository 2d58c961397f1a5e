"""One gallery cell run again and again on its state, through the server and in a plain
process, each time after the same pause: what a cell the gallery puts over 3x costs when it
is timed more than once.

    python benchmarks/repeat.py plot_voting_decision_regions 8            # 12 runs, back to back
    python benchmarks/repeat.py plot_voting_decision_regions 8 --pause 0.5
    python benchmarks/repeat.py plot_hdbscan 5 --server-option=--no-gc-freeze
    python benchmarks/repeat.py --quick                                   # a smoke run

A program, not a test: it prints figures and exits 0 whatever they are. A product server
(``harness.running``) runs the example's cells before CELL as a chain, then CELL on the
chain's last state TIMES times, each a branch of it; the time is the client's round trip.
A plain ``python`` process (this file with ``--plain``) runs the same cells in one
namespace, then CELL TIMES times on a shallow copy of it (so each run starts from the same
names), on its main thread, after the same pauses. Cells are numbered from 0, as
``gallery.py`` prints them.

Stop 44 found with it that ``plot_voting_decision_regions`` cell 8 is over 3x in the gallery
because of OpenBLAS's thread pool on a two-core machine: after half a second of idle the
plain process takes 95-245 ms for it too, against 16 back to back, and with
``OPENBLAS_NUM_THREADS=1`` both take the same time however they run.
"""

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time

import harness
from gallery import missing_library, split_cells
from harness import heading, ms_range, running

GALLERY = os.path.join(harness.HERE, "gallery")
QUICK = ("plot_frozen_examples", 2, 3)  # example, cell, times: a few seconds


def example_cells(name):
    with open(os.path.join(GALLERY, f"{name}.py")) as file:
        return split_cells(file.read())


def plain_times(name, cell, times, pause):
    """The plain process's seconds for ``cell`` run ``times`` times (``--plain``)."""
    import matplotlib
    matplotlib.use("Agg")
    cells = example_cells(name)
    namespace = {"__name__": "__main__"}
    found = []
    with contextlib.redirect_stdout(io.StringIO()):
        for code in cells[:cell]:
            exec(compile(code, "<cell>", "exec"), namespace)
        code = compile(cells[cell], "<cell>", "exec")
        for _ in range(times):
            time.sleep(pause)
            began = time.perf_counter()
            exec(code, dict(namespace))
            found.append(time.perf_counter() - began)
    return found


def server_times(name, cell, times, pause, options):
    """The server's round trips for ``cell`` on ``times`` branches of the chain's state."""
    cells = example_cells(name)
    with running("product", options) as server:
        state = "initial"
        for code in cells[:cell]:
            _, reply = server.execute(code, state)
            if reply.get("error"):
                raise RuntimeError(f"cell before {cell} failed: {reply['error']}")
            state = reply["state_name"]
        found = []
        for _ in range(times):
            time.sleep(pause)
            elapsed, reply = server.execute(cells[cell], state)
            if reply.get("error"):
                raise RuntimeError(f"cell {cell} failed: {reply['error']}")
            found.append(elapsed)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example", nargs="?", help="a gallery example's name, no .py")
    parser.add_argument("cell", nargs="?", type=int, help="its cell, from 0")
    parser.add_argument("--times", type=int, default=12)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds before each run")
    parser.add_argument("--server-option", action="append", default=[],
                        help="an option for the server (--server-option=--no-gc-freeze)")
    parser.add_argument("--quick", action="store_true", help="a small example, 3 runs")
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.example, args.cell, args.times = QUICK
    if args.example is None or args.cell is None:
        parser.error("give an example and a cell, or --quick")
    missing = missing_library()
    if missing is not None:
        print(f"{missing} is not installed here: the gallery's examples need it; nothing ran")
        return
    if args.plain:
        print(json.dumps(plain_times(args.example, args.cell, args.times, args.pause)))
        return
    plain = subprocess.run([sys.executable, __file__, args.example, str(args.cell), "--plain",
                            "--times", str(args.times), "--pause", str(args.pause)],
                           capture_output=True, text=True, check=True, cwd=harness.HERE)
    plain = json.loads(plain.stdout.splitlines()[-1])
    server = server_times(args.example, args.cell, args.times, args.pause, args.server_option)
    heading(f"{args.example} cell {args.cell}, {args.times} runs, {args.pause} s before each",
            "ms, median (min-max); the server's times are round trips")
    print(f"   plain  {ms_range(plain)}")
    print(f"   server {ms_range(server)}")
    print(f"   ratio of the medians {statistics.median(server) / statistics.median(plain):.2f}")
    print("   each run, plain:  " + " ".join(f"{t * 1000:.1f}" for t in plain))
    print("   each run, server: " + " ".join(f"{t * 1000:.1f}" for t in server))


if __name__ == "__main__":
    main()
