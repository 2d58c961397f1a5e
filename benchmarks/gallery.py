"""Issue 31's gallery re-run: scikit-learn's example gallery, cell by cell, on the server
against a fresh plain process replaying each example.

    python benchmarks/gallery.py                  # the 20 vendored examples: 3-5 minutes
    python benchmarks/gallery.py --quick          # the three shortest files: a smoke run
    python benchmarks/gallery.py --examples DIR   # every plot_*.py under DIR (sklearn's examples/)
    python benchmarks/gallery.py --only kmeans    # the examples whose file name holds "kmeans"
    python benchmarks/gallery.py --pause 1        # 1 s before each cell, as an agent reading
                                                  # replies (on the server and in the plain run)
    python benchmarks/gallery.py --server-option=--no-gc-freeze  # a server option (repeatable)

A program, not a test: it prints figures and exits 0 whatever they are, and 1 only if a
measurement failed (an HTTP error, a crashed server process, a cell past its timeout): a
mismatch is a figure. Without scikit-learn (or matplotlib) it says so and runs nothing.

The examples (``benchmarks/gallery/``, BSD-3, see its LICENSE and README) are sphinx-gallery
files of scikit-learn 1.9.1, from its sdist on PyPI. A file is split into cells at its
``# %%`` lines; the module docstring and the comment lines that open each block (its text)
are not code, and a block with no code is no cell. Every process of the run has
``MPLBACKEND=Agg``.

On the server (one product server for the whole run, started as users start it,
``harness.py``), each example runs as a chain: cell i on the state cell i-1 made (the first
on ``initial``); a failing cell stores nothing, and the next runs on the last state stored.
Then two branches: the middle cell and the last cell run again on their parent states, each
compared with the plain run and with what the chain's run of the same cell showed (a state
holds its random generators: a branch shows the same even where the example draws without a
seed). The example's states are deleted at its end.

The oracle is a fresh ``python`` process per example (this file with ``--plain``) that
replays the chain on its main thread, as a notebook does: one namespace that is
``__main__``; a cell's last expression, unless it ends in ``;``, is its result (repr'd, and
kept as ``_``); ``plt.show()`` and the end of each cell draw every pyplot figure as a tight
PNG and close it (Jupyter's inline backend, which the server follows); a result is
formatted as IPython's display formatter does (``_repr_mimebundle_``, then each
``_repr_*_`` method for a mime the bundle lacks: an estimator's HTML, say), which the
server's result carries too. It writes each cell's seconds and what it showed; the time
covers the cell, its repr, its formats and its PNGs. Each example is replayed twice, in two
processes; the first gives the times, with ``--pause`` as long before each cell as the
server's cells wait (a thread pool that sleeps in a pause wakes on either side).
A first cell is cheaper on the server, whose process imported scikit-learn before.

Compared per execution (branches too, each against the plain cell): stdout, the
execute_result's text/plain, the error (``ename: evalue``), and each figure shown (a
SHA-256 of its PNG, in order). stderr (warnings) is not compared. Normalised first:
object addresses (``0x7f...``), cell file names (``<cell-3>``) and durations an example
prints (``fit in 0.12 s``, ``3.4 ms``). A cell whose two plain runs show different things
is *unstable* (random draws without a seed, timings in a plot): its mismatches are the
example's, and they are counted apart from the ones a plain process does not explain.

Times: a server time is the client's round trip of ``/execute``; the ratio divides it by
the first plain run's time of the same cell. The target (issue 31): no cell over LIMIT x.
A cell whose plain run takes under FAST seconds is judged on its absolute overhead
instead (server - plain over OVERHEAD seconds counts as over), since a ratio of
milliseconds is mostly HTTP and copying.
"""

import argparse
import ast
import base64
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from typing import Optional

import harness
from harness import heading, running, verdict

sys.path.insert(0, os.path.join(harness.CHECKOUT, "tests"))
from corpus import split_cell  # noqa: E402  (the oracle's rule for the shown value, as the corpus's)

os.environ["MPLBACKEND"] = "Agg"  # the servers and the plain processes inherit it

HERE = os.path.dirname(os.path.abspath(__file__))
VENDORED = os.path.join(HERE, "gallery")
LIMIT = 3.0
FAST = 0.005  # seconds: a plain cell under this is judged on its absolute overhead
OVERHEAD = (LIMIT - 1) * FAST  # what LIMIT x would add to a FAST cell
QUICK_EXAMPLES = 3
IMAGE_LIMIT = 1 << 20  # the server's default --max-image: a larger PNG becomes a note
WORST = 5  # cells within the target listed in the totals, after every cell over it

ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
CELL_NAME = re.compile(r"<cell-\d+>")
DURATION = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?\s?(?:s|sec|secs|seconds|ms|µs|us)\b")


