"""Docstring examples of numpy, pandas and matplotlib as small notebooks, and a
plain-Python oracle that runs them as one ``python`` process would, with the
kernel's notebook rules: each cell in a fresh ``contextvars.Context``, and
figures drawn and closed at ``plt.show()`` and at the end of each cell, as
Jupyter's inline backend does (``run_plain_cell``).

Nothing here is fetched or committed: the examples are harvested at test time
from the installed libraries with ``doctest.DocTestFinder``. Each docstring with
``>>>`` examples is one notebook, each example one cell, after a first cell
with the imports the library's own doctests assume.

Process-wide state follows a kernel's states, and a plain run keeps it from cell to cell
(one namespace, one ``contextvars`` context). What earlier notebooks left in the process
(library settings, pyplot's figures) is reset by ``fresh_process`` before each run; the
global random generators are reseeded before each cell by ``seed_cell`` in the plain run
and by ``SEED_CELL``, a cell of its own, in the kernel.
"""

import ast
import collections
import contextlib
import contextvars
import doctest
import importlib
import importlib.util
import inspect
import io
import itertools
import os
import pkgutil
import random
import re
import socket
import sys
import time
import tokenize
import warnings
import zlib
from dataclasses import dataclass
from typing import Optional

os.environ["MPLBACKEND"] = "Agg"  # before matplotlib is imported: no window may open

LIBRARIES = ("numpy", "pandas", "matplotlib")
PROLOGUES = {
    "numpy": "import numpy as np",
    "pandas": "import numpy as np\nimport pandas as pd",
    "matplotlib": "import numpy as np\nimport matplotlib as mpl\nimport matplotlib.pyplot as plt",
}
# Dotted-name parts of modules that are private, tests, build tools, GUI backends,
# or (pylab) the library re-exporting numpy.
PRIVATE_MODULE = re.compile(
    r"\.(_[^.]*|tests?|testing|conftest|setup|f2py|distutils|typing|backends|sphinxext"
    r"|core|compat|pylab)(\.|$)")
NETWORK = re.compile(r"\b(?:https?|ftp|s3|gcs|gs|file)://|urlopen|urlretrieve")
# Calls that read or write files, the clipboard or a database.
FILES = re.compile(r"\bread_(?!only)\w+\(|\.to_(?:csv|excel|parquet|feather|hdf|pickle|sql|stata"
                   r"|orc|clipboard|xml)\(|\bsavefig\(|\bsavez?(?:_compressed)?\(|\bload(?:txt)?\("
                   r"|\bgenfromtxt\(|\bfromfile\(|\btofile\(|\bmemmap\(|\bopen\(|\bHDFStore\("
                   r"|\bExcel(?:File|Writer)\(|\bsqlite3\b|\bsqlalchemy\b|\binput\(")
TEST_SUITE = re.compile(r"\b(?:np|numpy|pd|pandas|mpl|matplotlib)\.test\(")  # pd.test() runs pytest
SLOW_SECONDS = 5.0       # a notebook whose plain run takes longer is skipped as slow
BRANCH_EVERY = 5         # every fifth cell also runs in a second branch
RERUNS = 5               # plain runs at most, to tell which cells show the same every time
# A notebook that draws random numbers gets a third plain run even when two agree: a summary
# of 10,000 unseeded draws (``x - y`` of two fractions) agreed twice by chance in one CI run.
MAY_DRAW = re.compile(r"random|rng|shuffle|choice|sample", re.IGNORECASE)
DEFAULT_SHARE = 4        # percent of notebooks in the default (not slow) selection
ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
CELL_NAME = re.compile(r"<cell-\d+>")

TALLY = collections.Counter()  # what was collected, run, dropped and skipped, and why
NOTEBOOKS = "notebooks run in plain Python and compared"
STABLE = "cells compared: they show the same in every plain run"
UNSTABLE = "cells excluded: they show something else in another plain run"
COMPARED = "cell runs in the kernel compared with plain Python (both modes, branches counted)"


class NetworkBlocked(OSError):
    """Raised by a connection attempt while a corpus notebook runs."""


