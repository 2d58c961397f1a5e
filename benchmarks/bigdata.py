"""Big-data cells on the product against a fork-based snapshot server, and small states.

    python benchmarks/bigdata.py            # full sizes: about a minute, 5 GB of memory
    python benchmarks/bigdata.py --quick    # data 10x smaller: a smoke run, under a minute
    python benchmarks/bigdata.py --only big # or --only small

A program, not a test: it prints figures and targets and exits 0 whatever they
are. Each server runs as its own process on loopback (``harness.py``): the
product as ``python -m snapshot_kernel.main``, the baseline as
``benchmarks/forkserver.py``, where every state is a paused forked process.

Big data (issue 8). For each workload and cell, a fresh server of each kind
builds the state, then keeps BRANCHES branches of the cell, all from that same
state. Time is the client's round trip of each ``POST /execute`` over a
keep-alive connection: median, min and max of the branches. Memory is what the
branches added to the server, divided by BRANCHES. Targets: product time <=
2x fork's; product memory per branch <= 2x fork's + 5% of the state's data
(its ``nbytes``, or the frame's ``memory_usage(deep=True)``).

Memory: what would be freed if the server's processes died, namely

  * ``Pss_Anon`` from ``/proc/PID/smaps_rollup``, summed over the server's
    process tree (found through the parent pids in ``/proc/*/stat``). PSS
    divides each page by the number of processes mapping it, so a page that
    ten forked states share copy-on-write counts once in the sum. It holds the
    heap, numpy buffers, and the written pages of private file or memfd
    mappings, which become anonymous when written;
  * ``VmPTE`` from ``/proc/PID/status``, summed likewise: page tables are
    kernel memory that fork copies for every mapped anonymous page, and they
    are freed with the process;
  * the change of ``Shmem`` in ``/proc/meminfo``: memfd and tmpfs pages. These
    can be held by a file descriptor with nothing mapping them, so no PSS
    figure sees them. ``Pss_Shmem`` is not added, so mapped ones are not counted
    twice. This figure is system-wide: other work on the machine adds noise.

Not counted: clean file-backed pages (the interpreter and libraries, shared
with every Python on the machine and kept in the page cache after exit), and
kernel structures per process (task, kernel stack, sockets: tens of KB per
process, which would favour fork slightly). Each reading waits SETTLE seconds
first (``harness.SETTLE``), so memory a server frees just after replying
is not counted.

Small states (``smallstates.py``, the product alone) are described there.
KiB and MiB are 1024 and 1024**2 bytes; the workloads' "400 MB" is 4e8 bytes.
"""

import argparse
import os
import platform
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Optional

import harness
import smallstates
from harness import heading, ms_range, running, settled_memory, shown_text, verdict

BRANCHES = 10
TIME_TARGET = 2.0
MEMORY_TARGET = (2.0, 0.05)  # product <= 2 x fork + 5% of the state's data
KINDS = ("fork", "product")


@dataclass(frozen=True)
class Workload:
    """A state built by ``build`` (its last line: the data's bytes) and the cells run on it."""

    name: str
    build: str
    cells: tuple


def workloads(scale):
    """The big-data workloads, with every size divided by ``scale``."""
    elements, rows = 50_000_000 // scale, 2_000_000 // scale
    array = Workload(
        f"array: {elements * 8 / 1e6:g} MB float64 `a`, int `n`",
        f"import numpy as np\na = np.random.default_rng(0).random({elements})\nn = 0\na.nbytes",
        ("n += 1", "a[0] = 1", "a.sum()"))
    frame = Workload(
        f"frame: {rows:,} rows, float `c0..c6`",
        "import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(0)\n"
        f'df = pd.DataFrame({{f"c{{i}}": rng.random({rows}) for i in range(7)}})\n'
        "del rng\nint(df.memory_usage(deep=True).sum())",
        ("df.shape", "df['c0'].mean()", "df2 = df[df.c0 > 0.5]", "df['new'] = 1"))
    return array, frame


@dataclass
class Run:
    """What one server did for one cell: times, memory, and what it showed."""

    times: list
    data_bytes: int = 0
    state: Optional[harness.Memory] = None
    added: Optional[harness.Memory] = None
    shown: str = ""
    failure: Optional[str] = None

    @property
    def per_branch(self):
        return self.added.total / BRANCHES


def measure(kind, workload, cell):
    """A fresh server of ``kind`` builds ``workload`` and keeps BRANCHES branches of ``cell``."""
    try:
        with running(kind) as server:
            empty = settled_memory(server)
            _, reply = server.execute(workload.build, "initial", "base", harness.BUILD_TIMEOUT)
            data_bytes = int(shown_text(reply))
            before = settled_memory(server)
            times, replies = [], []
            for number in range(BRANCHES):
                elapsed, reply = server.execute(cell, "base", f"branch-{number}",
                                                timeout=harness.CELL_TIMEOUT)
                times.append(elapsed)
                replies.append(reply)
            after = settled_memory(server)
    except harness.MEASURE_ERRORS as exc:
        return Run([], failure=harness.failure(exc))
    return Run(times, data_bytes, before - empty, after - before, shown_text(replies[0]))


