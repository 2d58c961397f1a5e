"""``%time`` and ``%timeit`` for cells, with IPython's reports.

Code given as text is compiled under the calling cell's file name, its lines
numbered as they are in the cell, so tracebacks point into the cell.
"""

import ast
import gc
import itertools
import os
import time

try:
    import resource
except ImportError:  # Windows: CPU times come from os.times() instead
    resource = None

RUN_TARGET = 0.05  # seconds: %timeit grows its loop count until one run takes this long
TIMEIT_BUDGET = 2.0  # seconds: a slow statement gets fewer runs than DEFAULT_REPEAT
DEFAULT_REPEAT = 7


def format_time(seconds):
    """A duration as IPython writes it: ``16.4 ms``, ``2min 3s``."""
    if seconds >= 60:
        parts = []
        for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            count, seconds = divmod(seconds, size)
            if count >= 1:
                parts.append(f"{int(count)}{unit}")
        return " ".join(parts)
    seconds = float(f"{seconds:.3g}")  # rounded first, so 0.9996 s reads 1 s, not 1e+03 ms
    for unit, scale in (("s", 1), ("ms", 1e3), ("μs", 1e6)):
        if seconds * scale >= 1:
            return f"{seconds * scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def time_run(source, frame, first_line):
    """Run ``source`` where ``frame`` runs, print ``CPU times`` and ``Wall time``,
    and return the value of its last expression (None if it ends in a statement)."""
    body, last = _compile(source, frame, first_line)
    cpu, wall = _cpu_times(), time.perf_counter()
    try:
        if body is not None:
            exec(body, frame.f_globals, frame.f_locals)
        return eval(last, frame.f_globals, frame.f_locals) if last is not None else None
    finally:  # reported on errors and interrupts too, as IPython does
        wall = time.perf_counter() - wall
        user, system = (end - start for end, start in zip(_cpu_times(), cpu))
        print(f"CPU times: user {format_time(user)}, sys: {format_time(system)}, "
              f"total: {format_time(user + system)}\nWall time: {format_time(wall)}")


def _compile(source, frame, first_line):
    """``(body, last expression)`` code for ``source``, which starts at ``first_line``."""
    filename = frame.f_code.co_filename
    tree = ast.parse("\n" * (first_line - 1) + source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
    return (compile(tree, filename, "exec") if tree.body else None), last


def _cpu_times():
    """``(user, system)`` CPU seconds of the whole process, as IPython measures them."""
    if resource is None:
        times = os.times()
        return times.user, times.system
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def time_it(statement, setup, frame, lines, loops=None, repeat=None):
    """Time ``statement`` after ``setup`` in ``frame``'s globals, and print IPython's
    ``%timeit`` line. ``lines`` are where setup and statement start in the cell;
    loops and runs are chosen when None, so that the whole ends in about 0.2-2 s."""
    timed = _timer(statement, setup, frame, *lines)
    if loops is None:
        loops, first = _autorange(timed)
    else:
        first = _measure(timed, loops)
    if repeat is None:
        repeat = max(1, min(DEFAULT_REPEAT, int(TIMEIT_BUDGET / max(first, 1e-9))))
    runs = [first] + [_measure(timed, loops) for _ in range(repeat - 1)]
    _report(loops, [run / loops for run in runs])


def _timer(statement, setup, frame, setup_line, statement_line):
    """A function of ``(iterations, clock)`` that runs ``setup`` once, then times
    ``statement``. Like timeit's, its assignments are local to it."""
    filename = frame.f_code.co_filename
    tree = ast.parse("def _timed(_loops, _clock):\n    pass\n    _start = _clock()\n"
                     "    for _ in _loops:\n        pass\n    return _clock() - _start")
    for node in ast.walk(tree):  # the template's own lines are the magic's line
        if hasattr(node, "lineno"):
            node.lineno = node.end_lineno = setup_line
    function = tree.body[0]
    function.body[0:1] = ast.parse("\n" * (setup_line - 1) + setup, filename).body
    loop_body = ast.parse("\n" * (statement_line - 1) + statement, filename).body
    function.body[-2].body = loop_body or function.body[-2].body  # only comments: time a pass
    namespace = {}
    exec(compile(tree, filename, "exec"), frame.f_globals, namespace)
    return namespace["_timed"]


def _autorange(timed):
    """Loops 1, 2, 5, 10, 20, 50... until a run takes ``RUN_TARGET``: ``(loops, seconds)``."""
    for scale in (10 ** power for power in itertools.count()):
        for loops in (scale, 2 * scale, 5 * scale):
            seconds = _measure(timed, loops)
            if seconds >= RUN_TARGET:
                return loops, seconds


def _measure(timed, loops):
    """Seconds ``timed`` takes for ``loops`` loops, without garbage collection (as timeit)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return timed(itertools.repeat(None, loops), time.perf_counter)
    finally:
        if collecting:
            gc.enable()


def _report(loops, timings):
    mean = sum(timings) / len(timings)
    spread = (sum((timing - mean) ** 2 for timing in timings) / len(timings)) ** 0.5
    best, worst = min(timings), max(timings)
    if worst > 4 * best and best > 0 and worst > 1e-6:
        print(f"The slowest run took {worst / best:0.2f} times longer than the fastest. "
              "This could mean that an intermediate result is being cached.")
    runs = len(timings)
    print(f"{format_time(mean)} ± {format_time(spread)} per loop (mean ± std. dev. of "
          f"{runs} run{'s' * (runs != 1)}, {loops:,} loop{'s' * (loops != 1)} each)")
