"""--state-dir: the restart with 10,000 states, and what durability costs per execute (issues
9 and 17: the crash-safe default is durability in a private directory).

    python benchmarks/durable.py                 # full: 1-2 minutes, 2 GB of memory and disk
    python benchmarks/durable.py --quick         # 1,000 states, data 10x smaller: a smoke run
    python benchmarks/durable.py --only restart  # or --only writes

A program, not a test: it prints figures and targets and exits 0 whatever they
are. Every server is a process of its own on loopback (``harness.py``):
``python -m snapshot_kernel.main`` with ``--state-dir`` on a fresh temporary
directory ("durable"), with ``--in-memory`` ("in memory"), or, in the write
cost section, with neither ("default": states in a private directory that the
server removes when it stops; crash-safe, not machine-crash-safe). The client is this
process, one keep-alive connection per server; a time is the round trip of one
request as the client sees it.

Restart (the tree loads at start, values on first use). STATES small cells are
executed over HTTP into two directories: a chain (each cell on the state made
before it) and a tree (each on a random earlier state, seeded). Cell ``i`` is
``n += 1`` and ``v{i % NAMES} = {...}``, so a state holds about NAMES names.
The chain is built on an in-memory server too, the two alternating cell by
cell: the write cost of a small cell on a small state. Each directory's bytes
(as measured below) divided by STATES is what a state takes. Then, RESTARTS times, a
server is started on each directory, and on the baselines (no ``--state-dir``,
and an empty directory), in turn:

  * "listening": from starting the process to the line on stderr naming its port;
  * "GET /states": from starting the process until GET /states has answered,
    listing every state;
  * RSS (VmRSS) once it has; the in-memory server holding the same chain is
    shown for comparison;
  * a first cell, ``pass`` on initial (what any first cell pays); then, on the
    deepest state, the first ``n += 1`` (the values it uses load now) and a
    second one (loaded); then a cell using every name (``len(globals())``:
    every group of the state loads), first and second. The states these make
    are deleted, so every restart finds the same tree.

The catalogue is in the page cache: a warm restart, as after a crash or a
deploy. After a reboot it would also be read from disk.

Write cost. An in-memory server, a default one and a durable one each build
the same state (a 400 MB float64 array ``a``, a 2M-row frame ``df`` of 7 float
columns, an int ``n``; ``--quick`` divides the sizes by 10), then run each cell
BRANCHES times on that state (GROWTH_EXECUTES times if it takes under CHEAP
seconds), after one warm-up, the three in turn (the order reversed every other
round). Time: median (min-max); ratios of the medians to in memory. Targets: the default within 1.1x on ``1 + 1`` and ``n += 1``
(issue 17); durable on ``n += 1`` <= 1.5x (issue 9). Growth: what the state
directory gained over a cell's executes, per execute: the catalogue, measured
after a checkpoint that empties its write-ahead log (``PRAGMA
wal_checkpoint(TRUNCATE)``, run from this process between the timed requests),
and the blob files. The catalogue grows by 4 KiB pages, hence the
GROWTH_EXECUTES executes of a cheap cell before the second measurement. Target for ``n += 1``: kilobytes (< 10 KiB).

Also: a cell that changes a large Python object (a list of 10**5 small dicts;
durability pickles it whole), the same way; a restart on the big directory
(the first ``a[0] = 1`` maps the blob file); and a memory budget: cells using
``a`` and ``df`` in turn, on a server with a ``--max-memory`` that holds one
of them, not both, so that each cell reloads the group the other evicted,
against the same cells on a server without a budget.

KiB and MiB are 1024 and 1024**2 bytes; "400 MB" is 4e8 bytes.
"""

import argparse
import os
import platform
import random
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

import harness
from harness import heading, ms_range, running, verdict

STATES = 10_000
NAMES = 100
RESTARTS = 5
BRANCHES = 10
POLL = 0.002  # seconds between looks at a starting server's stderr
TIME_TARGET = 1.5
DEFAULT_TARGET = 1.1  # issue 17: the crash-safe default against --in-memory
DEFAULT_CELLS = ("1 + 1", "n += 1")
GROWTH_TARGET = 10 * 1024
GROWTH_EXECUTES = 100  # a cheap cell's growth is measured over this many executes
CHEAP = 0.05  # seconds: a cell whose durable median is under this is cheap
SEED = 9
KIB, MIB = 1024, 1024 ** 2


@dataclass(frozen=True)
class Sizes:
    states: int
    elements: int  # of the array ``a``
    rows: int      # of the frame ``df``
    fresh: int     # elements of the fresh array a cell makes
    dicts: int     # in the large Python object


