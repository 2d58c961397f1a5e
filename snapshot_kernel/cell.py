"""Running one cell of code on a namespace, and turning what happened into
Jupyter-shaped dicts. Knows nothing of states, threads or HTTP.

The split follows ``code.InteractiveInterpreter``: compile, run, report. A
compile error and a runtime error are both the cell's error; the kernel's own
frames are dropped from tracebacks.
"""

import ast
import contextlib
import inspect
import io
import itertools
import linecache
import os
import reprlib
import sys
import threading
import tokenize
import traceback
import weakref

from .notebook import magics
from .runtime import patchsites

CELL_FILENAME_PREFIX = "<cell-"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def call_user(fn, *args):
    """Call ``fn(*args)``, which runs user code; return ``(result, None)`` or ``(None, exc)``."""
    try:
        return fn(*args), None
    except BaseException as exc:  # the user-code boundary: whatever user code raises, SystemExit and
        return None, exc          # KeyboardInterrupt included, is its own error, never the server's.


_cell_numbers = itertools.count(1)  # per process: kernels share linecache


def cell_filename():
    """A new cell's file name for tracebacks, ``<cell-N>``, unique in the process."""
    return f"{CELL_FILENAME_PREFIX}{next(_cell_numbers)}>"


class Source:
    """A cell's source in ``linecache``, so tracebacks show its lines, as IPython's do.

    It stays there while the cell runs and while any code compiled from it
    lives (a function a state keeps), and goes with the last of them, so
    deleted states and failed cells leave nothing behind.
    """

    _live = {}  # filename -> code objects of the cell still alive
    _lock = threading.RLock()  # finalizers may run (in the collector) while it is held

    @classmethod
    def keep(cls, filename, code, compiled):
        """Keep ``code`` in linecache under ``filename`` until ``done(filename)`` and
        while the code nested in ``compiled`` (functions, classes) lives."""
        nested = _nested(compiled)
        with cls._lock:
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            cls._live[filename] = cls._live.get(filename, 0) + len(nested) + 1
        for each in nested:
            weakref.finalize(each, cls._release, filename).atexit = False

    @classmethod
    def keep_while(cls, filename, code, alive):
        """Keep ``code`` in linecache under ``filename`` while ``alive`` (a code object that
        another process compiled from it, say) lives."""
        with cls._lock:
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            cls._live[filename] = cls._live.get(filename, 0) + 1
        weakref.finalize(alive, cls._release, filename).atexit = False

    @classmethod
    def done(cls, filename):
        """The cell ``filename`` has run and its errors are formatted."""
        cls._release(filename)

    @classmethod
    def _release(cls, filename):
        with cls._lock:
            if filename not in cls._live:
                return  # the cell did not compile
            cls._live[filename] -= 1
            if cls._live[filename] == 0:
                del cls._live[filename]
                linecache.cache.pop(filename, None)


def _nested(compiled):
    """The code objects nested in the code objects ``compiled`` (None ones skipped)."""
    return [each for top in compiled if top is not None
            for each in code_tree(top) if each is not top]


def code_tree(code):
    """``code`` and every code object nested in it (functions, classes, comprehensions)."""
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from code_tree(const)


# CPython before 3.13 keeps the AST constructor's recursion depth in shared state:
# cells parsed at once in two threads can fail with "AST constructor recursion depth
# mismatch" (gh-106905). Cells are parsed one at a time there.
_parsing = threading.Lock() if sys.version_info < (3, 13) else contextlib.nullcontext()


# Cells sent again and again (``1+1``, ``df.shape``, a poll of a status): their code is
# kept, compiled under a placeholder name, and given each run's file name with
# ``code.replace``, a tenth of the cost of compiling. Only code with nothing nested in it
# (no function, class or comprehension, whose own code objects would keep the old name),
# and only short cells; the oldest goes first.
KEPT_COMPILED = 256
KEPT_SOURCE_CHARS = 4096
_compiled = {}  # cell source -> (body, last_expression, notebook), named "<cell>"
_compiled_lock = threading.Lock()  # for changes: an eviction iterates the dict


def compile_cell(code, filename):
    """Compile ``code`` to ``(body, last_expression, notebook, targets)``: the last expression
    is None unless the cell ends in one whose value should be shown, and
    ``notebook`` says the cell used notebook syntax (``magics``), whose calls
    need ``get_ipython`` in its namespace, and ``targets`` are the places it may
    patch (``patchsites.targets``). The source stays in linecache, as written, for
    as long as code compiled from it lives."""
    kept = _compiled.get(code)
    if kept is not None:
        body, last, notebook, found = kept
        body, last = (None if each is None else each.replace(co_filename=filename)
                      for each in (body, last))
    else:
        python = magics.transform(code)
        with _parsing:
            body, last, found = _compile(python, filename)
        notebook = python is not code
        if len(code) <= KEPT_SOURCE_CHARS and not _nested((body, last)):
            kept = tuple(None if each is None else each.replace(co_filename="<cell>")
                         for each in (body, last)) + (notebook, found)
            with _compiled_lock:
                if len(_compiled) >= KEPT_COMPILED:
                    del _compiled[next(iter(_compiled))]
                _compiled[code] = kept
    Source.keep(filename, code, (body, last))
    return body, last, notebook, found


