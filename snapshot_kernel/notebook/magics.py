"""Notebook syntax in cells: ``!cmd``, ``x = !cmd``, ``%pip``, ``%time``, ``%timeit``,
their ``%%`` cell forms, and ``%matplotlib inline``.

``transform`` turns a cell into plain Python with one output line per input
line, so tracebacks point at the right lines. It uses IPython's input
transformer when IPython can be imported and a small translator of its own
otherwise. Both emit the calls IPython emits (``get_ipython().system(cmd)``,
``.getoutput``, ``.run_line_magic``, ``.run_cell_magic``), and ``SHELL``, which
cells reach as the builtin ``get_ipython()``, runs them in the calling cell's
namespace. ``%%`` cells are translated here on both paths, because IPython
folds a whole cell onto one line. ``commands`` runs shell commands and
``timing`` does ``%time`` and ``%timeit``.
"""

import functools
import importlib
import re
import shlex
import sys
import tokenize

from ..sandbox import refusals
from . import commands, timing

SUPPORTED = "!cmd, x = !cmd, %pip, %time, %%time, %timeit, %%timeit, %matplotlib inline"
PIP_NOTE = ("Note: %pip installs into the server's Python environment, which every state "
            "shares; a module already imported keeps its old version until the server restarts.")

_NOTEBOOK_LINE = r"[ \t]*(?:[!%]|[\w.,() \t]+=[ \t]*[!%])"  # `!ls`, `%time f()`, `x = !ls`
_MAYBE_NOTEBOOK = re.compile("^" + _NOTEBOOK_LINE, re.MULTILINE)
_NOTEBOOK_START = re.compile(_NOTEBOOK_LINE)
_ASSIGNMENT = re.compile(r"([\w.,() \t]+?)[ \t]*=[ \t]*(?=[!%])")
_CODE_TOKEN = re.compile(r"""'''|\"\"\"|['"#()\[\]{}]|\\$""")
_STRING_TOKEN = re.compile(r"""\\.|\\$|'''|\"\"\"|['"]""")
_VARIABLE = re.compile(r"\$\$|\$(\w+)|\{(\w+)\}")
_PIP_COMMAND = re.compile(r"pip3?(?:\s+|$)")
_TIMEIT_OPTION = re.compile(r"\s*-([nr])\s*(\d+)")
_IPYTHON_ONLY_OPTION = re.compile(r"\s*-(?:[qotc]|p\s*\d+)(?:\s|$)")


class UsageError(Exception):
    """Notebook syntax that cells do not support; the message says what they do."""


def _unsupported(syntax):
    return UsageError(f"{syntax} is not supported in snapshot-kernel cells. "
                      f"Supported: {SUPPORTED}")


# -- translation --

def transform(code, ipython=True):
    """``code`` with notebook syntax turned into calls on ``get_ipython()``, one
    line per line; ``code`` itself if it has none. ``ipython=False`` forces the
    own translator."""
    if not _MAYBE_NOTEBOOK.search(code):  # the cheap test every cell pays
        return code
    lines = code.split("\n")
    first = next(index for index, line in enumerate(lines) if line.strip())
    if lines[first].lstrip().startswith("%%"):
        return _cell_magic(lines, first)
    starts = _notebook_lines(lines)
    if not starts:  # the matches were inside strings, brackets or continuations
        return code
    translated = _ipython_translation(lines) if ipython else None
    return translated if translated is not None else _translation(lines, starts)


def _cell_magic(lines, first):
    """One ``run_cell_magic`` call on the ``%%`` line; the body's lines stay, empty."""
    name, args = re.match(r"\s*%%(\S*)\s*(.*)", lines[first]).groups()
    body = "\n".join(lines[first + 1:])
    call = f"get_ipython().run_cell_magic({name!r}, {args.rstrip()!r}, {body!r})"
    return "\n".join(lines[:first] + [call] + [""] * (len(lines) - first - 1))


def _notebook_lines(lines):
    """Indices of the lines that start a statement with notebook syntax: not
    inside a string, brackets, or a backslash continuation."""
    found, quote, depth, continued, in_command = [], None, 0, False, False
    for index, line in enumerate(lines):
        if in_command:  # a backslash joined this line to a `!` or `%` line: not Python
            in_command = line.rstrip().endswith("\\")
        elif quote is None and depth == 0 and not continued and _NOTEBOOK_START.match(line):
            found.append(index)
            in_command = line.rstrip().endswith("\\")
        else:
            quote, depth, continued = _scan(line.rstrip("\r"), quote, depth)
    return found