FULL = Sizes(STATES, 50_000_000, 2_000_000, 12_500_000, 100_000)
QUICK = Sizes(STATES // 10, 5_000_000, 200_000, 1_250_000, 10_000)


def progress(message):
    print(f"   ... {message}", file=sys.stderr, flush=True)


# -- the tree of small states --------------------------------------------------------------


def small_cell(number):
    start = "n = 0\n" if number == 0 else ""
    return f'{start}n += 1\nv{number % NAMES} = {{"i": {number}, "s": "{number}"}}'


def tree_parents(count, seed=SEED):
    """Node i's parent: a random earlier node (a random recursive tree); node 0's is None."""
    rng = random.Random(seed)
    return [None] + [rng.randrange(number) for number in range(1, count)]


def depths(parents):
    found = []
    for parent in parents:
        found.append(1 if parent is None else found[parent] + 1)
    return found


@dataclass
class Built:
    """A directory of small states, and what building it cost."""

    label: str
    directory: str
    deepest: str
    depth: int
    times: list
    baseline: list = field(default_factory=list)  # the same cells in memory (the chain)
    memory_rss: int = 0  # of the in-memory server holding the same states


def build_chain(directory, count):
    """The chain, alternating with an in-memory server that builds the same."""
    built = Built("chain", directory, f"c{count - 1}", count, [])
    with running("product", ("--state-dir", directory)) as durable, \
            running("product", ("--in-memory",)) as memory:
        for number in range(count):
            parent = "initial" if number == 0 else f"c{number - 1}"
            pair = [(durable, built.times), (memory, built.baseline)]
            for server, times in pair if number % 2 == 0 else pair[::-1]:
                times.append(server.execute(small_cell(number), parent, f"c{number}")[0])
            if number % 2000 == 1999:
                progress(f"chain: {number + 1:,} states")
        built.memory_rss = rss(memory.pid)
    return built


def build_tree(directory, count):
    parents = tree_parents(count)
    levels = depths(parents)
    deepest = max(range(count), key=levels.__getitem__)
    built = Built("tree", directory, f"t{deepest}", levels[deepest], [])
    with running("product", ("--state-dir", directory)) as durable:
        for number, parent in enumerate(parents):
            source = "initial" if parent is None else f"t{parent}"
            built.times.append(durable.execute(small_cell(number), source, f"t{number}")[0])
            if number % 2000 == 1999:
                progress(f"tree: {number + 1:,} states")
    return built


def rss(pid):
    """VmRSS of the server process: the supervisor's one child (or ``pid`` itself)."""
    children = [each for each in harness.tree_pids(pid) if harness._parent_pid(each) == pid]
    if len(children) == 1:
        pid = children[0]
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# -- restarts --------------------------------------------------------------------------------


# (code, run on initial rather than the deepest state, label)
PROBES = (("pass", True, "`pass` on initial"), ("n += 1", False, "first `n += 1`"),
          ("n += 1", False, "second `n += 1`"), ("len(globals())", False, "first every name"),
          ("len(globals())", False, "second every name"))


@dataclass
class Restart:
    listening: float
    listed: float
    states: int
    rss: int
    probes: dict


def restart(options, expected, deepest=None, attempt=0):
    """Start a server with ``options``; time it until GET /states lists ``expected`` states."""
    with running("product", options, poll=POLL) as server:
        names = server.request("GET", "/states")["states"]
        listed = time.perf_counter() - server.started
        if len(names) != expected:
            raise harness.ServerFailed(f"GET /states listed {len(names)}, not {expected}")
        memory = rss(server.pid)
        probes = {} if deepest is None else probe(server, deepest, attempt)
    return Restart(server.listening - server.started, listed, len(names), memory, probes)


def probe(server, deepest, attempt):
    """Seconds of each PROBES cell; the states they make are deleted."""
    times, made = {}, []
    for number, (code, on_initial, label) in enumerate(PROBES):
        name = f"probe-{attempt}-{number}"
        times[label] = server.execute(code, "initial" if on_initial else deepest, name)[0]
        made.append(name)
    for name in made:
        server.request("DELETE", f"/states/{name}")
    return times


def restarts(builds, scratch, count):
    """``{label: [Restart]}``: RESTARTS rounds, each starting every kind once, in turn."""
    results = {label: [] for label in ("--in-memory", "empty --state-dir")}
    results.update({built.label: [] for built in builds})
    for attempt in range(RESTARTS):
        progress(f"restart round {attempt + 1}/{RESTARTS}")
        empty = tempfile.mkdtemp(prefix="empty-", dir=scratch)
        kinds = [("--in-memory", ("--in-memory",), 1, None), ("empty --state-dir", ("--state-dir", empty),
                                                     1, None)]
        kinds += [(built.label, ("--state-dir", built.directory), count + 1, built.deepest)
                  for built in builds]
        shift = attempt % len(kinds)  # each kind in turn goes first
        for label, options, expected, deepest in kinds[shift:] + kinds[:shift]:
            results[label].append(restart(options, expected, deepest, attempt))
        shutil.rmtree(empty)
    return results


def print_builds(builds):
    heading("building the small states over HTTP", f"ms per /execute, median (min-max); "
            f"cell `n += 1` + one of {NAMES} small dicts; target: durable <= "
            f"{TIME_TARGET:g}x in memory; the directory's bytes per state")
    for built in builds:
        per_state = sum(directory_bytes(built.directory)) / len(built.times)
        line = (f"   {built.label:6} {size_text(per_state).strip():>10}/state  durable "
                f"{ms_range(built.times):>22}")
        if built.baseline:
            ratio = statistics.median(built.times) / statistics.median(built.baseline)
            line += (f"   in memory {ms_range(built.baseline):>22}   ratio {ratio:5.2f}  "
                     f"{verdict(ratio <= TIME_TARGET)}")
        print(line)


def print_restarts(results, builds, count):
    print_restart_times(results, builds, count)
    heading("first executes after a restart", "ms, median (min-max) of the restarts: a first "
            "cell on initial, then cells on the deepest state (the chain's last, the tree's "
            "deepest), whose values load on first use")
    for built in builds:
        print(f"   [{built.label}: {built.deepest}, depth {built.depth:,}]")
        for _, _, label in PROBES:
            times = [run.probes[label] for run in results[built.label]]
            print(f"   {label:26} {ms_range(times):>22}")


def print_restart_times(results, builds, count):
    heading(f"restart with {count:,} states", f"seconds from starting the process, median "
            f"(min-max) of {RESTARTS}; RSS once GET /states answered; the catalogue is in "
            "the page cache")
    print(f"   {'server on':26} {'listening s':>20} {'GET /states s':>20} {'states':>7} "
          f"{'RSS MiB':>8}")
    for label, runs in results.items():
        if not runs:
            continue
        print(f"   {label:26} {s_range([run.listening for run in runs]):>20} "
              f"{s_range([run.listed for run in runs]):>20} {runs[0].states:7,} "
              f"{statistics.median(run.rss for run in runs) / MIB:8.1f}")
    for built in builds:
        if built.memory_rss:
            print(f"   (an in-memory server holding the same {built.label}: RSS "
                  f"{built.memory_rss / MIB:.1f} MiB)")
    empty = statistics.median(run.listed for run in results["empty --state-dir"])
    for built in builds:
        full = statistics.median(run.listed for run in results[built.label])
        print(f"   {built.label}: {full - empty:+.3f} s over the empty directory "
              f"({full / empty:.2f}x)")


def s_range(times):
    return (f"{statistics.median(times):6.3f} ({min(times):.3f}-{max(times):.3f})")


def restart_section(sizes, scratch):
    builds = []
    for make, label in ((build_chain, "chain"), (build_tree, "tree")):
        progress(f"building the {label} of {sizes.states:,} states")
        builds.append(make(tempfile.mkdtemp(prefix=f"{label}-", dir=scratch), sizes.states))
    print_builds(builds)
    results = restarts(builds, scratch, sizes.states)
    print_restarts(results, builds, sizes.states)


# -- write cost ------------------------------------------------------------------------------


def big_build(sizes):
    return ("import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(0)\n"
            f"a = rng.random({sizes.elements})\n"
            f'df = pd.DataFrame({{f"c{{i}}": rng.random({sizes.rows}) for i in range(7)}})\n'
            "del rng\nn = 0")


def big_cells(sizes):
    return ("1 + 1", "n += 1", "a[0] = 1", "a.sum()", "df['new'] = 1",
            f"b = np.ones({sizes.fresh})")


def dicts_build(sizes):
    return f'data = [{{"i": i, "s": str(i)}} for i in range({sizes.dicts})]\nn = 0'


@dataclass
class CellRun:
    """One cell's executes on each server, and the durable directory's growth per execute."""

    cell: str
    memory: list
    durable: list
    catalogue: float  # bytes per execute
    blobs: float
    default: list  # the crash-safe default: a private state directory


def directory_bytes(directory):
    """``(catalogue bytes, blob bytes)``, the catalogue's write-ahead log emptied first."""
    connection = sqlite3.connect(os.path.join(directory, "catalog.sqlite"))
    try:
        busy = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    finally:
        connection.close()
    if busy:
        raise harness.ServerFailed("the catalogue's log could not be checkpointed")
    catalogue = sum(os.path.getsize(os.path.join(directory, name))
                    for name in os.listdir(directory) if name.startswith("catalog.sqlite"))
    blob_dir = os.path.join(directory, "blobs")
    blobs = sum(os.path.getsize(os.path.join(blob_dir, name)) for name in os.listdir(blob_dir))
    return catalogue, blobs


def cell_runs(servers, directory, cells, branches):
    """A CellRun per cell: one warm-up on each server, then ``branches`` timed executes
    each, GROWTH_EXECUTES for a cheap cell (for its median, and its growth)."""
    runs = []
    for cell in cells:
        progress(f"`{cell}`")
        for server in servers.values():
            server.execute(cell, "base")
        before = directory_bytes(directory)
        times = {kind: [] for kind in servers}
        for number in range(branches):
            order = list(servers) if number % 2 == 0 else list(servers)[::-1]
            for kind in order:
                times[kind].append(servers[kind].execute(cell, "base")[0])
        executes = branches
        if statistics.median(times["durable"]) < CHEAP:
            # Sub-millisecond medians need more than ten samples, and the catalogue grows
            # by pages: GROWTH_EXECUTES in all, interleaved as before.
            for number in range(branches, GROWTH_EXECUTES):
                order = list(servers) if number % 2 == 0 else list(servers)[::-1]
                for kind in order:
                    times[kind].append(servers[kind].execute(cell, "base")[0])
            executes = GROWTH_EXECUTES
        catalogue, blobs = (after - was for after, was in zip(directory_bytes(directory), before))
        runs.append(CellRun(cell, times["memory"], times["durable"], catalogue / executes,
                            blobs / executes, times["default"]))
    return runs


def write_costs(build, cells, directory, branches):
    """A CellRun per cell, from an in-memory server, the default one (crash-safe: a private
    state directory) and a --state-dir one, each of which built ``build``."""
    with running("product", ("--in-memory",)) as memory, running("product") as default, \
            running("product", ("--state-dir", directory)) as durable:
        servers = {"memory": memory, "default": default, "durable": durable}
        for server in servers.values():
            server.execute(build, "initial", "base", harness.BUILD_TIMEOUT)
        return cell_runs(servers, directory, cells, branches)


def size_text(size):
    if abs(size) >= MIB:
        return f"{size / MIB:8.1f} MiB"
    return f"{size / KIB:8.1f} KiB"


def print_write_costs(title, runs, branches, target_cell):
    heading(title, f"ms per /execute, median (min-max) of {branches} branches of one state "
            f"({GROWTH_EXECUTES} for cells under {CHEAP * 1000:g} ms), interleaved; ratios "
            "to --in-memory; directory growth per execute (over as many executes); "
            f"targets: the default within {DEFAULT_TARGET:g}x on {' and '.join(DEFAULT_CELLS)}, "
            f"--state-dir on `{target_cell}` <= {TIME_TARGET:g}x and < "
            f"{GROWTH_TARGET // KIB} KiB")
    print(f"   {'cell':22} {'--in-memory ms':>18} {'default ms':>18} {'ratio':>6} "
          f"{'--state-dir ms':>18} {'ratio':>6} {'catalogue':>12} {'blobs':>12}  target")
    for run in runs:
        memory = statistics.median(run.memory)
        default = statistics.median(run.default) / memory
        ratio = statistics.median(run.durable) / memory
        target = []
        if run.cell in DEFAULT_CELLS:
            target.append("default " + verdict(default <= DEFAULT_TARGET))
        if run.cell == target_cell:
            target.append("--state-dir " + verdict(
                ratio <= TIME_TARGET and run.catalogue + run.blobs < GROWTH_TARGET))
        print(f"   {run.cell:22} {ms_range(run.memory):>18} {ms_range(run.default):>18} "
              f"{default:6.2f} {ms_range(run.durable):>18} {ratio:6.2f} "
              f"{size_text(run.catalogue)} {size_text(run.blobs)}  {', '.join(target)}")


# -- restarting on big data, and a memory budget ------------------------------------------------


ALTERNATING = ("a[1]", "df.shape")


@dataclass
class BigRestart:
    """A restart on the big directory, and the ALTERNATING cells with and without a budget."""

    listed: float = 0.0
    first: float = 0.0   # the first `a[0] = 1`: its group loads, its blob is mapped
    second: float = 0.0
    loaded: dict = field(default_factory=dict)    # cell -> seconds, no budget
    reloaded: dict = field(default_factory=dict)  # cell -> seconds, each one a reload


def big_restarts(directory, budget, rounds):
    """Restart on ``directory``; then the ALTERNATING cells in turn, ``rounds`` times after
    one warm-up round, without a memory budget and then with ``budget`` bytes."""
    found = BigRestart()
    for limit, times in ((None, found.loaded), (budget, found.reloaded)):
        options = ("--state-dir", directory) + (("--max-memory", str(limit)) if limit else ())
        with running("product", options, poll=POLL) as server:
            server.request("GET", "/states")
            if limit is None:
                found.listed = time.perf_counter() - server.started
                found.first = server.execute("a[0] = 1", "base")[0]
                found.second = server.execute("a[0] = 1", "base")[0]
            for number in range(rounds + 1):
                for code in ALTERNATING:
                    elapsed = server.execute(code, "base")[0]
                    if number:  # the first round imports what the cells need
                        times.setdefault(code, []).append(elapsed)
    return found


def print_big_restarts(found, budget, rounds):
    heading("restart on the big directory, and --max-memory", f"ms, median (min-max) of "
            f"{rounds}; cells {' and '.join(f'`{code}`' for code in ALTERNATING)} in turn: "
            f"with --max-memory {budget:,} (`a` or `df`, not both), each reloads the group "
            "the other evicted")
    print(f"   GET /states answered {found.listed:.3f} s after starting the process; then "
          f"`a[0] = 1`: first {found.first * 1000:.2f} ms, second {found.second * 1000:.2f} ms")
    print(f"   {'cell':26} {'loaded ms':>22} {'reloaded ms':>22} {'ratio':>6}")
    for code in ALTERNATING:
        loaded, reloaded = found.loaded[code], found.reloaded[code]
        ratio = statistics.median(reloaded) / statistics.median(loaded)
        print(f"   {code:26} {ms_range(loaded):>22} {ms_range(reloaded):>22} {ratio:6.2f}")


def write_section(sizes, scratch):
    directory = tempfile.mkdtemp(prefix="big-", dir=scratch)
    progress("big state: building on both servers")
    runs = write_costs(big_build(sizes), big_cells(sizes), directory, BRANCHES)
    data = sizes.elements * 8 / 1e6
    print_write_costs(f"write cost: {data:g} MB array `a`, {sizes.rows:,}-row frame `df`",
                      runs, BRANCHES, "n += 1")
    progress("restarts on the big directory")
    budget = int(1.1 * sizes.elements * 8)  # `a`, the larger, fits; with `df`, it does not
    print_big_restarts(big_restarts(directory, budget, BRANCHES), budget, BRANCHES)
    shutil.rmtree(directory)
    directory = tempfile.mkdtemp(prefix="dicts-", dir=scratch)
    progress("large Python object")
    runs = write_costs(dicts_build(sizes), ("n += 1", "data.append(0)"), directory,
                       BRANCHES // 2)
    print_write_costs(f"write cost: `data`, a list of {sizes.dicts:,} small dicts", runs,
                      BRANCHES // 2, "n += 1")


# -- main --------------------------------------------------------------------------------------


def print_machine(quick, scratch):
    import numpy
    import pandas
    print(f"python {platform.python_version()} ({sys.executable}); numpy {numpy.__version__}, "
          f"pandas {pandas.__version__}; SQLite {sqlite3.sqlite_version}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; state directories in "
          f"{scratch}; mode: {'--quick' if quick else 'full'}")
    print(f"snapshot_kernel from {harness.CHECKOUT}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1,000 states and data 10x smaller: a smoke run")
    parser.add_argument("--only", choices=("restart", "writes"), help="one section only")
    parser.add_argument("--dir", default=None,
                        help="where to make the state directories (default: the temp dir)")
    args = parser.parse_args(argv)
    # SIGTERM as an exception, so that every `running` block still kills its server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    sizes = QUICK if args.quick else FULL
    scratch = tempfile.mkdtemp(prefix="durable-bench-", dir=args.dir)
    try:
        print_machine(args.quick, scratch)
        for section, run in (("restart", restart_section), ("writes", write_section)):
            if args.only in (None, section):
                try:
                    run(sizes, scratch)
                except harness.MEASURE_ERRORS as exc:
                    print(f"\n== {section}: failed: {harness.failure(exc)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
    harness.finish()