def _compile(code, filename):
    if "\n" not in code.strip():
        try:  # one line that is one expression: the common `df.head()` needs no AST
            return None, compile(code, filename, "eval", _AWAIT), patchsites.source_targets(code)
        except SyntaxError:  # a statement, or a trailing `;`: the general path says which
            pass
    tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST | _AWAIT)
    found = patchsites.targets(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(code):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", _AWAIT) if tree.body else None
    return body, (compile(last, filename, "eval", _AWAIT) if last is not None else None), found


_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # as IPython's autoawait: `await` at the top level


def _ends_with_semicolon(code):
    """True if the last token of ``code`` is ``;`` (IPython: suppress the value)."""
    if ";" not in code:
        return False
    ignored = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
               tokenize.DEDENT, tokenize.INDENT}
    last = None
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type not in ignored:
            last = token
    return last is not None and last.string == ";"


def run_code(body, last, namespace):
    """Execute a compiled cell in ``namespace``; return the last expression's value.
    A cell with top-level ``await`` runs in an event loop of its own, as
    ``asyncio.run`` runs one, and so does its last expression if it awaits."""
    if body is not None:
        if body.co_flags & inspect.CO_COROUTINE:
            _await(eval(body, namespace))
        else:
            exec(body, namespace)
    if last is None:
        return None
    if last.co_flags & inspect.CO_COROUTINE:
        return _await(eval(last, namespace))
    return eval(last, namespace)


def _await(coroutine):
    import asyncio  # only cells that await pay for importing it
    return asyncio.run(coroutine)


def error_dict(exc):
    """``{"ename", "evalue", "traceback"}`` for ``exc``, starting at the cell's frames.

    Formatting runs the exception's own code (``__str__``, a SyntaxError's
    fields), so it goes through the user-code boundary: an exception the
    traceback module cannot format still gives a reply, with a note saying so.
    Drops the traceback objects afterwards: they pin the cell's namespace.
    """
    ename = _plain_text(type(exc).__name__, "<unnamed exception>")
    evalue, failed = call_user(str, exc)
    evalue = _plain_text(evalue, "<str() failed>") if failed is None else "<str() failed>"
    lines, failed = call_user(_format, exc)
    if failed is not None or not isinstance(lines, list):
        lines = [f"{ename}: {evalue}\n",
                 f"(the traceback could not be formatted: {type(failed).__name__})\n"]
        drop_tracebacks(failed)
    drop_tracebacks(exc)
    return {"ename": ename, "evalue": evalue,
            "traceback": [_plain_text(line, "?\n") for line in lines]}


def _format(exc):
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _hide_kernel_frames(report)
    return list(report.format())


def plain_name(name):
    """A str subclass as a plain str (its own methods may raise)."""
    return str.__str__(name)


def safe_type_name(value):
    """The name of ``value``'s type; never raises (a metaclass's ``__name__`` may)."""
    name, exc = call_user(lambda: type(value).__name__)
    if exc is not None:
        drop_tracebacks(exc)
        return "<type name failed>"
    return _plain_text(name, "<type name is not a str>")


def _plain_text(text, fallback):
    """``text`` as a plain str (a str subclass's own methods may raise), or ``fallback``."""
    return str.__str__(text) if isinstance(text, str) else fallback


def _hide_kernel_frames(report):
    """Remove the kernel's frames from ``report`` and the exceptions chained to it: this
    package's, and those it calls until a cell's code runs again (``ast.parse`` for a
    SyntaxError). A library a cell calls keeps its frames."""
    seen = set()
    while report is not None and id(report) not in seen:
        seen.add(id(report))
        report.stack[:] = _users_frames(report.stack)
        report = report.__cause__ or report.__context__


def _users_frames(stack):
    kept, in_kernel = [], False
    for frame in stack:
        if frame.filename.startswith(_PACKAGE_DIR):
            in_kernel = True
        elif frame.filename.startswith(CELL_FILENAME_PREFIX):
            in_kernel = False
        if not in_kernel:
            kept.append(frame)
    return kept


def drop_tracebacks(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


def _short_repr():
    short = reprlib.Repr()
    short.maxlevel = 8
    short.maxlist = short.maxtuple = short.maxset = short.maxfrozenset = 1000
    short.maxdeque = short.maxarray = 1000
    short.maxdict = 500
    short.maxstring = short.maxlong = short.maxother = 10 ** 6
    return short


_SHORT_REPR = _short_repr()
_BUILTIN_CONTAINERS = (list, tuple, dict, set, frozenset, str, bytes)


REPR_FAILED = "<repr failed: "


def safe_repr(value, limit):
    """``repr(value)`` cut to ``limit`` characters (head and tail); never raises.

    Large builtin containers are abbreviated while they are rendered, so a list
    of ten million items does not build a huge string first.
    """
    render = repr
    if type(value) in _BUILTIN_CONTAINERS and limit is not None and len(value) > limit // 2:
        render = _SHORT_REPR.repr
    text, exc = call_user(render, value)
    if exc is not None:
        text = f"{REPR_FAILED}{_plain_text(type(exc).__name__, '?')}>"
        drop_tracebacks(exc)
    text = _plain_text(text, "<repr returned something other than a str>")
    return truncate(text, limit)


def truncate(text, limit):
    """Keep the head and tail of ``text`` within ``limit`` characters, marking the cut."""
    if limit is None or len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}[... {omitted} characters omitted ...]{text[len(text) - half:]}"