# -- examples and cells ---------------------------------------------------------------------


def example_files(directory):
    """The ``plot_*.py`` files under ``directory`` (every ``*.py`` if there is none), sorted."""
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.join(root, name) for name in names if name.endswith(".py")]
    plots = [path for path in found if os.path.basename(path).startswith("plot_")]
    return sorted(plots or found)


def split_cells(source):
    """The code cells of a sphinx-gallery file: its ``# %%`` blocks without the module
    docstring and without the comment lines that open each block (their text)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        lines = lines[first.end_lineno:]
    blocks, block = [], []
    for line in lines:
        if line.startswith("# %%"):
            blocks.append(block)
            block = []
        else:
            block.append(line)
    blocks.append(block)
    return [code for code in map(_code_of, blocks) if code]


def _code_of(block):
    """A block's code: from its first line that is neither blank nor a comment."""
    start = next((number for number, line in enumerate(block)
                  if line.strip() and not line.lstrip().startswith("#")), len(block))
    return "\n".join(block[start:]).rstrip()


# -- what a cell showed ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """What a user sees of one execution, normalised (see the module docstring)."""

    stdout: str
    result: Optional[str]
    error: Optional[str]
    figures: tuple  # per figure: its PNG's digest, or its text when it has no PNG

    def differences(self, other):
        """The names of the parts that differ from ``other``."""
        return [name for name in ("stdout", "result", "error", "figures")
                if getattr(self, name) != getattr(other, name)]


def normalise(text):
    if text is None:
        return None
    return DURATION.sub("<duration>", CELL_NAME.sub("<cell>", ADDRESS.sub("0x?", text)))


def shown(stdout, result, error, figures):
    return Shown(normalise(stdout), normalise(result), normalise(error),
                 tuple(normalise(each) for each in figures))


def png_digest(png):
    if len(png) > IMAGE_LIMIT:
        return "a PNG over the image limit"
    return "png:" + hashlib.sha256(png).hexdigest()[:16]


def shown_by_server(reply):
    """What a reply of ``/execute`` shows, as ``Shown``."""
    stdout, result, figures = [], None, []
    for item in reply["output"]:
        kind = item["output_type"]
        if kind == "stream" and item["name"] == "stdout":
            stdout.append(item["text"])
        elif kind == "execute_result":
            result = item["data"].get("text/plain")
        elif kind == "display_data":
            png = item["data"].get("image/png")
            text = item["data"].get("text/plain", "")
            figures.append(png_digest(base64.b64decode(png)) if png is not None
                           else "a PNG over the image limit" if "omitted" in text else text)
    error = reply.get("error")
    return shown("".join(stdout), result, error and f"{error['ename']}: {error['evalue']}",
                 figures)


# -- the plain process ----------------------------------------------------------------------


def plain(path, into, pause=0.0):
    """In this process, on its main thread: ``path``'s cells in one ``__main__`` namespace,
    each after ``pause`` seconds; writes ``[{"seconds", "stdout", "result", "error",
    "figures"}]`` to ``into`` as JSON."""
    with open(path, encoding="utf-8") as source:
        cells = split_cells(source.read())
    main = types.ModuleType("__main__")  # as the server and IPython: pickle finds cell names
    sys.modules["__main__"] = main
    runs = []
    for number, code in enumerate(cells):
        time.sleep(pause)  # (a library's thread pool may sleep meanwhile, as on the server)
        runs.append(plain_cell(code, number, vars(main)))
    with open(into, "w", encoding="utf-8") as out:
        json.dump(runs, out)


def plain_cell(code, number, namespace):
    out, figures = io.StringIO(), []
    result = error = None
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
            inline_figures(figures):
        try:
            body, last = split_cell(code, f"<cell-{number}>")
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
            if value is not None:
                namespace["_"] = value
                result = repr(value)
                notebook_formats(value)
                if _is_figure(value):
                    figure_shown(value)  # as the server's result bundle: its PNG
        except Exception as exc:  # the example's own error: compared with the server's
            error = f"{type(exc).__name__}: {exc}"
    return {"seconds": time.perf_counter() - start, "stdout": out.getvalue(),
            "result": result, "error": error, "figures": figures}


