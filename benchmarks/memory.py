"""Does deleting states give their memory back? RSS of a server before, at the peak of, and
after a workload that makes states and deletes them.

    python benchmarks/memory.py            # full sizes: about a minute, 1.5 GB of memory
    python benchmarks/memory.py --quick    # sizes 10x smaller: a smoke run

A program, not a test: it prints figures and exits 0 whatever they are. Each
workload runs on a fresh server process (``harness``: ``python -m
snapshot_kernel.main`` from this checkout, on loopback). RSS is ``VmRSS`` of
``/proc/PID/status`` of the server process (the supervisor's child), read
``harness.SETTLE`` s after the last reply: what the process holds of the
machine's memory, the figure ``top`` shows. The server runs as by default, its
states in a private directory; blob files there are in the page cache, which
VmRSS counts only for the pages mapped.

  branches  a state holding a DataFrame of ROWS x 5 floats; ten branches of it,
            each ``df2 = df[df.c0 > 0.5]``; then the ten deleted. Before: with
            the frame's state made and read once whole, before the branches.
  sources   twenty cells of 5 MB of source each (a comment: the state holds
            nothing of it), each a state; then every state deleted and POST
            /reset. Before: the fresh server, after one small cell.

Target (issue 18): after within 10% of before, in both.
"""

import argparse
import os
import platform
import sys
import time

import harness
from harness import heading, running, verdict

TARGET = 0.10  # after may exceed before by this share of before
BRANCHES = 10
SOURCES, SOURCE_BYTES = 20, 5 * 2 ** 20


def rss(pid):
    """Bytes of VmRSS of the server process that supervisor ``pid`` forked (and of any
    process it started), after ``harness.SETTLE`` s. The supervisor is left out: it holds
    no state, and counting it would make every change look smaller."""
    time.sleep(harness.SETTLE)
    served = harness.tree_pids(pid)[1:]
    if not served:
        raise harness.ServerFailed(f"the supervisor {pid} has no server process")
    return sum(harness._proc_kb(f"/proc/{each}/status", "VmRSS:") for each in served) * 1024


def branches(server, rows):
    """``(before, peak, after)`` RSS of ten filtered branches of a frame, made then deleted."""
    server.execute("import numpy as np, pandas as pd\n"
                   f"df = pd.DataFrame(np.random.default_rng(0).random(({rows}, 5)), "
                   "columns=[f'c{i}' for i in range(5)])", "initial", "frame")
    # Read all of it once: a stored frame lies in a file mapped copy-on-write (by default),
    # whose pages count in VmRSS once read; the branches read it, and it stays after.
    server.execute("float(df.sum().sum())", "frame")
    before = rss(server.pid)
    names = [server.execute("df2 = df[df.c0 > 0.5]", "frame", f"branch-{number}")[1]
             ["state_name"] for number in range(BRANCHES)]
    peak = rss(server.pid)
    for name in names:
        server.request("DELETE", f"/states/{name}")
    return before, peak, rss(server.pid)


def sources(server, size):
    """``(before, peak, after)`` RSS of twenty cells of ``size`` bytes of source each,
    their states deleted and the kernel reset."""
    server.execute("n = 0", "initial")
    before = rss(server.pid)
    names = [server.execute(f"# {'x' * (size - 20)}\nn = {number}", "initial")[1]
             ["state_name"] for number in range(SOURCES)]
    peak = rss(server.pid)
    for name in names:
        server.request("DELETE", f"/states/{name}")
    server.request("POST", "/reset")
    return before, peak, rss(server.pid)


def mib(size):
    return f"{size / 2 ** 20:8.1f} MiB"


def report(title, note, before, peak, after):
    heading(title, note)
    print(f"   before {mib(before)}   peak {mib(peak)}   after {mib(after)}")
    kept = (after - before) / before
    print(f"   after - before: {mib(after - before).strip()} ({kept:+.1%} of before; "
          f"{(after - before) / max(peak - before, 1):.0%} of what the workload added)   "
          f"target <= {TARGET:.0%}: {verdict(kept <= TARGET)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10x smaller")
    parser.add_argument("--in-memory", action="store_true",
                        help="servers started --in-memory (default: as the server starts by "
                             "default, its states in a private directory)")
    args = parser.parse_args(argv)
    quick, options = args.quick, ("--in-memory",) if args.in_memory else ()
    rows = 200_000 if quick else 2_000_000
    size = SOURCE_BYTES // 10 if quick else SOURCE_BYTES
    print(f"python {platform.python_version()} ({sys.executable}); "
          f"{os.cpu_count()} CPUs; mode: {'--quick (sizes / 10)' if quick else 'full'}; "
          f"servers: {' '.join(options) or 'as by default'}")
    with running("product", options) as server:
        report("branches", f"{BRANCHES} branches `df2 = df[df.c0 > 0.5]` of a {rows:,} x 5 "
                           "frame, then deleted", *branches(server, rows))
    with running("product", options) as server:
        report("sources", f"{SOURCES} cells of {size / 2 ** 20:g} MiB of source, then every "
                          "state deleted and POST /reset", *sources(server, size))


if __name__ == "__main__":
    main()
