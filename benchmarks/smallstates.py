"""Small states, which the product alone must handle well (issue 8): no cliff, no bookkeeping.

    python benchmarks/smallstates.py [--quick]    # also run by bigdata.py

One product server (a separate process, see ``harness.py``) holds every state.

States by size. ``n = n + 1`` on states of 10 KiB to 2 MiB, made of small dicts
in one list (sized by the product's own ``approx_bytes``, which decides when a
state is copied lazily, at 1 MiB), and on a base of 1,000 names. Each state gets
CHILDREN children; time is the median round trip of their ``/execute``, and
"stored" is the server's memory growth over them per child, counted as in
``bigdata.py``. Targets: time <= 1.5x the 10 KiB state's, stored < 10 KiB.
The children's ``approx_bytes`` is shown as the product reports it.

Builtin-heavy code. A cell defines a pure-Python loop calling ``len``,
``range`` and ``isinstance``, and times it against the same source run by a
plain ``exec`` in a fresh namespace with the real builtins, inside the same
cell, so in the same process. On a small state both should run alike; on a
large one (lazy copying) docs/benchmarks.md promises at most about 1.5x.
"""

import argparse
import ast
import statistics

import harness
from harness import heading, ms_range, running, server_memory, settled_memory, shown_text, verdict

CHILDREN = 10
KIB, MIB = 1024, 1024 ** 2
SIZES = (("10 KiB", 10 * KIB), ("100 KiB", 100 * KIB), ("500 KiB", 500 * KIB),
         ("994 KiB", 994 * KIB), ("1.03 MiB", int(1.03 * MIB)), ("2 MiB", 2 * MIB))
TIME_TARGET, STORED_TARGET, LOOP_TARGET = 1.5, 10 * KIB, 1.5
CALIBRATION_DICTS = 10_000
NAMES_CELL = 'globals().update({f"v{j}": {"j": j, "s": str(j)} for j in range(1000)})\nn = 0'
LOOP_ITEMS, LOOP_REPEATS = 300_000, 5

LOOP_SOURCE = '''\
def builtin_heavy(items):
    total = 0
    for item in items:
        if isinstance(item, int):
            total += len(range(item % 7))
    return total
'''
LOOP_CELL = LOOP_SOURCE + f'''
import builtins as _builtins
import time as _time
_plain = {{"__builtins__": _builtins}}
exec({LOOP_SOURCE!r}, _plain)
_items = list(range({LOOP_ITEMS}))

def _seconds(function):
    start = _time.perf_counter()
    function(_items)
    return _time.perf_counter() - start

_in_cell, _in_exec = [], []
for _ in range({LOOP_REPEATS}):
    _in_cell.append(_seconds(builtin_heavy))
    _in_exec.append(_seconds(_plain["builtin_heavy"]))
min(_in_cell), min(_in_exec)
'''


def dicts_cell(count):
    return f'data = [{{"i": i, "s": str(i)}} for i in range({count})]\nn = 0'


def _slug(label):
    """A state name fit for a URL path: ``state 1.03 MiB`` -> ``state-1.03-MiB``."""
    return "-".join(label.replace(",", "").replace("(", "").replace(")", "").split())


def approx_bytes(server, name):
    return server.request("GET", f"/states/{name}")["approx_bytes"]


def bytes_per_dict(server):
    """The product's ``approx_bytes`` per small dict of ``dicts_cell``, after a warm-up."""
    server.execute(dicts_cell(CALIBRATION_DICTS), "initial", "calibration")
    for _ in range(CHILDREN):  # one-time costs (imports, caches) must not land on a row
        server.execute("n = n + 1", "calibration")
    return approx_bytes(server, "calibration") / CALIBRATION_DICTS


def children_row(server, label, build):
    """``(label, state approx_bytes, times, stored per child, child approx_bytes)``."""
    name = _slug(f"state {label}")
    server.execute(build, "initial", name, timeout=harness.BUILD_TIMEOUT)
    before = settled_memory(server)
    times = [server.execute("n = n + 1", name, f"{name}-child-{number}")[0]
             for number in range(CHILDREN)]
    stored = (settled_memory(server) - before).total / CHILDREN
    return (label, approx_bytes(server, name), times, stored,
            approx_bytes(server, f"{name}-child-0"))


def loop_row(server, label, build):
    """``(label, state approx_bytes, seconds in the cell, seconds under a plain exec)``."""
    name = _slug(f"loop {label}")
    server.execute(build, "initial", name, timeout=harness.BUILD_TIMEOUT)
    _, reply = server.execute(LOOP_CELL, name, timeout=harness.CELL_TIMEOUT)
    in_cell, in_exec = ast.literal_eval(shown_text(reply))
    return label, approx_bytes(server, name), in_cell, in_exec


def measure(quick):
    """Rows of the two tables, from one product server."""
    large = 10 ** 4 if quick else 10 ** 5
    with running("product") as server:
        server_memory(server.pid)  # fail early, before any work, if /proc cannot be read
        per_dict = bytes_per_dict(server)
        # A first row, thrown away: the first ten named children grew the heap by an
        # allocator arena (8-20 KiB a child, both before and after issue 8's changes).
        children_row(server, "warm-up", dicts_cell(max(1, round(SIZES[0][1] / per_dict))))
        sizes = [children_row(server, label, dicts_cell(max(1, round(size / per_dict))))
                 for label, size in SIZES]
        sizes.append(children_row(server, "1,000 names", NAMES_CELL))
        loops = [loop_row(server, "10 KiB (copied whole)", dicts_cell(round(10 * KIB / per_dict))),
                 loop_row(server, f"{large:,} dicts (lazy)", dicts_cell(large))]
    return sizes, loops


def print_sizes(rows):
    heading("small states: `n = n + 1`", f"{CHILDREN} children each; time ratio "
                    f"against the 10 KiB state; targets: <= {TIME_TARGET:g}x, stored < "
                    f"{STORED_TARGET // KIB} KiB per child")
    print(f"   {'state':12} {'approx_bytes':>12} {'ms median (min-max)':>24} {'ratio':>6} "
          f"{'stored/child':>12} {'child approx':>12}  target")
    reference = statistics.median(rows[0][2])
    for label, size, times, stored, child_size in rows:
        ratio = statistics.median(times) / reference
        ok = ratio <= TIME_TARGET and stored < STORED_TARGET
        print(f"   {label:12} {size:12,} {ms_range(times):>24} {ratio:6.2f} "
              f"{stored / KIB:9.1f} KiB {child_size:12,}  {verdict(ok)}")


def print_loops(rows):
    heading("builtin-heavy loop", f"`builtin_heavy` over {LOOP_ITEMS:,} ints, best of "
                    f"{LOOP_REPEATS}: in the cell against a plain exec in the same process; "
                    f"docs/benchmarks.md promises <= {LOOP_TARGET:g}x")
    print(f"   {'state':28} {'approx_bytes':>12} {'cell ms':>9} {'exec ms':>9} {'ratio':>6}")
    for label, size, in_cell, in_exec in rows:
        ratio = in_cell / in_exec
        print(f"   {label:28} {size:12,} {in_cell * 1000:9.2f} {in_exec * 1000:9.2f} "
              f"{ratio:6.2f}  {verdict(ratio <= LOOP_TARGET)}")


def main(quick=False):
    try:
        sizes, loops = measure(quick)
    except harness.MEASURE_ERRORS as exc:
        print(f"\n== small states: failed: {harness.failure(exc)}")
        return
    print_sizes(sizes)
    print_loops(loops)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller large state")
    main(parser.parse_args().quick)
    harness.finish()
