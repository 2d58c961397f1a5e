"""Notebook syntax: the translation to plain Python, and what translated cells
do and print when they run (with exec, in a plain namespace)."""

import builtins
import gc
import os
import re
import subprocess
import sys
import threading
import time
import traceback
import warnings

import pytest

from snapshot_kernel import cell
from snapshot_kernel.notebook import commands, magics, timing
from snapshot_kernel.runtime import interrupt

CELL = "<cell-1>"
TIMES = re.compile(r"CPU times: user \S+ \S+, sys: \S+ \S+, total: \S+ \S+\nWall time: \S+ \S+\n")
# IPython warns first when one run took over 4x the fastest: under a loaded machine that is real.
SLOWEST = r"The slowest run took \S+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n"
TIMEIT = "(?:" + SLOWEST + ")?" + r"\S+ [mμn]?s ± \S+ [mμn]?s per loop \(mean ± std\. dev\. of {runs}, {loops} each\)\n"


@pytest.fixture(params=[False, True], ids=["own translator", "IPython"])
def ipython(request):
    """Which translator ``transform`` uses; the IPython one only where it is installed."""
    if request.param:
        pytest.importorskip("IPython.core.inputtransformer2")
    return request.param


@pytest.fixture
def namespace():
    """A cell's globals, with ``get_ipython`` among its builtins as the kernel gives it."""
    return {"__name__": "__main__", "__builtins__": {**vars(builtins), **magics.CELL_BUILTINS}}


def run_cell(code, namespace, ipython=False):
    """Run ``code`` as the kernel will: translated, compiled, its last value returned."""
    body, last, _ = cell._compile(magics.transform(code, ipython=ipython), CELL)
    cell.Source.keep(CELL, code, (body, last))
    return cell.run_code(body, last, namespace)


def cell_line(exc):
    """The line number of the innermost traceback entry in the cell."""
    return [frame for frame in traceback.extract_tb(exc.__traceback__)
            if frame.filename == CELL][-1].lineno


# -- translation --

UNCHANGED = [
    "x = 1\nprint(x)",
    "print('%d items' % 3)\nx != y",
    "y = (a\n     % b)",
    "x = 1 + \\\n  %2",
    's = """\n!not a command\n%not a magic\n"""',
    "s = '''one\n!two'''",
    "items = [1,\n!2]",
    "# !a comment",
    "x %= 3",
]


@pytest.mark.parametrize("code", UNCHANGED)
def test_python_is_left_alone(code, ipython):
    assert magics.transform(code, ipython=ipython) is code


TRANSLATIONS = {
    "!ls -l": "get_ipython().system('ls -l')",
    "x = !ls": "x = get_ipython().getoutput('ls')",
    "!!ls": "get_ipython().getoutput('ls')",
    "%time f()": "get_ipython().run_line_magic('time', 'f()')",
    "%timeit -n 3 f()": "get_ipython().run_line_magic('timeit', '-n 3 f()')",
    "a, b = %time f()": "a, b = get_ipython().run_line_magic('time', 'f()')",
    "if ok:\n    !echo a\n    %time x": ("if ok:\n    get_ipython().system('echo a')\n"
                                         "    get_ipython().run_line_magic('time', 'x')"),
    "\n\n!ls": "\n\nget_ipython().system('ls')",
    "s = '''\n!kept\n'''\n!ls": "s = '''\n!kept\n'''\nget_ipython().system('ls')",
    "!echo a \\\n  b\nx = 1": "get_ipython().system('echo a  b')\n\nx = 1",
    "%time?": "get_ipython().run_line_magic('pinfo', '%time')",
    "!ls\n\tif x:\n  y": "get_ipython().system('ls')\n\tif x:\n  y",  # broken: compile() says so
    "x = 1\n%%time": "x = 1\nget_ipython().run_line_magic('%time', '')",
    "%%time\nx = 1\nx": "get_ipython().run_cell_magic('time', '', 'x = 1\\nx')\n\n",
    "\n%%timeit -n 2 s = 1\n!ls": "\nget_ipython().run_cell_magic('timeit', '-n 2 s = 1', '!ls')\n",
}


@pytest.mark.parametrize("code, expected", TRANSLATIONS.items(), ids=list(TRANSLATIONS))
def test_translation_keeps_one_line_per_line(code, expected, ipython):
    translated = magics.transform(code, ipython=ipython)
    if len(translated.split("\n")) == len(code.split("\n")) + 1 and translated.endswith("\n"):
        translated = translated[:-1]  # IPython ends its translation with a newline: no new line
    assert translated == expected
    assert len(translated.split("\n")) == len(code.split("\n"))


# -- shell commands --

