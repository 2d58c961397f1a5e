"""Running one cell of code on a namespace, and turning what happened into
Jupyter-shaped dicts. Knows nothing of states, threads or HTTP.

The split follows ``code.InteractiveInterpreter``: compile, run, report. A
compile error and a runtime error are both the cell's error; the kernel's own
frames are dropped from tracebacks.
"""

import ast
import io
import linecache
import os
import reprlib
import tokenize
import traceback

CELL_FILENAME_PREFIX = "<cell-"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def call_user(fn, *args):
    """Call ``fn(*args)``, which runs user code; return ``(result, None)`` or ``(None, exc)``."""
    try:
        return fn(*args), None
    except BaseException as exc:  # the user-code boundary: whatever user code raises, SystemExit and
        return None, exc          # KeyboardInterrupt included, is its own error, never the server's.


def cell_filename(number):
    return f"{CELL_FILENAME_PREFIX}{number}>"


def remember_source(filename, code):
    """Let tracebacks show the cell's lines, as IPython does for its cells."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)


def forget_source(filename):
    linecache.cache.pop(filename, None)


def compile_cell(code, filename):
    """Compile ``code`` to ``(body, last_expression)``; the latter is None unless
    the cell ends in an expression whose value should be shown."""
    if "\n" not in code.strip():
        try:  # one line that is one expression: the common `df.head()` needs no AST
            return None, compile(code, filename, "eval")
        except SyntaxError:  # a statement, or a trailing `;`: the general path says which
            pass
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(code):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec") if tree.body else None
    return body, (compile(last, filename, "eval") if last is not None else None)


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
    """Execute a compiled cell in ``namespace``; return the last expression's value."""
    if body is not None:
        exec(body, namespace)
    return eval(last, namespace) if last is not None else None


def error_dict(exc):
    """``{"ename", "evalue", "traceback"}`` for ``exc``, starting at the cell's frames.

    Drops the traceback objects afterwards: they pin the cell's namespace.
    """
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _hide_kernel_frames(report)
    lines = list(report.format())
    evalue, _ = call_user(str, exc)
    drop_tracebacks(exc)
    return {"ename": type(exc).__name__,
            "evalue": evalue if evalue is not None else "<str() failed>",
            "traceback": lines}


def _hide_kernel_frames(report):
    """Remove this package's frames from ``report`` and the exceptions chained to it."""
    seen = set()
    while report is not None and id(report) not in seen:
        seen.add(id(report))
        report.stack[:] = [frame for frame in report.stack
                           if not frame.filename.startswith(_PACKAGE_DIR)]
        report = report.__cause__ or report.__context__


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


def safe_repr(value, limit):
    """``repr(value)`` cut to ``limit`` characters (head and tail); never raises.

    Large builtin containers are abbreviated while they are rendered, so a list
    of ten million items does not build a huge string first.
    """
    render = repr
    if type(value) in _BUILTIN_CONTAINERS and len(value) > limit // 2:
        render = _SHORT_REPR.repr
    text, exc = call_user(render, value)
    if exc is not None:
        text = f"<repr failed: {type(exc).__name__}>"
        drop_tracebacks(exc)
    if not isinstance(text, str):
        text = f"<repr returned {type(text).__name__}, not str>"
    return truncate(text, limit)


def truncate(text, limit):
    """Keep the head and tail of ``text`` within ``limit`` characters, marking the cut."""
    if limit is None or len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}[... {omitted} characters omitted ...]{text[len(text) - half:]}"