def _scan(line, quote, depth):
    """The lexer state after one line of Python: ``(open quote, bracket depth, continued)``."""
    position = 0
    while True:
        match = (_STRING_TOKEN if quote else _CODE_TOKEN).search(line, position)
        if match is None:
            break
        token, position = match.group(), match.end()
        if token == "\\":  # a backslash ending the line
            return quote, depth, True
        if quote:
            quote = None if token == quote else quote
        elif token == "#":
            break
        elif token in ("(", "[", "{"):
            depth += 1
        elif token in (")", "]", "}"):
            depth = max(depth - 1, 0)
        else:
            quote = token
    return (None if quote in ("'", '"') else quote), depth, False


@functools.lru_cache(maxsize=None)
def _ipython_manager_class():
    limit = sys.getrecursionlimit()
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # IPython is optional: the own translator does the same job
        return None
    finally:  # IPython imports jedi, which raises it for the whole process: not ours to
        sys.setrecursionlimit(limit)  # change, and no state's either
    return TransformerManager


def _ipython_translation(lines):
    """IPython's translation, or None if IPython is missing, refused the cell, or
    changed the line count."""
    manager_class = _ipython_manager_class()
    if manager_class is None:
        return None
    lead = next(index for index, line in enumerate(lines) if line.strip())
    try:  # IPython drops leading blank lines, so they are put back
        translated = "\n" * lead + manager_class().transform_cell("\n".join(lines[lead:]))
    except (SyntaxError, tokenize.TokenError):  # compile() will say so at the cell's line
        return None
    # IPython joins backslash continuations, which would shift the lines below.
    same = len(translated.rstrip().split("\n")) == len("\n".join(lines).rstrip().split("\n"))
    return translated if same else None


def _translation(lines, starts):
    """The own translator: a call for each notebook line; lines a backslash joined
    to it become empty, so the line count holds."""
    lines = list(lines)
    for index in starts:
        text, end = lines[index].rstrip("\r"), index
        while text.rstrip().endswith("\\") and end + 1 < len(lines):
            end += 1
            text = text.rstrip()[:-1] + " " + lines[end].strip()
            lines[end] = ""
        lines[index] = _line_call(text)
    return "\n".join(lines)


def _line_call(text):
    """The Python call for one line of notebook syntax, as IPython writes it."""
    indent, body, target = text[:len(text) - len(text.lstrip())], text.strip(), ""
    assignment = _ASSIGNMENT.match(body)
    if assignment:
        target, body = assignment.group(1).strip() + " = ", body[assignment.end():]
    if body.startswith("!"):
        method = "getoutput" if target or body.startswith("!!") else "system"
        call = f"{method}({body.lstrip('!').strip()!r})"
    elif body.endswith("?"):  # IPython's help syntax, which the shell refuses
        call = f"run_line_magic('pinfo', {body.rstrip('?')!r})"
    else:
        name, args = re.match(r"%(\S*)\s*(.*)", body).groups()
        call = f"run_line_magic({name!r}, {args!r})"
    return f"{indent}{target}get_ipython().{call}"


# -- the runtime --

class Shell:
    """What ``get_ipython()`` returns in cells: it runs the calls ``transform`` emits
    in the namespace of the code that calls it."""

    def system(self, command):
        """``!command``: run it in a shell; its output is the cell's output."""
        frame = sys._getframe(1)
        command = _expand(command, frame)
        if _PIP_COMMAND.match(command):  # `!pip` means this server's pip, as `%pip` does
            _pip(_PIP_COMMAND.sub("", command, count=1), frame)
        elif refusals.ACTIVE is None:
            frame.f_globals["_exit_code"] = commands.run(command, _to_stdout, _to_stderr)
        else:  # a command the sandbox refused says so its own way: the note says why
            refused = []
            status = commands.run(command, _watching(_to_stdout, refused),
                                  _watching(_to_stderr, refused))
            frame.f_globals["_exit_code"] = status
            if status != 0 and refused:
                _to_stderr(refusals.shell_note())

    def getoutput(self, command):
        """``x = !command``: its stdout and stderr, as a list of lines."""
        frame, chunks = sys._getframe(1), []
        command = _expand(command, frame)
        frame.f_globals["_exit_code"] = commands.run(command, chunks.append, None)
        return "".join(chunks).splitlines()

    def run_line_magic(self, name, line):
        """``%name line``."""
        frame = sys._getframe(1)
        if name in ("pinfo", "pinfo2"):
            raise _unsupported(f"{line}? (IPython's help: call help() on an object)")
        if name.startswith("%") and name[1:] in _CELL_MAGICS:
            raise UsageError(f"%{name} must be the first line of the cell")
        if name not in _LINE_MAGICS:
            raise _unsupported(f"%{name}")
        return _LINE_MAGICS[name](line, frame)

    def run_cell_magic(self, name, line, cell):
        """``%%name line`` followed by the lines of ``cell``."""
        if name not in _CELL_MAGICS:
            raise _unsupported(f"%%{name}")
        return _CELL_MAGICS[name](line, cell, sys._getframe(1))

    def show_usage(self):
        """A lone ``?``."""
        raise _unsupported("? (IPython's help)")