def test_shell_output_is_the_cells_output(namespace, ipython, capsys):
    assert run_cell("!echo hello; echo oops >&2", namespace, ipython) is None
    assert capsys.readouterr() == ("hello\n", "oops\n")
    assert namespace["_exit_code"] == 0
    assert "get_ipython" not in namespace


# `$$` is a `$` for the shell, as in IPython: the second command kills its own shell.
@pytest.mark.parametrize("command, status", [("exit 3", 3), ("kill -9 $$$$", -9)])
def test_exit_status_is_kept_not_raised(command, status, namespace):
    run_cell(f"!{command}", namespace)
    assert namespace["_exit_code"] == status


def test_captured_output_is_a_list_of_lines(namespace, ipython):
    run_cell("x = !printf 'a\\nb\\n'; echo err >&2", namespace, ipython)
    assert namespace["x"] == ["a", "b", "err"]
    assert run_cell("!!echo hi", namespace, ipython) == ["hi"]


def test_variables_are_expanded_in_commands(namespace, capsys):
    run_cell("name = 'world'\n!echo $name {name} {missing} $$", namespace)
    assert capsys.readouterr().out == "world world {missing} $\n"


def test_output_is_passed_on_as_it_comes():
    arrivals = []
    started = time.monotonic()
    commands.run("echo first; sleep 0.5; echo second", arrivals.append, None)
    finished = time.monotonic()
    assert "".join(arrivals) == "first\nsecond\n"
    assert arrivals[0] == "first\n"
    assert finished - started > 0.4


def test_background_commands_are_not_waited_for():
    output, started = [], time.monotonic()
    assert commands.run("sleep 5 & echo started", output.append, None) == 0
    # Under the 5 s of the sleep, with room for a loaded CI machine.
    assert output == ["started\n"] and time.monotonic() - started < 4


def _written(path):
    return path.exists() and path.read_text().endswith("\n")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_an_interrupt_kills_the_command_and_its_children(namespace, tmp_path):
    namespace["pidfile"] = str(tmp_path / "pid")
    outcome = []

    def target():
        try:
            run_cell("!sleep 30 & echo $! > {pidfile}; wait", namespace)
        except KeyboardInterrupt:
            outcome.append("interrupted")

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + 10
    while not _written(tmp_path / "pid"):
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.01)
    pid = int((tmp_path / "pid").read_text())
    interrupted = time.monotonic()
    assert interrupt.raise_in_thread(thread.ident)
    thread.join(5)
    assert not thread.is_alive() and outcome == ["interrupted"]
    assert time.monotonic() - interrupted < 10  # not the 30 s of the command
    killed = time.monotonic() + 5  # SIGKILL is sent; a loaded machine may take a moment
    while _alive(pid):
        assert time.monotonic() < killed, "the command's child outlived the interrupt"
        time.sleep(0.01)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize("started", [False, True], ids=["before the fork", "after the fork"])
def test_an_interrupt_as_the_command_starts_leaves_nothing_running(started, monkeypatch):
    # CI found it: an interrupt landed in Popen after the fork, before it returned, and
    # the command ran on. Here the KeyboardInterrupt is raised at that moment.
    shells = []
    start = subprocess.Popen._execute_child

    def interrupted(process, *args):
        if started:
            start(process, *args)
            shells.append(process.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "_execute_child", interrupted)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)  # a pipe left open, a child not reaped
        with pytest.raises(KeyboardInterrupt):
            commands.run("sleep 30", [].append, None)
        gc.collect()
    assert len(shells) == started
    for pid in shells:  # reaped, so not even a zombie is left
        assert not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("line", ["!pip --version", "%pip --version"])
def test_pip_is_the_servers_pip(line, namespace, capsys):
    run_cell(line, namespace)
    assert sys.prefix in capsys.readouterr().out
    assert namespace["_exit_code"] == 0


def test_pip_install_says_it_affects_every_state(namespace, capsys):
    run_cell("%pip install --no-index --no-deps snapshot-kernel-no-such-package", namespace)
    printed = capsys.readouterr()
    assert "ERROR" in printed.err
    assert printed.out.endswith(magics.PIP_NOTE + "\n")
    assert namespace["_exit_code"] == 1


# -- %time and %timeit --

def test_time_shows_an_expressions_value(namespace, ipython, capsys):
    assert run_cell("%time 6 * 7", namespace, ipython) == 42
    assert TIMES.fullmatch(capsys.readouterr().out)


def test_time_runs_statements_in_the_cell(namespace, capsys):
    assert run_cell("%time x = 5", namespace) is None
    assert namespace["x"] == 5 and TIMES.fullmatch(capsys.readouterr().out)


def test_time_cell_returns_the_last_expression(namespace, ipython, capsys):
    assert run_cell("%%time\ny = 2\nprint('body')\ny * 21", namespace, ipython) == 42
    printed = capsys.readouterr().out
    assert printed.startswith("body\n") and TIMES.fullmatch(printed[len("body\n"):])