@dataclass(frozen=True)
class Notebook:
    name: str      # the public dotted name of the documented object
    library: str
    cells: tuple   # the prologue, then one cell per example


@dataclass(frozen=True)
class Shown:
    """What a user sees of one cell: printed stdout, the last value's repr, the error."""

    stdout: str
    result: Optional[str]
    error: Optional[str]  # "ename: evalue"

    def text(self):
        parts = [self.stdout]
        if self.result is not None:
            parts.append(f"[execute_result]\n{self.result}\n")
        if self.error is not None:
            parts.append(f"[error]\n{self.error}\n")
        return "".join(parts)


def normalise(text):
    """Hide what differs between two runs of the same code: addresses and cell numbers."""
    return CELL_NAME.sub("<cell>", ADDRESS.sub("0x?", text)) if text is not None else None


def shown(stdout, result, error):
    return Shown(normalise(stdout), normalise(result), normalise(error))


# -- harvesting -------------------------------------------------------------------------------

def quiet_import(name):
    """The module ``name``, or None if it needs an optional library that is not installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated modules warn on import; not our subject
        try:
            return importlib.import_module(name)
        except ImportError:
            TALLY[f"modules not importable (optional library missing): {name.split('.')[0]}"] += 1
            return None


def public_modules(package):
    """``package`` and its public submodules, depth first in name order."""
    yield package
    for info in sorted(pkgutil.iter_modules(package.__path__, package.__name__ + "."),
                       key=lambda info: info.name):
        if PRIVATE_MODULE.search(info.name):
            continue
        module = quiet_import(info.name)
        if module is not None and info.ispkg:
            yield from public_modules(module)
        elif module is not None:
            yield module


def public_names(obj):
    names = getattr(obj, "__all__", None) if inspect.ismodule(obj) else None
    return sorted(name for name in (dir(obj) if names is None else names)
                  if isinstance(name, str) and not name.startswith("_"))


def defined_in(obj, library):
    """True if ``obj`` (a function, class, property or descriptor) comes from ``library``."""
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        module = getattr(getattr(target, "__objclass__", None), "__module__", None)
    return isinstance(module, str) and (module == library or module.startswith(library + "."))


def public_objects(library):
    """``(dotted name, object)`` for the public objects of ``library`` and their members,
    and the members of classes reached that way (``Series.str.upper``)."""
    for module in public_modules(importlib.import_module(library)):
        for name in public_names(module):
            obj = getattr(module, name, None)
            if obj is not None and not inspect.ismodule(obj) and defined_in(obj, library):
                yield from with_members(f"{module.__name__}.{name}", obj, library, depth=2)


def with_members(name, obj, library, depth):
    yield name, obj
    if not inspect.isclass(obj) or depth == 0:
        return
    for attr in public_names(obj):
        with contextlib.suppress(AttributeError):  # a name dir() lists but the class lacks
            member = inspect.getattr_static(obj, attr)
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            accessor = getattr(obj, attr, None)  # pandas accessors resolve to their class
            if inspect.isclass(accessor) and not inspect.isclass(member):
                member = accessor
            if defined_in(member, library):
                yield from with_members(f"{name}.{attr}", member, library, depth - 1)


def docstring_tests(library):
    """``{docstring: (name, examples)}``: each docstring once, under its shortest public name."""
    finder = doctest.DocTestFinder(recurse=False)
    found = {}
    for name, obj in public_objects(library):
        try:
            tests = finder.find(obj, name, module=False, globs={})
        except ValueError:  # a docstring doctest cannot parse (bad indentation of `...`)
            TALLY[f"{library}: docstrings doctest cannot parse"] += 1
            continue
        for test in tests:
            known = found.get(test.docstring)
            if test.examples and (known is None or (len(name), name) < (len(known[0]), known[0])):
                found[test.docstring] = (name, test.examples)
    return found


def notebooks(library):
    """The notebooks made from ``library``'s docstrings, by name; those that need the
    network or files are counted in TALLY and left out."""
    result = []
    for name, examples in sorted(docstring_tests(library).values(), key=lambda item: item[0]):
        cells = (PROLOGUES[library],) + tuple(example.source.rstrip("\n") for example in examples)
        reason = ("network" if any(NETWORK.search(cell) for cell in cells) else
                  "files" if any(FILES.search(cell) for cell in cells) else
                  "the library's own test suite" if any(TEST_SUITE.search(cell) for cell in cells)
                  else None)
        TALLY[f"{library}: docstrings with examples"] += 1
        TALLY[f"{library}: examples"] += len(examples)
        if reason is None:
            result.append(Notebook(name, library, cells))
        else:
            TALLY[f"{library}: docstrings left out, they use {reason}"] += 1
    return result


def in_default_selection(notebook):
    """A stable choice of DEFAULT_SHARE percent, the same on every Python and run."""
    return zlib.crc32(notebook.name.encode()) % 100 < DEFAULT_SHARE


# -- process-wide state ------------------------------------------------------------------------

_BASELINE = {}  # library settings as they were before the first notebook ran


def fresh_process():
    """Undo what earlier notebooks did to settings that live in modules, not in states."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")
    for library, (get, put) in _SETTINGS.items():
        if library in sys.modules:
            if library not in _BASELINE:
                _BASELINE[library] = get()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # restoring deprecated rcParams warns
                put(_BASELINE[library])


