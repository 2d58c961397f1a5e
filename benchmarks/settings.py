"""What following a state's settings (docs/promises.md) costs, against baselines of this run.

    python benchmarks/settings.py

A program, not a test: it prints figures and exits 0 whatever they are.

  per-cell   the settings work of a cell that changes none (reading and comparing them,
             the gate, the context), against the whole of ``execute_here('1+1')``, with
             the standard library only, then with numpy, pandas and matplotlib imported
             (each adds kinds of settings to read), then with 20 module attributes that
             earlier cells patched (each is read after every cell); each in a tight loop,
             and between requests: PAUSE s apart, as a server's worker runs it (the
             caches have gone cold by then, and every piece costs ~1.5-3x more; the
             median of these is what a request pays)
  conflict   two cells that each sleep 0.2 s, started together: from states with the same
             settings (they run at once) against states in different working directories
             (one waits for the other)
"""

import statistics
import sys
import tempfile
import threading
import time
import timeit

from snapshot_kernel.kernel import SnapshotKernel

REPEATS = 7
PAUSE = 0.0004  # seconds between calls "between requests": a round trip on loopback


def per_cell(kernel, number=2000, pause=0.0):
    kernel.execute_here("1 + 1", "initial")
    process = kernel._process(kernel._states["initial"])  # what every cell on it pays for
    context = process.new_context()
    gate = kernel._gate

    def settings_work():
        gate.enter(process.shared)
        gate.leave(process.after(context).shared)
        process.new_context()

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


def conflict(kernel):
    kernel.execute("import os, time", "initial", new_state_name="here")
    kernel.execute(f"import os, time\nos.chdir({tempfile.mkdtemp()!r})", "initial",
                   new_state_name="there")
    same = [together(kernel, ["here", "here"]) for _ in range(REPEATS)]
    other = [together(kernel, ["here", "there"]) for _ in range(REPEATS)]
    return statistics.median(same), statistics.median(other)


def report(label, kernel):
    for way, pause in (("in a loop", 0.0), ("between requests", PAUSE)):
        work, whole = per_cell(kernel, 2000 if not pause else 3000, pause)
        print(f"   {label:30} {way:16} settings work {work * 1e6:6.1f} µs   "
              f"execute_here('1+1') {whole * 1e6:6.1f} µs   share {work / whole:6.1%}")


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
    same, other = conflict(kernel)
    print("\n== conflict: two 0.2 s cells started together")
    print(f"   same settings {same * 1e3:8.0f} ms   other working directories {other * 1e3:8.0f} ms"
          f"   ratio {other / same:5.2f}x")


if __name__ == "__main__":
    main()