def test_timeit_with_loops_and_runs(namespace, capsys):
    namespace["calls"] = []
    run_cell("%timeit -n 3 -r 2 calls.append(1)", namespace)
    assert len(namespace["calls"]) == 6
    assert re.fullmatch(TIMEIT.format(runs="2 runs", loops="3 loops"), capsys.readouterr().out)


def test_timeit_warns_when_one_run_was_much_slower(capsys):
    timing._report(3, [0.001, 0.005])
    printed = capsys.readouterr().out
    assert re.fullmatch(SLOWEST + r"3 ms ± 2 ms per loop \(mean ± std\. dev\. of 2 runs, 3 loops each\)\n", printed)
    timing._report(3, [0.001, 0.0011])
    assert not capsys.readouterr().out.startswith("The slowest")


def test_timeit_cell_with_setup(namespace, capsys):
    run_cell("%%timeit -n 2 -r 1 base = 10\nleaked = base * 2", namespace)
    assert re.fullmatch(TIMEIT.format(runs="1 run", loops="2 loops"), capsys.readouterr().out)
    assert "leaked" not in namespace  # as in timeit, assignments are local to the timing


def test_timeit_chooses_its_loops(namespace, capsys):
    started = time.monotonic()
    run_cell("%timeit sum(range(10))", namespace)
    assert time.monotonic() - started < 2
    assert re.fullmatch(TIMEIT.format(runs="7 runs", loops=r"[0-9,]+ loops"),
                        capsys.readouterr().out)


def test_timeit_makes_fewer_runs_of_a_slow_statement(namespace, capsys, monkeypatch):
    monkeypatch.setattr(timing, "TIMEIT_BUDGET", 0.5)
    started = time.monotonic()
    run_cell("import time\n%timeit time.sleep(0.1)", namespace)
    assert time.monotonic() - started < 2
    # The default is 7 runs; a budget of 0.5 s leaves room for 5 runs of 0.1 s at most.
    assert re.fullmatch(TIMEIT.format(runs="[1-5] runs?", loops="1 loop"), capsys.readouterr().out)


@pytest.mark.parametrize("seconds, shown", [
    (0, "0 ns"), (5e-9, "5 ns"), (2.5e-6, "2.5 μs"), (0.0164, "16.4 ms"), (0.99996, "1 s"),
    (12.345, "12.3 s"), (61.5, "1min 1s"), (3600.2, "1h"), (90061, "1d 1h 1min 1s")])
def test_times_read_as_in_ipython(seconds, shown):
    assert timing.format_time(seconds) == shown


# -- errors point at the cell's lines --

def test_errors_in_timed_code_point_into_the_cell(namespace):
    with pytest.raises(NameError) as raised:
        run_cell("%%time\n\nx = 1\nundefined_name", namespace)
    assert cell_line(raised.value) == 4
    with pytest.raises(ZeroDivisionError) as raised:
        run_cell("def f():\n    return 1 / 0\n%timeit -n 1 f()", namespace)
    assert cell_line(raised.value) == 2
    with pytest.raises(SyntaxError) as raised:
        run_cell("x = 1\n%time x +* 2", namespace)
    assert (raised.value.filename, raised.value.lineno) == (CELL, 2)


SUPPORTED = f". Supported: {magics.SUPPORTED}"
REFUSED = {
    "x = 1\n%load_ext autoreload": (2, "%load_ext is not supported in snapshot-kernel cells"
                                       + SUPPORTED),
    "%%bash\necho hi": (1, "%%bash is not supported in snapshot-kernel cells" + SUPPORTED),
    "x = 1\n%time?": (2, "%time? (IPython's help: call help() on an object) is not supported "
                         "in snapshot-kernel cells" + SUPPORTED),
    "x = 1\n%%time": (2, "%%time must be the first line of the cell"),
    "x = 1\n%matplotlib qt": (2, "%matplotlib qt is not supported: the server has no display. "
                                 "%matplotlib inline is, and changes nothing."),
    "x = 1\n%timeit -o f()": (2, "%timeit supports -n LOOPS and -r RUNS, and no other option"),
    "%timeit": (1, "%timeit needs a statement: %timeit f(x)"),
}


@pytest.mark.parametrize("code, refusal", REFUSED.items(), ids=list(REFUSED))
def test_unsupported_syntax_is_a_clear_error_on_its_line(code, refusal, namespace, ipython):
    with pytest.raises(magics.UsageError) as raised:
        run_cell(code, namespace, ipython)
    assert (cell_line(raised.value), str(raised.value)) == refusal


def test_matplotlib_inline_changes_nothing(namespace, capsys):
    assert run_cell("%matplotlib inline", namespace) is None
    assert capsys.readouterr() == ("", "")