# What seed_cell does, as a cell: it binds no name, so the state is the same but for them.
SEED_CELL = ("__import__('random').seed({number})\n"
             "if 'numpy' in __import__('sys').modules:\n"
             "    __import__('numpy').random.seed({number})")


def seed_cell(number):
    """Seed the module-level generators, which every state shares, as cell ``number`` needs."""
    random.seed(number)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(number)


def _numpy_settings():
    np = sys.modules["numpy"]
    return np.get_printoptions(), np.geterr(), np.polynomial.Polynomial._use_unicode


def _put_numpy_settings(settings):
    np = sys.modules["numpy"]
    np.set_printoptions(**settings[0])
    np.seterr(**settings[1])
    np.polynomial.set_default_printstyle("unicode" if settings[2] else "ascii")


def _pandas_settings():
    return None  # reset_option("all") needs no saved copy


def _put_pandas_settings(_):
    sys.modules["pandas"].reset_option("all")


def _matplotlib_settings():
    return sys.modules["matplotlib"].rcParams.copy()


def _put_matplotlib_settings(settings):
    sys.modules["matplotlib"].rcParams.update(settings)


_SETTINGS = {"numpy": (_numpy_settings, _put_numpy_settings),
             "pandas": (_pandas_settings, _put_pandas_settings),
             "matplotlib": (_matplotlib_settings, _put_matplotlib_settings)}


@contextlib.contextmanager
def no_network():
    """Make every connection attempt raise NetworkBlocked, in every thread."""
    def refuse(*args, **kwargs):
        raise NetworkBlocked("the corpus test runs without the network")
    saved = socket.socket.connect, socket.create_connection, socket.getaddrinfo
    socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse
    try:
        yield
    finally:
        socket.socket.connect, socket.create_connection, socket.getaddrinfo = saved


# -- the oracle: one plain namespace ---------------------------------------------------------------

def split_cell(code, filename):
    """``(body, last)`` compiled as the kernel does: the last expression is shown
    unless it ends in ``;`` (IPython's rule)."""
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not ends_with_semicolon(code):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
    return compile(tree, filename, "exec"), last


def ends_with_semicolon(code):
    skipped = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
               tokenize.DEDENT, tokenize.INDENT}
    tokens = [token.string for token in tokenize.generate_tokens(io.StringIO(code).readline)
              if token.type not in skipped]
    return bool(tokens) and tokens[-1] == ";"


def plain_repr(value):
    """``repr(value)``, or the kernel's placeholder when that raises."""
    try:
        text = repr(value)
    except Exception as exc:  # the example's object fails to show itself; so does the kernel's
        return f"<repr failed: {type(exc).__name__}>"
    return text if isinstance(text, str) else f"<repr returned {type(text).__name__}, not str>"


