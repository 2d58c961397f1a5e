"""Print what executions cost in time and memory, each against a baseline from the same run.

    python benchmarks/run.py            # full sizes, about a minute or two
    python benchmarks/run.py --quick    # every size 10x smaller: a smoke run
    python benchmarks/run.py --printing # only the printing section

A program, not a test: it prints figures and exits 0 whatever they are. Every
figure is a median of several repetitions (time.perf_counter), and every ratio
divides by a baseline measured in this run, in this process, interleaved with
what it is compared to, because machines are noisy.

Sections:
  touch-small      a cell touching only ``n`` on a state with 10**5 small dicts,
                   against one copy.deepcopy of that state's namespace
  children-memory  traced memory added by ten children of a large state,
                   against the traced memory of that state
  http-trivial     POST /execute of ``1+1`` over keep-alive HTTP, against a bare
                   Bottle + Cheroot endpoint served the same way: the kernel with
                   states in memory, and as the default server keeps them (a
                   private state directory, crash-safe)
  curves           execute time against state size, and against touched size
  many-states      GET /states with 10**5 states against one, and the share of
                   storing them that went to the garbage collector
  printing         a cell of 200,000 print() calls through a server process (POST
                   /execute), against the same code in a plain process printing
                   into contextlib.redirect_stdout(io.StringIO())

The baselines read a stored namespace through ``kernel._states`` (see
``stored_namespace``); nothing else reaches into the kernel.
"""

import argparse
import contextlib
import copy
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
import types
from dataclasses import dataclass

import snapshot_kernel
from snapshot_kernel.kernel import INITIAL, SnapshotKernel

import harness
import serving

TARGETS = {"touch-small": 0.05, "children-memory": 0.2, "http-trivial": 1.5,
           "http-trivial-default": 1.5, "printing": 2.0}
CHILDREN = 10
INTS_PER_LIST = 100  # the large state is made of lists of this many distinct ints


@dataclass(frozen=True)
class Sizes:
    """How big each section's states are, and how often each figure is repeated."""

    dicts: int            # small dicts in the touch-small state
    names: int            # names in the touch-small-many-names state ...
    dicts_per_name: int   # ... each holding a list of this many small dicts
    big_lists: int        # lists of INTS_PER_LIST ints in the children-memory state
    state_sizes: tuple    # curve (a): small dicts in ``data``
    touched_sizes: tuple  # curve (b): small dicts in each ``part_k``
    repeats: int
    curve_repeats: int
    http_rounds: int
    http_per_round: int
    prints: int           # print() calls in the printing cell


FULL = Sizes(dicts=10 ** 5, names=2000, dicts_per_name=50, big_lists=22000,
             state_sizes=(10 ** 3, 10 ** 4, 10 ** 5, 3 * 10 ** 5),
             touched_sizes=(10 ** 2, 10 ** 3, 10 ** 4, 10 ** 5),
             repeats=7, curve_repeats=5, http_rounds=20, http_per_round=100,
             prints=200000)
QUICK = Sizes(dicts=10 ** 4, names=200, dicts_per_name=50, big_lists=2200,
              state_sizes=(10 ** 2, 10 ** 3, 10 ** 4, 3 * 10 ** 4),
              touched_sizes=(10, 10 ** 2, 10 ** 3, 10 ** 4),
              repeats=3, curve_repeats=3, http_rounds=10, http_per_round=10,
              prints=20000)


# -- cells and states ------------------------------------------------------------


def dicts_cell(name, count):
    """A line of code binding ``name`` to ``count`` small dicts."""
    return f'{name} = [{{"i": i, "s": str(i)}} for i in range({count})]'


def many_names_cell(names, per_name):
    """Code binding ``v0`` ... ``v{names-1}``, each to ``per_name`` small dicts."""
    return (f"for j in range({names}):\n"
            f'    globals()[f"v{{j}}"] = [{{"i": i, "s": str(i)}} for i in range({per_name})]\n'
            "del j")


def run_cell(kernel, code, state_name, new_state_name=None):
    """Execute ``code``; return the new state's name, or raise if the cell failed."""
    reply = kernel.execute(code, state_name, new_state_name=new_state_name)
    if reply["error"] is not None:
        raise RuntimeError(f"benchmark cell failed: {reply['error']['ename']}: "
                           f"{reply['error']['evalue']}\n{code}")
    return reply["state_name"]


