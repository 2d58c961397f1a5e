"""What holding a state's settings per cell (docs/promises.md) costs, against baselines of
this run.

    python benchmarks/settings.py

A program, not a test: it prints figures and exits 0 whatever they are.

  per-cell   the settings work of a cell that changes none (its claims, the gate, taking
             its settings on its thread and reading them back, the context), against the
             whole of ``execute_here('1+1')``, with the standard library only, then with
             numpy, pandas and matplotlib imported (each adds kinds of settings), then with
             20 module attributes that earlier cells patched (each is read after every
             cell); each in a tight loop, and between requests: PAUSE s apart, as a
             server's worker runs it (the caches have gone cold by then; the median of
             these is what a request pays)
  random     ``random.random()`` in a loop inside a cell, against the same code at the top
             level of a plain namespace on a thread of this process: a cell alone, and a
             cell beside another that holds its own generator (the module functions then
             dispatch to each cell's)
  branches   two cells that each sleep 0.2 s, started together from states in different
             working directories (with different environments and warnings filters too),
             against one such cell alone: they run at once, so the ratio is about 1
"""

import statistics
import sys
import tempfile
import threading
import time
import timeit

from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.runtime import settings

REPEATS = 7
PAUSE = 0.0004  # seconds between calls "between requests": a round trip on loopback
DRAWS = 1_000_000


class _Run:
    """What the gate asks of an execution."""

    exec_id, interrupt_requested, waiting, waited, running_since = "bench", False, None, None, None


def per_cell(kernel, number=2000, pause=0.0):
    kernel.execute_here("1 + 1", "initial")
    process = kernel._process(kernel._states["initial"])  # what every cell on it pays for
    gate, server, run = kernel._gate, kernel.server, _Run()

    def settings_work():
        alongside = gate.enter(run, process.claims(server))
        taken = process.take(server)
        context = process.new_context()
        shared, _ = gate.leave(run, process.shared, alongside)
        process.after(taken, context, shared)
        settings.release(taken)

    def cell():
        kernel.execute_here("1 + 1", "initial")

    return _seconds(settings_work, number, pause), _seconds(cell, number, pause)


def _seconds(call, number, pause):
    """Median seconds per call: of REPEATS timeit runs, or, with a ``pause`` after each
    call, of every call timed alone."""
    if not pause:
        return statistics.median(timeit.timeit(call, number=number) / number
                                 for _ in range(REPEATS))
    times = []
    for _ in range(number):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
        time.sleep(pause)
    return statistics.median(times)


def report(label, kernel):
    for way, pause in (("in a loop", 0.0), ("between requests", PAUSE)):
        work, whole = per_cell(kernel, 2000 if not pause else 3000, pause)
        print(f"   {label:30} {way:16} settings work {work * 1e6:6.1f} µs   "
              f"execute_here('1+1') {whole * 1e6:6.1f} µs   share {work / whole:6.1%}")


# -- random.random() in a loop --------------------------------------------------------------

LOOP = f"for _ in range({DRAWS}):\n    random.random()"
TIMED = f"import random, time\nstarted = time.perf_counter()\n{LOOP}\nprint(time.perf_counter() - started)"


def plain_loop():
    """Seconds of the cell's loop in plain Python: the same code at the top level of a
    namespace of its own, as a script's, on a thread of this process (as a cell runs)."""
    import random
    seconds = []
    code = compile(LOOP, "<plain>", "exec")

    def run():
        namespace = {"__name__": "__main__", "random": random}
        started = time.perf_counter()
        exec(code, namespace)
        seconds.append(time.perf_counter() - started)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return seconds[0]


def in_cell(kernel, state):
    reply = kernel.execute(TIMED, state)
    assert reply["error"] is None, reply["error"]
    return float(reply["output"][0]["text"])


def beside(kernel, signals):
    """Seconds of the loop in a cell while a sibling that drew holds its own generator:
    it waits (so the two do not share the interpreter), and the module functions dispatch."""
    signals.go.clear()
    signals.started.clear()
    other = threading.Thread(target=kernel.execute, args=(
        "import random\nrandom.random()\nhelpers_for_benchmarks.started.set()\n"
        "helpers_for_benchmarks.go.wait(60)", "drawing"))
    other.start()
    signals.started.wait(10)
    try:
        return in_cell(kernel, "drawing")
    finally:
        signals.go.set()
        other.join(10)


def random_loop():
    kernel = SnapshotKernel()
    signals = sys.modules["helpers_for_benchmarks"] = _signals()
    kernel.execute("import random, helpers_for_benchmarks\nrandom.seed(1)", "initial",
                   new_state_name="drawing")
    plain = statistics.median(plain_loop() for _ in range(REPEATS))
    alone = statistics.median(in_cell(kernel, "drawing") for _ in range(REPEATS))
    together = statistics.median(beside(kernel, signals) for _ in range(3))
    print(f"   plain Python {plain / DRAWS * 1e9:5.1f} ns a draw   a cell alone "
          f"{alone / DRAWS * 1e9:5.1f} ns ({alone / plain:4.2f}x)   beside a cell holding "
          f"its own {together / DRAWS * 1e9:5.1f} ns ({together / plain:4.2f}x)")
    kernel.close()


def _signals():
    import types
    module = types.ModuleType("helpers_for_benchmarks")
    module.started, module.go = threading.Event(), threading.Event()
    return module


# -- two branches at once --------------------------------------------------------------------

def together(kernel, states):
    replies = []
    threads = [threading.Thread(target=lambda s=s: replies.append(
        kernel.execute("time.sleep(0.2)", s))) for s in states]
    started = time.perf_counter()
    for each in threads:
        each.start()
    for each in threads:
        each.join()
    assert all(reply["error"] is None for reply in replies)
    return time.perf_counter() - started


def branches():
    kernel = SnapshotKernel()
    kernel.execute("import os, time, warnings", "initial", new_state_name="here")
    kernel.execute(f"os.chdir({tempfile.mkdtemp()!r})\nos.environ['SK_BENCH'] = '1'\n"
                   "warnings.simplefilter('ignore')", "here", new_state_name="there")
    one = statistics.median(together(kernel, ["here"]) for _ in range(REPEATS))
    two = statistics.median(together(kernel, ["here", "there"]) for _ in range(REPEATS))
    print(f"   one cell {one * 1e3:6.0f} ms   two from other directories {two * 1e3:6.0f} ms"
          f"   ratio {two / one:5.2f}x")
    kernel.close()


def main():
    print(f"python {sys.version.split()[0]}")
    print("\n== per-cell: a cell that changes no setting")
    for imported in ((), ("numpy", "pandas", "matplotlib")):
        for library in imported:
            __import__(library)
        report(', '.join(imported) or 'standard library only', SnapshotKernel())
    kernel = SnapshotKernel()
    patched = kernel.execute("import fractions\n" + "\n".join(
        f"fractions.SK_BENCH_{i} = {i}" for i in range(20)), "initial")
    assert patched["error"] is None, patched["error"]
    report("+ 20 watched module attributes", kernel)
    print(f"\n== random: random.random() in a loop of {DRAWS:,}")
    random_loop()
    print("\n== branches: two 0.2 s cells started together")
    branches()


if __name__ == "__main__":
    main()