def error_text(exc):
    try:
        evalue = str(exc)
    except Exception:  # the example's exception fails to show itself; the kernel says so too
        evalue = "<str() failed>"
    return f"{type(exc).__name__}: {evalue}"


def run_plain_cell(code, number, namespace):
    """Run one cell in ``namespace`` as the kernel runs a cell, and return what a
    user would see, and the error.

    Like the kernel's cells (``threads.py``), each runs in a fresh
    ``contextvars.Context``: numpy's print and error settings, which are context
    variables, do not carry over to the next cell. Figures are as in Jupyter's
    inline backend: ``plt.show()`` and the end of the cell draw and close every figure.
    """
    out = io.StringIO()
    result = error = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
            inline_figures():
        try:
            body, last = split_cell(code, f"<cell-{number}>")
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
            result = None if value is None else plain_repr(value)
        except Exception as exc:  # the example's own error, compared with the kernel's
            error = exc
    return shown(out.getvalue(), result, error and error_text(error)), error


@contextlib.contextmanager
def inline_figures():
    """While a cell runs, ``plt.show()`` shows every figure; at its end too."""
    plt = sys.modules.get("matplotlib.pyplot")
    saved = plt and plt.show
    if plt is not None:
        plt.show = lambda *args, **kwargs: show_figures(plt)
    try:
        yield
    finally:
        plt = sys.modules.get("matplotlib.pyplot")  # the cell may have imported it
        if plt is not None:
            plt.show = saved or plt.show
            show_figures(plt)


def show_figures(plt):
    """Draw each figure as the inline backend does (a tight PNG, unless it is empty;
    drawing places labels and ticks), then close them all."""
    for number in plt.get_fignums():
        figure = plt.figure(number)
        if figure.axes or figure.lines or figure.texts or figure.images:
            try:
                figure.savefig(io.BytesIO(), format="png", bbox_inches="tight")
            except Exception:  # the kernel leaves the image out and says so on stderr
                pass
    plt.close("all")


def run_in_context(code, number, namespace, run, context):
    """Run cell ``number`` of plain run ``run`` (see ``expect``) in ``context``, the
    one context of its run, as one thread of a plain process carries it from cell to cell."""
    seed_cell(number)
    if not run:
        return context.run(run_plain_cell, code, number, namespace)
    dirty_free_memory()
    with skewed_clocks(run):
        return context.run(run_plain_cell, code, number, namespace)


CLOCKS = ("time", "perf_counter", "monotonic", "process_time")


@contextlib.contextmanager
def skewed_clocks(run):
    """Clocks that gain ``run`` tenths of a second at each reading, so that a duration
    a cell shows (``timeit``, ``perf_counter()`` differences, their ratios) differs
    from the first run's."""
    saved = {name: getattr(time, name) for name in CLOCKS}
    readings = itertools.count(1)
    for name, clock in saved.items():
        setattr(time, name, lambda clock=clock: clock() + next(readings) * run * 0.1)
    timeit = sys.modules.get("timeit")  # its functions took perf_counter as a default
    functions = (timeit.Timer.__init__, timeit.timeit, timeit.repeat) if timeit else ()
    defaults = [function.__defaults__ for function in functions]
    for function, values in zip(functions, defaults):
        function.__defaults__ = tuple(time.perf_counter if value is saved["perf_counter"]
                                      else value for value in values)
    try:
        yield
    finally:
        for name, clock in saved.items():
            setattr(time, name, clock)
        for function, values in zip(functions, defaults):
            function.__defaults__ = values


def replay(cells, numbers, run):
    """A fresh namespace and context after running ``cells[n] for n in numbers``."""
    namespace, context = {"__name__": "__main__"}, contextvars.Context()
    for number in numbers:
        run_in_context(cells[number], number, namespace, run, context)
    return namespace, context