SHELL = Shell()


def get_ipython():
    """The shell that runs notebook syntax, as IPython's ``get_ipython()`` is."""
    return SHELL


CELL_BUILTINS = {"get_ipython": get_ipython}


def _to_stdout(text):
    sys.stdout.write(text)  # looked up at each write: the kernel captures per thread


def _to_stderr(text):
    sys.stderr.write(text)


def _watching(sink, refused):
    """``sink``, noting in ``refused`` whether what passes says something was refused."""
    def write(text):
        if not refused and refusals.says_refused(text):
            refused.append(True)
        sink(text)
    return write


def _expand(command, frame):
    """IPython's ``$name`` and ``{name}``: a variable of the caller, else left for
    the shell (``$HOME``); ``$$`` is a ``$``."""
    def value(match):
        if match.group() == "$$":
            return "$"
        name = match.group(1) or match.group(2)
        for namespace in (frame.f_locals, frame.f_globals):
            if name in namespace:
                return str(namespace[name])
        return match.group()
    return _VARIABLE.sub(value, command)


def _pip(args, frame):
    """``%pip args``: this server's pip, whatever ``pip`` the PATH holds."""
    command = f"{shlex.quote(sys.executable)} -m pip {args}"
    refused = []
    status = frame.f_globals["_exit_code"] = commands.run(
        command, _watching(_to_stdout, refused), _watching(_to_stderr, refused))
    importlib.invalidate_caches()  # so what was just installed can be imported at once
    subcommand = (args.split() or [""])[0]
    if refusals.ACTIVE is not None:  # the sandbox's package directory, not the server's own
        notes = refusals.pip_notes(subcommand, status, bool(refused))
        for text, write in zip(notes, (_to_stdout, _to_stderr)):
            if text:
                write(text)
    elif subcommand in ("install", "uninstall"):
        print(PIP_NOTE)


def _pip_line(line, frame):
    _pip(_expand(line, frame), frame)


def _matplotlib(line, frame):
    if line.strip() not in ("", "inline"):
        raise UsageError(f"%matplotlib {line.strip()} is not supported: the server has no "
                         "display. %matplotlib inline is, and changes nothing.")


def _time(line, frame):
    return timing.time_run(line, frame, frame.f_lineno)


def _time_cell(line, cell, frame):
    if line.strip():
        raise UsageError("%%time takes no arguments: the code goes on the lines below it")
    return timing.time_run(transform(cell), frame, frame.f_lineno + 1)


def _timeit(line, frame):
    loops, repeat, statement = _timeit_options(line)
    if not statement:
        raise UsageError("%timeit needs a statement: %timeit f(x)")
    timing.time_it(statement, "pass", frame, (frame.f_lineno,) * 2, loops, repeat)


def _timeit_cell(line, cell, frame):
    loops, repeat, setup = _timeit_options(line)
    lines = (frame.f_lineno, frame.f_lineno + 1)
    timing.time_it(transform(cell), setup or "pass", frame, lines, loops, repeat)


def _timeit_options(line):
    """``(loops, runs, rest)`` from ``-n LOOPS -r RUNS rest``; None where not given."""
    options = {}
    match = _TIMEIT_OPTION.match(line)
    while match:
        options[match.group(1)] = int(match.group(2))
        line = line[match.end():]
        match = _TIMEIT_OPTION.match(line)
    if _IPYTHON_ONLY_OPTION.match(line):
        raise UsageError("%timeit supports -n LOOPS and -r RUNS, and no other option")
    if 0 in options.values():
        raise UsageError("%timeit needs at least one loop and one run")
    return options.get("n"), options.get("r"), line.strip()


_LINE_MAGICS = {"time": _time, "timeit": _timeit, "pip": _pip_line, "matplotlib": _matplotlib}
_CELL_MAGICS = {"time": _time_cell, "timeit": _timeit_cell}