REPR_METHODS = {"text/html": "_repr_html_", "text/markdown": "_repr_markdown_",
                "image/svg+xml": "_repr_svg_", "image/png": "_repr_png_",
                "image/jpeg": "_repr_jpeg_", "text/latex": "_repr_latex_",
                "application/json": "_repr_json_", "application/javascript": "_repr_javascript_",
                "application/pdf": "_repr_pdf_"}  # IPython's formatters' methods


def notebook_formats(value):
    """What a notebook's kernel makes of a result besides its repr (not compared: timed)."""
    if isinstance(value, type):
        return
    made = set()
    mimebundle = getattr(value, "_repr_mimebundle_", None)
    if callable(mimebundle):
        with contextlib.suppress(Exception):
            data = mimebundle(include=None, exclude=None)
            made.update((data[0] if isinstance(data, tuple) else data or {}).keys())
    for mime, name in REPR_METHODS.items():
        method = getattr(value, name, None)
        if mime not in made and callable(method):
            with contextlib.suppress(Exception):
                method()


@contextlib.contextmanager
def inline_figures(figures):
    """While a cell runs, ``plt.show()`` shows every pyplot figure; at its end too. Each
    one shown is appended to ``figures``."""
    plt = sys.modules.get("matplotlib.pyplot")
    saved = plt and plt.show
    if plt is not None:
        plt.show = lambda *args, **kwargs: show_figures(plt, figures)
    try:
        yield
    finally:
        plt = sys.modules.get("matplotlib.pyplot")  # the cell may have imported it
        if plt is not None:
            plt.show = saved or plt.show
            show_figures(plt, figures)


def show_figures(plt, figures):
    """Draw each figure as the inline backend does, in pyplot's order, then close them."""
    from matplotlib._pylab_helpers import Gcf
    for manager in Gcf.get_all_fig_managers():
        figures.append(figure_shown(manager.canvas.figure))
    plt.close("all")