def run_plain(cells, run=0):
    """``(shown, needs, namespace)``: what each cell shows run in one plain namespace,
    why a failing cell is no test of the kernel (or None), and the namespace.

    A failing cell's effects on the namespace are undone by a replay of the cells
    that succeeded, because the kernel stores nothing for a failing cell.
    """
    fresh_process()
    namespace, context = replay(cells, [], run)
    seen, needs, succeeded = [], [], []
    for number, code in enumerate(cells):
        outcome, error = run_in_context(code, number, namespace, run, context)
        seen.append(outcome)
        needs.append(error and missing_resource(error))
        if error is None:
            succeeded.append(number)
        else:
            del error  # its traceback holds the namespace
            namespace, context = replay(cells, succeeded, run)
    return seen, needs, namespace


OPTIONAL = re.compile(r"[Mm]issing optional dependency '([\w.-]+)'|`Import (\w+)` failed"
                      r"|requires (?:the )?[`']?(\w+)")


def missing_resource(error):
    """Why an example failed if it needs what this test does not offer, else None."""
    if isinstance(error, NetworkBlocked):
        return "the network"
    if isinstance(error, FileNotFoundError):
        return "files that are not there"
    if isinstance(error, ModuleNotFoundError) and error.name:
        top = error.name.split(".")[0]
        return None if importlib.util.find_spec(top) else f"{top} (not installed)"
    if isinstance(error, ImportError):
        found = OPTIONAL.search(str(error))
        name = found and next(group for group in found.groups() if group)
        return f"{name.lower()} (not installed)" if name else None
    return None


@dataclass(frozen=True)
class Expected:
    """What plain Python shows for each cell of a notebook, and which cells it
    shows the same way in every plain run; or why the notebook is no test of the kernel."""

    seen: tuple
    stable: tuple
    skip: Optional[str]


def expect(notebook):
    """Run ``notebook`` in plain Python twice, or up to RERUNS times if a cell showed
    something else the second time (once if it is to be skipped).

    The runs are made to differ where a program may differ from run to run: each
    later run happens while the earlier runs' objects live, so no object gets an
    earlier one's address, and each of its cells after ``dirty_free_memory``, so
    uninitialized memory (``np.empty``) holds other bytes than the first run's,
    and with ``skewed_clocks``, so durations differ.
    Randomness without a seed differs by itself; a
    choice among few outcomes (a shuffle of three) can agree twice by chance, so
    a notebook with any unstable cell gets more runs, and one that may draw
    random numbers (``MAY_DRAW``) three at least.
    """
    started = time.perf_counter()
    first, needs, namespace = run_plain(notebook.cells)
    elapsed = time.perf_counter() - started
    missing = next((need for need in needs if need), None)
    if missing:
        return Expected(tuple(first), (), f"needs {missing}")
    if elapsed > SLOW_SECONDS:
        return Expected(tuple(first), (), f"slow: over {SLOW_SECONDS:g} s in plain Python")
    alive, stable = [namespace], [True] * len(first)
    agreeing_runs = 3 if any(MAY_DRAW.search(cell) for cell in notebook.cells) else 2
    for run in range(1, RERUNS):
        if run >= agreeing_runs and all(stable):
            break
        seen, _, namespace = run_plain(notebook.cells, run)
        alive.append(namespace)
        stable = [same and a == b for same, a, b in zip(stable, first, seen)]
    return Expected(tuple(first), tuple(stable), None)


_PATTERNS = itertools.cycle(range(1, 256))


def dirty_free_memory():
    """Write a byte pattern of its own over the freed buffers that numpy hands out
    next: the two on top of its cache for each size to 1 KiB (in steps of 4 bytes,
    every dtype but one-byte ones), and freed blocks of the allocator to 64 KiB."""
    np = sys.modules.get("numpy")
    if np is None:
        return
    pattern = next(_PATTERNS)  # never the one an earlier run left behind
    for size in itertools.chain(range(4, 1025, 4), range(2048, 1 << 16, 1024)):
        first, second = np.empty(size, np.uint8), np.empty(size, np.uint8)
        first.fill(pattern)
        second.fill(pattern)
        del first, second