def stored_namespace(kernel, name):
    """The names and objects a state stores, as a dict: read only, to build baselines."""
    return {key: entry.value for key, entry in kernel._states[name].names.entries().items()}


def deepcopy_baseline(namespace):
    """One copy.deepcopy of ``namespace`` as a plain dict, sharing modules as the
    kernel does (deepcopy cannot copy a module)."""
    modules = {id(value): value for value in namespace.values()
               if isinstance(value, types.ModuleType)}
    return copy.deepcopy(dict(namespace), modules)


# -- measuring -------------------------------------------------------------------


def timed(action):
    """Seconds ``action()`` takes, started from a collected heap."""
    gc.collect()
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def execute_vs_deepcopy(kernel, state_name, code, repeats):
    """Median seconds ``(execute code on state, deepcopy of state)``, interleaved.

    Each child state is deleted once timed, so every repetition starts alike.
    """
    namespace = stored_namespace(kernel, state_name)
    executes, copies = [], []
    children = []

    def execute():
        children.append(run_cell(kernel, code, state_name))

    for repeat in range(repeats):
        pair = [(executes, execute), (copies, lambda: deepcopy_baseline(namespace))]
        for times, action in pair if repeat % 2 == 0 else reversed(pair):
            times.append(timed(action))
        kernel.delete(children.pop())
    return statistics.median(executes), statistics.median(copies)


