"""Cells that once fell off a cliff (issue 31), against the same code in one plain process.

    python benchmarks/cliffs.py               # full sizes: a few minutes
    python benchmarks/cliffs.py --quick       # smaller: a smoke run
    python benchmarks/cliffs.py --in-memory   # the product started --in-memory
    python benchmarks/cliffs.py --only figure # the rows whose name holds "figure"
    python benchmarks/cliffs.py --pause 1     # 1 s before each timed cell, as an agent

A program, not a test: it prints figures and targets and exits 0 whatever they
are. For each row a product server (as a user starts it, ``harness.py``) builds a
state, then runs the row's cell REPEATS times, each a branch of that state; the
time is the client's round trip. The baseline is a plain ``python`` process
started for the row (this file with ``--plain``), which runs the same build and
then the same cell REPEATS times in its one namespace; for the figure, the cell
plus the PNG the server makes of it (``savefig(..., bbox_inches="tight")``). Both
print what the cell shows, and the last column says whether they agree.

Rows: ``L = list(a)`` over the rows of a 1,797-row array (target: within 50 ms)
and of one ten times longer (target: within 12x the first); a cell touching a
figure of 2,000 lines (target: within 2x the plain cell and its PNG), one not
touching it, and one reading a name that shares an array with it (target for both:
what ``n = 1`` costs on an empty state, within 1.5x); an
exhausted numpy iterator's type (it must show ``iterator``); and
``df2 = df[df.c0 > 0.5]`` on a two-column frame of 2 million rows (target:
within 2x; ``bigdata.py`` compares the same cell with a fork-based server). And
``n = len(df)`` on a frame of a million rows with a text column, found after the
issue: a frame a cell only reads is stored (and saved) again, and its text column is
copied in and out (no target yet). And ``n = len(data)`` on a list of 100,000 small dicts
(records, as JSON gives them), found in stop 43: a cell only reading them copies every
one in and out (no target yet).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

import harness
from harness import heading, ms_range, running, shown_text, verdict

REPEATS = 10
PAUSE = 0.0  # seconds before each timed cell, on the server and in the plain process


@dataclass(frozen=True)
class Row:
    """A state made by ``build``, the ``cell`` timed on it, and the row's target."""

    name: str
    build: str
    cell: str
    target: str          # "ratio", "absolute", "scaling" (against ``against``), "baseline"
    limit: float
    against: Optional[str] = None  # the row a "scaling" or "baseline" target compares with
    png: bool = False    # the plain process also makes the PNG the server shows


# A model and a display of the figure share an array (the gallery's ``lp_model`` and the
# ``ConfusionMatrixDisplay`` of its last result): a cell reading the model alone.
SHARER = ("\nimport numpy as np\nlabels = np.arange(10)\nmodel = {'classes_': labels}\n"
          "display = {'figure': fig, 'labels': labels}\ndel labels")


def rows(quick):
    """The rows, every size divided by 10 with ``quick`` but the views' array."""
    lines, frame_rows = (200, 200_000) if quick else (2_000, 2_000_000)
    records = frame_rows // 20
    figure = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
              f"fig, ax = plt.subplots()\nfor i in range({lines}):\n"
              "    ax.plot([0, 1], [i, i + 1])\nplt.show()")
    return [
        Row("views", "import numpy as np\na = np.zeros((1797, 8, 8))", "L = list(a)",
            "absolute", 0.050),
        Row("views x10", "import numpy as np\na = np.zeros((17970, 8, 8))", "L = list(a)",
            "scaling", 12.0, against="views"),
        Row(f"figure, {lines:,} lines: touched", figure, "ax.set_title('x')\nfig", "ratio",
            2.0, png=True),
        Row(f"figure, {lines:,} lines: untouched", figure, "n = 1", "baseline", 1.5,
            against="empty state"),
        Row(f"figure, {lines:,} lines: a sharer read", figure + SHARER,
            "n = len(model['classes_'])", "baseline", 1.5, against="empty state"),
        Row("empty state", "pass", "n = 1", "none", 0),  # (after: matplotlib is imported)
        Row("exhausted numpy iterator", "import numpy as np\nit = iter(np.arange(2))\n"
            "list(it)", "type(it).__name__", "none", 0),
        Row(f"frame, {frame_rows // 2:,} rows with a text column: a cell reading it",
            "import numpy as np\nimport pandas as pd\n"
            f"df = pd.DataFrame({{'n': np.arange({frame_rows // 2}), "
            f"'word': [f'w{{i % 1000}}' for i in range({frame_rows // 2})]}})",
            "n = len(df)", "none", 0),
        Row(f"records, {records:,} dicts: a cell reading them", "data = [{'id': i, "
            f"'name': f'n{{i}}', 'score': i * 0.5, 'tags': ['a', 'b']}} for i in range({records})]",
            "n = len(data)", "none", 0),
        Row(f"frame, {frame_rows:,} rows x 2: filter",
            "import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(0)\n"
            f"df = pd.DataFrame({{f'c{{i}}': rng.random({frame_rows}) for i in range(2)}})",
            "df2 = df[df.c0 > 0.5]", "ratio", 2.0),
    ]


# -- the plain process ------------------------------------------------------------------------