def big_data(scale):
    """``[(workload, cell, {kind: Run})]``, the two kinds alternating which goes first."""
    rows = []
    for workload in workloads(scale):
        for cell in workload.cells:
            order = KINDS if len(rows) % 2 == 0 else KINDS[::-1]
            runs = {}
            for kind in order:
                progress(f"{workload.name.split(':')[0]} `{cell}` on {kind}")
                runs[kind] = measure(kind, workload, cell)
            rows.append((workload, cell, runs))
    return rows


def progress(message):
    print(f"   ... {message}", file=sys.stderr, flush=True)


# -- printing ----------------------------------------------------------------------------


def mib(size):
    return f"{size / 2 ** 20:9.2f}"


def print_times(rows):
    heading("big data: time per /execute", f"ms, median (min-max) of {BRANCHES} branches "
            f"kept from one state; target: product <= {TIME_TARGET:g} x fork")
    print(f"   {'cell':26} {'fork ms':>21} {'product ms':>23} {'ratio':>7}  "
          f"{'target':7} {'replies':8}")
    for workload, cell, runs in rows:
        if workload.cells.index(cell) == 0:
            print(f"   [{workload.name}]")
        fork, product = runs["fork"], runs["product"]
        if fork.failure or product.failure:
            print(f"   {cell:26} fork: {fork.failure or 'ok'}; product: {product.failure or 'ok'}")
            continue
        ratio = statistics.median(product.times) / statistics.median(fork.times)
        same = "same" if fork.shown == product.shown else "DIFFER"
        print(f"   {cell:26} {ms_range(fork.times):>21} {ms_range(product.times):>23} "
              f"{ratio:7.2f}  {verdict(ratio <= TIME_TARGET):7} {same:8}")


def print_memory(rows):
    double, share = MEMORY_TARGET
    heading("big data: memory per kept branch", f"MiB = (anon PSS + page tables + Shmem "
            f"after - before the {BRANCHES} branches) / {BRANCHES}; target: product <= "
            f"{double:g} x fork + {share:.0%} of the state's data")
    print(f"   {'cell':26} {'fork':>9} {'product':>9} {'ratio':>8} {'limit':>9}  {'target':6}"
          f" {'state: data':>12} {'fork':>9} {'product':>9}")
    for workload, cell, runs in rows:
        if workload.cells.index(cell) == 0:
            print(f"   [{workload.name}]")
        fork, product = runs["fork"], runs["product"]
        if fork.failure or product.failure:
            print(f"   {cell:26} (failed: see the time table)")
            continue
        limit = double * fork.per_branch + share * product.data_bytes
        ratio = product.per_branch / fork.per_branch if fork.per_branch > 0 else float("inf")
        print(f"   {cell:26} {mib(fork.per_branch)} {mib(product.per_branch)} {ratio:8.2f} "
              f"{mib(limit)}  {verdict(product.per_branch <= limit):6} "
              f"{mib(product.data_bytes):>12} {mib(fork.state.total)} {mib(product.state.total)}")


def print_breakdown(rows):
    heading("big data: where the memory per branch is", "MiB per branch: anon PSS, page "
            "tables, Shmem (system-wide)")
    for workload, cell, runs in rows:
        for kind in KINDS:
            run = runs[kind]
            if run.failure is None:
                added = run.added
                print(f"   {workload.name.split(':')[0]:10} {cell:26} {kind:8} "
                      f"{mib(added.anon / BRANCHES)} {mib(added.page_tables / BRANCHES)} "
                      f"{mib(added.shmem / BRANCHES)}")


def print_machine(quick):
    import numpy
    import pandas
    print(f"python {platform.python_version()} ({sys.executable}); numpy {numpy.__version__}, "
          f"pandas {pandas.__version__}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; "
          f"mode: {'--quick (data / 10)' if quick else 'full'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="data 10x smaller: a smoke run")
    parser.add_argument("--only", choices=("big", "small"), help="one section only")
    parser.add_argument("--in-memory", action="store_true",
                        help="the product started --in-memory (default: as it starts by "
                             "default, its states in a private directory)")
    args = parser.parse_args(argv)
    if args.in_memory:
        harness.product_options("--in-memory")
    # SIGTERM as an exception, so that every `running` block still kills its server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    print_machine(args.quick)
    print(f"product: {' '.join(harness.COMMANDS['product'][0][5:]) or 'as by default'}")
    if args.only != "small":
        rows = big_data(10 if args.quick else 1)
        print_times(rows)
        print_memory(rows)
        print_breakdown(rows)
    if args.only != "big":
        smallstates.main(args.quick)
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
    harness.finish()