def traced_growth(action):
    """Bytes ``(retained, peak)`` that tracemalloc sees ``action()`` add."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    action()
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    return current - before, peak - before


# -- sections ----------------------------------------------------------------------


def touch_small(sizes):
    """Rows ``(label, execute s, deepcopy s)`` for ``n = n + 1`` on two large states."""
    kernel = SnapshotKernel()
    one = run_cell(kernel, dicts_cell("data", sizes.dicts) + "\nn = 0", INITIAL)
    many = run_cell(kernel, many_names_cell(sizes.names, sizes.dicts_per_name) + "\nn = 0",
                    INITIAL)
    total = sizes.names * sizes.dicts_per_name
    return [
        (f"touch-small: {sizes.dicts:,} dicts in 1 name",
         *execute_vs_deepcopy(kernel, one, "n = n + 1", sizes.repeats)),
        (f"touch-small-many-names: {total:,} dicts in {sizes.names:,} names",
         *execute_vs_deepcopy(kernel, many, "n = n + 1", sizes.repeats)),
    ]


def children_memory(sizes):
    """Bytes ``(state, added by the children, peak while adding them)``."""
    kernel = SnapshotKernel()
    big = (f"big = [list(range(i * {INTS_PER_LIST}, (i + 1) * {INTS_PER_LIST})) "
           f"for i in range({sizes.big_lists})]")
    tracemalloc.start()
    try:
        empty, _ = traced_growth(lambda: run_cell(kernel, "n = 0", INITIAL))
        made, _ = traced_growth(lambda: run_cell(kernel, big + "\nn = 0", INITIAL, "big"))
        added, peak = traced_growth(lambda: [run_cell(kernel, f"n = {i}", "big")
                                             for i in range(CHILDREN)])
    finally:
        tracemalloc.stop()
    return made - empty, added, peak


def http_trivial(sizes):
    """Per-request seconds ``(kernel, bare)`` over keep-alive HTTP."""
    return serving.trivial_latencies(sizes.http_rounds, sizes.http_per_round)


def state_size_curve(sizes):
    """Rows ``(dicts in data, execute s, deepcopy s)`` for ``n = n + 1``."""
    kernel = SnapshotKernel()
    rows = []
    for count in sizes.state_sizes:
        name = run_cell(kernel, dicts_cell("data", count) + "\nn = 0", INITIAL)
        rows.append((count, *execute_vs_deepcopy(kernel, name, "n = n + 1",
                                                 sizes.curve_repeats)))
        kernel.delete(name)
    return rows


def touched_size_curve(sizes):
    """Rows ``(k, execute s, deepcopy s)`` for ``part_k.append(0)`` on one state."""
    kernel = SnapshotKernel()
    lines = [dicts_cell("data", sizes.dicts), "n = 0"]
    lines += [dicts_cell(f"part_{k}", k) for k in sizes.touched_sizes]
    name = run_cell(kernel, "\n".join(lines), INITIAL)
    return [(k, *execute_vs_deepcopy(kernel, name, f"part_{k}.append(0)",
                                     sizes.curve_repeats))
            for k in sizes.touched_sizes]


# The baseline of the printing section: the cell's code in a plain process, its prints
# going into a StringIO; it prints the seconds the code took (not the process's start).
PLAIN_PRINTER = """
import contextlib, io, sys, time
code = compile(sys.argv[1], "<cell>", "exec")
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    exec(code, {})
sys.stderr.write(repr(time.perf_counter() - start))
"""


def printing(sizes):
    """Median seconds ``(through a server, plain)`` of a cell of ``sizes.prints`` prints.

    The server is a process of its own (``harness``), asked over keep-alive HTTP
    as a client would; each plain run is a fresh process. Interleaved.
    """
    code = f"for i in range({sizes.prints}):\n    print(i)"
    served, plain = [], []
    with harness.running("product") as server:
        server.execute("1 + 1", "initial")  # its first cell imports what cells need

        def serve():
            elapsed, reply = server.execute(code, "initial")
            server.request("DELETE", f"/states/{reply['state_name']}")
            served.append(elapsed)

        def run_plain():
            done = subprocess.run([sys.executable, "-c", PLAIN_PRINTER, code], check=True,
                                  capture_output=True, text=True, timeout=600)
            plain.append(float(done.stderr))

        for repeat in range(sizes.repeats):
            for action in (serve, run_plain) if repeat % 2 == 0 else (run_plain, serve):
                action()
    return statistics.median(served), statistics.median(plain)


# -- printing --------------------------------------------------------------------


def many_states(count, repeats):
    """``(seconds for GET /states with 1 state, with ``count``, and one execute then)``,
    through the app (WSGI, no socket): the listing and its JSON, against the same
    listing when there is only ``initial``."""
    import json
    kernel = SnapshotKernel()

    def listing():
        return json.dumps({"states": kernel.state_names()})

    empty = statistics.median(timed(listing) for _ in range(repeats))
    with collector_time() as collecting:
        started = time.perf_counter()
        for number in range(count):
            run_cell(kernel, f"x = {number}", INITIAL, f"s{number}")
        building = time.perf_counter() - started
    full = statistics.median(timed(listing) for _ in range(repeats))
    execute = statistics.median(timed(lambda: kernel.execute("y = 1", "s7")) for _ in range(repeats))
    return empty, full, execute, building, collecting[0]


@contextlib.contextmanager
def collector_time():
    """Yield a one-item list that holds, after the block, the seconds the cyclic
    garbage collector ran during it."""
    spent, started = [0.0], []

    def callback(phase, info):
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent[0] += time.perf_counter() - started.pop()

    gc.callbacks.append(callback)
    try:
        yield spent
    finally:
        gc.callbacks.remove(callback)


def ms(seconds):
    return f"{seconds * 1000:10.2f}"


def mb(size):
    """Bytes as MB, or as KB below one MB so that small figures do not print as 0."""
    if abs(size) >= 2 ** 20:
        return f"{size / 2 ** 20:8.1f} MB"
    return f"{size / 2 ** 10:8.1f} KB"


def ratio(value):
    """Two decimals, or two significant digits for ratios under 0.1."""
    return f"{value:7.2f}" if abs(value) >= 0.1 else f"{value:7.2g}"


def heading(title, note):
    print(f"\n== {title}\n   {note}")


def print_touch_small(rows, sizes):
    heading("touch-small", f"cell `n = n + 1`; baseline: one copy.deepcopy of the state's "
                           f"namespace; median of {sizes.repeats}")
    print(f"   {'state':54} {'execute ms':>10} {'deepcopy ms':>11} {'ratio':>7}")
    for label, execute, baseline in rows:
        print(f"   {label:54} {ms(execute)} {ms(baseline):>11} {ratio(execute / baseline)}")


def print_children_memory(state, added, peak):
    heading("children-memory", f"{CHILDREN} children of one state, each `n = i`; "
                               "tracemalloc, after gc.collect()")
    print(f"   {'state (build cell minus an `n = 0` cell)':44} {mb(state)}")
    print(f"   {f'added by {CHILDREN} children':44} {mb(added)}"
          f"   (peak while creating: {mb(peak).strip()})")
    print(f"   {'added / state':44} {ratio(added / state):>8}")


def print_http(kernel_times, bare_times, default_times, sizes):
    heading("http-trivial", 'POST /execute {"code": "1+1", "state_name": "initial"}, '
                            f"keep-alive; {sizes.http_rounds} interleaved rounds of "
                            f"{sizes.http_per_round} per server")
    print(f"   {'server':34} {'median ms':>10} {'p90 ms':>10}")
    for label, times in (("bare Bottle + Cheroot, no work", bare_times),
                         ("snapshot-kernel --in-memory", kernel_times),
                         ("snapshot-kernel (default)", default_times)):
        print(f"   {label:34} {ms(statistics.median(times))} {ms(percentile(times, 0.9))}")
    bare = statistics.median(bare_times)
    print(f"   {'--in-memory / bare (medians)':34} "
          f"{ratio(statistics.median(kernel_times) / bare):>10}")
    print(f"   {'default / bare (medians)':34} "
          f"{ratio(statistics.median(default_times) / bare):>10}")


def print_curve(title, note, column, rows):
    heading(title, note)
    print(f"   {column:>22} {'execute ms':>10} {'deepcopy ms':>11} {'ratio':>7}")
    for size, execute, baseline in rows:
        print(f"   {size:>22,} {ms(execute)} {ms(baseline):>11} {ratio(execute / baseline)}")


def print_printing(served, plain, sizes):
    heading("printing", f"a cell of {sizes.prints:,} print() calls: POST /execute to a server "
                        "process, against a plain process printing into redirect_stdout("
                        f"io.StringIO()); median of {sizes.repeats}")
    print(f"   server {ms(served)} ms; plain {ms(plain)} ms; "
          f"server / plain {ratio(served / plain)}")


def print_summary(ratios):
    heading("summary", "targets from the issue; a ratio at or under its target passes")
    for name, (what, value) in ratios.items():
        verdict = "PASS" if value <= TARGETS[name] else "FAIL"
        print(f"   {name:20} {what:28} {ratio(value):>8}   target <= {TARGETS[name]:<5} {verdict}")


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- main --------------------------------------------------------------------------


def print_machine(quick):
    print(f"python {platform.python_version()} ({platform.python_implementation()}, "
          f"{sys.executable})")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; "
          f"mode: {'--quick (sizes / 10)' if quick else 'full'}")
    print(f"snapshot_kernel from {os.path.dirname(snapshot_kernel.__file__)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every size 10x smaller")
    parser.add_argument("--printing", action="store_true", help="only the printing section")
    args = parser.parse_args(argv)
    quick = args.quick
    sizes = QUICK if quick else FULL
    started = time.perf_counter()
    print_machine(quick)
    if args.printing:
        served, plain = printing(sizes)
        print_printing(served, plain, sizes)
        print_summary({"printing": ("server / plain process", served / plain)})
        return

    touch = touch_small(sizes)
    print_touch_small(touch, sizes)
    state, added, peak = children_memory(sizes)
    print_children_memory(state, added, peak)
    kernel_times, bare_times, default_times = http_trivial(sizes)
    print_http(kernel_times, bare_times, default_times, sizes)
    print_curve("curve (a): state size", f"cell `n = n + 1` on a state with `data` of N "
                f"small dicts; median of {sizes.curve_repeats}", "N dicts in data",
                state_size_curve(sizes))
    print_curve("curve (b): touched size", f"cell `part_k.append(0)` on one state holding "
                f"`data` ({sizes.dicts:,} dicts) and every part_k; "
                f"median of {sizes.curve_repeats}", "k dicts in part_k",
                touched_size_curve(sizes))

    states = 10 ** 4 if quick else 10 ** 5
    empty, full, execute_many, building, collecting = many_states(states, sizes.repeats)
    heading("many-states", f"GET /states with {states:,} states (the listing and its JSON) "
                           "against the same with one; and a small execute among them")
    print(f"   listing, 1 state {ms(empty)} ms; {states:,} states {ms(full)} ms; "
          f"execute `y = 1` {ms(execute_many)} ms")
    print(f"   storing the {states:,} states (`x = N` each) took {building:.1f} s, "
          f"{collecting / building:.0%} of it in the garbage collector")

    served, plain = printing(sizes)
    print_printing(served, plain, sizes)

    _, execute, baseline = touch[0]
    print_summary({
        "touch-small": ("execute / deepcopy", execute / baseline),
        "children-memory": (f"added by {CHILDREN} / state", added / state),
        "http-trivial": ("--in-memory / bare latency", statistics.median(kernel_times)
                         / statistics.median(bare_times)),
        "http-trivial-default": ("default / bare latency", statistics.median(default_times)
                                 / statistics.median(bare_times)),
        "printing": ("server / plain process", served / plain),
    })
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