def figure_shown(figure):
    """A figure's PNG digest (``bbox_inches="tight"``, as the server draws it), or its repr
    when it has nothing drawn (the server shows an empty figure as text)."""
    if not figure.axes and not figure.lines and not figure.texts and not figure.images:
        return repr(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return png_digest(buffer.getvalue())


def _is_figure(value):
    figure = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    return figure is not None and isinstance(value, figure)


def replayed(path, pause=0.0):
    """One fresh plain process's runs of ``path``'s cells, each after ``pause`` seconds, in
    a scratch directory."""
    scratch = tempfile.mkdtemp(prefix="gallery-plain-")
    into = os.path.join(scratch, "runs.json")
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--plain", path,
                               "--into", into, f"--pause={pause}"], cwd=scratch,
                              capture_output=True, text=True,
                              timeout=harness.BUILD_TIMEOUT, check=False)
        if done.returncode != 0:
            raise harness.ServerFailed(f"the plain process failed on {path}: "
                                       f"{done.stderr[-500:]}")
        with open(into, encoding="utf-8") as runs:
            return json.load(runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- the server -----------------------------------------------------------------------------


@dataclass
class Execution:
    """One cell run on the server, and the plain run it is compared with."""

    cell: int
    branch: bool
    seconds: float
    shown: Shown
    plain: float    # the plain run's seconds
    expected: Shown  # the first plain run's
    stable: bool     # the two plain runs showed the same
    first: Optional[Shown] = None  # a branch's: what the chain's run of its cell showed

    @property
    def matches(self):
        return self.shown == self.expected

    @property
    def same_as_first(self):
        """A branch: whether it showed what the chain's run of its cell did."""
        return self.first is None or self.shown == self.first

    @property
    def over(self):
        if self.plain < FAST:
            return self.seconds - self.plain > OVERHEAD
        return self.seconds / self.plain > LIMIT


def execute(server, code, source, name):
    """Seconds and reply of ``code`` on ``source``, stored as ``name``; ServerFailed if the
    server failed rather than the cell (an HTTP error, a crash, the timeout)."""
    body = {"code": code, "state_name": source, "new_state_name": name,
            "timeout": harness.CELL_TIMEOUT}
    start = time.perf_counter()
    reply = server.request("POST", "/execute", body, harness.CELL_TIMEOUT + harness.SLACK)
    seconds = time.perf_counter() - start
    error = reply.get("error")
    if error is not None and (error["ename"] == "KernelCrash" or
                              "timeout" in error["evalue"] and error["ename"] == "TimeoutError"):
        raise harness.ServerFailed(f"{name}: {error['ename']}: {error['evalue']}\n{code}")
    return seconds, reply


def on_server(server, number, cells, pause=0.0):
    """``[(cell, branch, seconds, Shown)]``: the chain, then the middle and last cells again
    on their parents, ``pause`` seconds apart. The example's states are deleted at the end."""
    parents, runs, source = [], [], "initial"
    for index, code in enumerate(cells):
        parents.append(source)
        time.sleep(pause)
        seconds, reply = execute(server, code, source, f"g{number}-c{index}")
        runs.append((index, False, seconds, shown_by_server(reply)))
        if reply["state_name"] is not None:
            source = reply["state_name"]
    for index in sorted({len(cells) // 2, len(cells) - 1}):
        time.sleep(pause)
        seconds, reply = execute(server, cells[index], parents[index], f"g{number}-b{index}")
        runs.append((index, True, seconds, shown_by_server(reply)))
    for name in server.request("GET", "/states")["states"]:
        if name.startswith(f"g{number}-"):
            server.request("DELETE", f"/states/{name}")
    return runs


def as_shown(run):
    return shown(run["stdout"], run["result"], run["error"], run["figures"])


def measure_example(server, number, path, pause=0.0):
    """The executions of one example, each against its plain run."""
    with open(path, encoding="utf-8") as source:
        cells = split_cells(source.read())
    first = replayed(path, pause)  # the times: paused as the server's cells are
    runs = on_server(server, number, cells, pause)
    second = replayed(path)
    expected = [as_shown(run) for run in first]
    stable = [as_shown(one) == as_shown(two) for one, two in zip(first, second)]
    chain = {cell: seen for cell, branch, _, seen in runs if not branch}
    return cells, [Execution(cell, branch, seconds, seen, first[cell]["seconds"],
                             expected[cell], stable[cell], chain[cell] if branch else None)
                   for cell, branch, seconds, seen in runs]


# -- printing -------------------------------------------------------------------------------


@dataclass
class Example:
    name: str
    cells: list
    executions: list = field(default_factory=list)
    failed: Optional[str] = None


def ratio(execution):
    return execution.seconds / execution.plain


def print_examples(examples):
    heading("the gallery, cell by cell: the server's chain and branches against a plain "
            "process", f"ratio = server round trip / plain cell, per execution; over = "
            f"over {LIMIT:g}x, or, for a plain cell under {FAST * 1000:g} ms, over "
            f"{OVERHEAD * 1000:g} ms more; unstable = shows something else in a second plain "
            "run; br=1st = branches that showed what the chain's run of their cell did")
    print(f"   {'example':48} {'cells':>5} {'execs':>5} {'match':>5} {'unstbl':>6} "
          f"{'br=1st':>6} {'plain s':>8} {'server s':>8} {'median':>7} {'max':>7} {'over':>4}")
    for example in examples:
        if example.failed is not None:
            print(f"   {example.name:48} failed: {example.failed}")
            continue
        runs = example.executions
        chain = [run for run in runs if not run.branch]
        ratios = [ratio(run) for run in runs]
        print(f"   {example.name:48} {len(example.cells):5} {len(runs):5} "
              f"{sum(run.matches for run in runs):5} "
              f"{sum(not run.stable for run in runs):6} "
              f"{sum(run.same_as_first for run in runs if run.branch):3}/"
              f"{sum(run.branch for run in runs):<2} "
              f"{sum(run.plain for run in chain):8.2f} {sum(run.seconds for run in chain):8.2f} "
              f"{statistics.median(ratios):7.2f} {max(ratios):7.2f} "
              f"{sum(run.over for run in runs):4}")


def print_totals(examples):
    done = [(example, run) for example in examples if example.failed is None
            for run in example.executions]
    if not done:
        return
    runs = [run for _, run in done]
    mismatched = [run for run in runs if not run.matches]
    timed = [run for run in runs if run.plain >= FAST]
    over = [(example, run) for example, run in done if run.over]
    heading("totals", f"target (issue 31): 0 kernel bugs, no cell over {LIMIT:g}x")
    print(f"   executions {len(runs)} ({sum(run.branch for run in runs)} of them branches), "
          f"matching the plain process {len(runs) - len(mismatched)}; mismatches "
          f"{len(mismatched)}: {sum(not run.stable for run in mismatched)} on cells unstable "
          f"in plain Python, {sum(run.stable for run in mismatched)} on stable cells")
    branches = [run for run in runs if run.branch]
    print(f"   branches that showed what the chain's run of their cell did: "
          f"{sum(run.same_as_first for run in branches)} of {len(branches)}")
    print(f"   median ratio {statistics.median(ratio(run) for run in runs):.2f} "
          f"(cells of {FAST * 1000:g} ms or more: "
          f"{statistics.median(ratio(run) for run in timed) if timed else float('nan'):.2f}); "
          f"cells over: {len(over)}  {verdict(not over)}")
    print_worst(done)
    print_mismatches(examples)


def print_worst(done):
    """Every cell over the target, then the highest ratios of the cells of FAST or more."""
    over = [pair for pair in done if pair[1].over]
    timed = sorted((pair for pair in done if pair[1].plain >= FAST and not pair[1].over),
                   key=lambda pair: -ratio(pair[1]))
    print(f"   cells over ({len(over)}), then the next highest ratios of cells of "
          f"{FAST * 1000:g} ms or more:")
    for example, run in sorted(over, key=lambda pair: -ratio(pair[1])) + timed[:WORST]:
        print(f"     {'*' if run.over else ' '} {ratio(run):6.2f}x  {run.seconds * 1000:9.1f} ms "
              f"vs {run.plain * 1000:9.1f} ms  {example.name} cell {run.cell}"
              f"{' (branch)' if run.branch else ''}: {first_line(example.cells[run.cell])}")


def print_mismatches(examples):
    heading("mismatches", "what the server showed against the first plain run, normalised")
    for example in examples:
        for run in example.executions if example.failed is None else ():
            if run.matches and run.same_as_first:
                continue
            where = f"{example.name} cell {run.cell}{' (branch)' if run.branch else ''}"
            why = "unstable in plain Python" if not run.stable else "STABLE in plain Python"
            first = "" if run.same_as_first else "; NOT what the chain's run showed"
            print(f"   {where}: {', '.join(run.shown.differences(run.expected)) or 'nothing'} "
                  f"differ{first}; {why}")
            for name in run.shown.differences(run.expected):
                print(f"      server: {clipped(getattr(run.shown, name))}")
                print(f"      plain:  {clipped(getattr(run.expected, name))}")


def first_line(code):
    line = code.strip().splitlines()[0]
    return line if len(line) <= 60 else line[:57] + "..."


def clipped(value, limit=160):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# -- main -----------------------------------------------------------------------------------


def missing_library():
    """The name of a library the examples need that this Python lacks, or None."""
    for module, name in (("sklearn", "scikit-learn"), ("matplotlib", "matplotlib")):
        if importlib.util.find_spec(module) is None:
            return name
    return None


def chosen(args):
    paths = example_files(args.examples)
    if args.only is not None:
        paths = [path for path in paths if args.only in os.path.basename(path)]
    if args.quick:
        paths = sorted(paths, key=os.path.getsize)[:QUICK_EXAMPLES]
    return paths


def measure(paths, pause=0.0, options=()):
    examples = []
    with running("product", options) as server:
        for number, path in enumerate(paths):
            name = os.path.relpath(path, HERE) if path.startswith(HERE) else path
            print(f"   ... {name}", file=sys.stderr, flush=True)
            example = Example(os.path.basename(path)[:-3], [])
            try:
                example.cells, example.executions = measure_example(server, number, path,
                                                                    pause)
            except harness.MEASURE_ERRORS as exc:
                example.failed = harness.failure(exc)
            examples.append(example)
    return examples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", default=VENDORED,
                        help="a directory of sphinx-gallery .py files (default: the vendored "
                             "benchmarks/gallery/)")
    parser.add_argument("--only", help="the examples whose file name holds this")
    parser.add_argument("--quick", action="store_true",
                        help=f"the {QUICK_EXAMPLES} smallest files only: a smoke run")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds before each cell, on the server and in the plain run "
                             "that gives the times (default 0: back to back), as a client "
                             "that reads each reply before the next")
    parser.add_argument("--server-option", action="append", default=[],
                        help="an option for the server's command line (repeatable)")
    parser.add_argument("--plain", help=argparse.SUPPRESS)  # the oracle's example ...
    parser.add_argument("--into", help=argparse.SUPPRESS)  # ... and where its runs go
    args = parser.parse_args(argv)
    if args.plain is not None:
        plain(args.plain, args.into, args.pause)
        return
    missing = missing_library()
    if missing is not None:
        print(f"{missing} is not installed: nothing to run")
        return
    import sklearn
    started = time.perf_counter()
    paths = chosen(args)
    print(f"python {sys.version.split()[0]}; scikit-learn {sklearn.__version__}; "
          f"{len(paths)} examples from {args.examples}")
    examples = measure(paths, args.pause, args.server_option)
    print_examples(examples)
    print_totals(examples)
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
    harness.finish()