def plain(row):
    """In this process: ``row``'s build, then its cell REPEATS times, each after PAUSE
    seconds; prints the seconds of each and what the last showed, as JSON."""
    import contextlib
    import io
    namespace = {"__name__": "__main__"}
    exec(compile(row.build, "<build>", "exec"), namespace)
    times, shown = [], ""
    for _ in range(REPEATS):
        time.sleep(PAUSE)
        out = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out):
            value = _run(row.cell, namespace)
            if row.png:
                value.savefig(io.BytesIO(), format="png", bbox_inches="tight")
        times.append(time.perf_counter() - start)
        shown = out.getvalue() + ("" if value is None else repr(value))
    print(json.dumps({"times": times, "shown": shown}))


def _run(cell, namespace):
    """Run ``cell`` as the server does: the value of its last line if that is an expression."""
    *body, last = cell.split("\n")
    try:
        code = compile(last, "<cell>", "eval")
    except SyntaxError:
        exec(compile(cell, "<cell>", "exec"), namespace)
        return None
    exec(compile("\n".join(body), "<cell>", "exec"), namespace)
    return eval(code, namespace)


def in_plain_process(row, quick):
    command = [sys.executable, os.path.abspath(__file__), "--plain", row.name,
               f"--pause={PAUSE}"]
    done = subprocess.run(command + (["--quick"] if quick else []), capture_output=True,
                          text=True, timeout=harness.BUILD_TIMEOUT, check=False)
    if done.returncode != 0:
        raise harness.ServerFailed(f"the plain process failed: {done.stderr[-300:]}")
    return json.loads(done.stdout)


# -- the server -------------------------------------------------------------------------------


def on_server(server, row, number):
    """``{"times", "shown"}`` of ``row``'s cell on a state the server built for it."""
    base = f"row-{number}"
    server.execute(row.build, "initial", base, harness.BUILD_TIMEOUT)
    times, shown = [], ""
    for repeat in range(REPEATS):
        time.sleep(PAUSE)  # (the server's sweeper settles what the last cell left, if long)
        elapsed, reply = server.execute(row.cell, base, f"{base}-{repeat}")
        times.append(elapsed)
        shown = shown_text(reply)
    return {"times": times, "shown": shown}


def measure(quick, only=None):
    """``[(row, server's, plain's)]`` for the rows whose name holds ``only`` (all if None);
    a row that failed has its error instead."""
    found, chosen = [], rows(quick)
    if only is not None:
        named = [row for row in chosen if only in row.name]
        chosen = [row for row in chosen if row in named  # and what their targets compare with
                  or any(each.against == row.name for each in named)]
    with running("product") as server:
        for number, row in enumerate(chosen):
            progress(row.name)
            try:
                found.append((row, on_server(server, row, number), in_plain_process(row, quick)))
            except harness.MEASURE_ERRORS as exc:
                found.append((row, harness.failure(exc), None))
    return found


def progress(message):
    print(f"   ... {message}", file=sys.stderr, flush=True)


# -- printing ---------------------------------------------------------------------------------


def judged(row, medians):
    """``(what the target compares, pass)`` for ``row``, given every row's median times."""
    server, plain = medians[row.name]
    if row.target == "absolute":
        return f"{server * 1000:.1f} ms <= {row.limit * 1000:g} ms", server <= row.limit
    if row.target in ("scaling", "baseline"):
        ratio = server / medians[row.against][0]
        return f"{ratio:.2f}x {row.against} <= {row.limit:g}x", ratio <= row.limit
    if row.target == "ratio":
        return f"ratio <= {row.limit:g}", server / plain <= row.limit
    return "", True


def print_rows(found):
    heading("cliffs: each cell on a branch of its state, against the same code in one process",
            f"ms, median (min-max) of {REPEATS}; the server's times are round trips")
    print(f"   {'row':34} {'plain ms':>22} {'server ms':>22} {'ratio':>8}  {'target':34} "
          f"{'':6} shown")
    medians = {row.name: (statistics.median(server["times"]), statistics.median(plain["times"]))
               for row, server, plain in found if plain is not None}
    medians.setdefault("empty state", (float("nan"),) * 2)
    for row, server, plain in found:
        if plain is None:
            print(f"   {row.name:34} failed: {server}")
            continue
        what, ok = judged(row, medians)
        ratio = medians[row.name][0] / medians[row.name][1]
        same = "same" if server["shown"] == plain["shown"] else (
            f"DIFFER: {server['shown'][:30]!r} / {plain['shown'][:30]!r}")
        print(f"   {row.name:34} {ms_range(plain['times']):>22} {ms_range(server['times']):>22} "
              f"{ratio:8.2f}  {what:34} {verdict(ok) if what else '':6} {same}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller figure and frame")
    parser.add_argument("--in-memory", action="store_true",
                        help="the product started --in-memory (default: as it starts by "
                             "default, its states in a private directory)")
    parser.add_argument("--only", help="the rows whose name holds this (`figure`, `views`)")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds before each timed cell, on both sides (default 0)")
    parser.add_argument("--plain", help=argparse.SUPPRESS)  # the baseline process's row
    args = parser.parse_args(argv)
    global PAUSE
    PAUSE = args.pause
    if args.plain is not None:
        plain(next(row for row in rows(args.quick) if row.name == args.plain))
        return
    if args.in_memory:
        harness.product_options("--in-memory")
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]}; product: "
          f"{' '.join(harness.COMMANDS['product'][0][5:]) or 'as by default'}"
          + (f"; {PAUSE:g} s before each timed cell" if PAUSE else ""))
    print_rows(measure(args.quick, args.only))
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
    harness.finish()
