"""Nothing a stored value or a cell's exception does can break the kernel (issue 11).

Kernel-level: describing hostile values, exceptions the traceback module cannot
format, replies at shutdown, memory released with states, and cells compiled
concurrently. The HTTP and socket side is in test_hostile.py.
"""

import gc
import linecache
import re
import threading
import time
import weakref

import pytest

import helpers
from helpers import WAIT, in_background, ok, printed, wait_until_running
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.threads import CellThreads

HOSTILE_VALUES = {
    "metaclass whose __name__ raises": (
        "class Meta(type):\n    @property\n    def __name__(cls):\n        raise ValueError('no')\n"
        "class C(metaclass=Meta):\n    pass\nvalue = C()", "<type name failed>"),
    "repr returning a str subclass whose __len__ raises": (
        "class S(str):\n    def __len__(self):\n        raise ValueError('no')\n"
        "class C:\n    def __repr__(self):\n        return S('fine')\nvalue = C()", "C"),
    "repr raising SystemExit": (
        "class C:\n    def __repr__(self):\n        raise SystemExit(0)\nvalue = C()", "C"),
    "repr raising KeyboardInterrupt": (
        "class C:\n    def __repr__(self):\n        raise KeyboardInterrupt\nvalue = C()", "C"),
    "repr returning bytes": (
        "class C:\n    def __repr__(self):\n        return b'x'\nvalue = C()", "C"),
}


@pytest.mark.parametrize("code, type_name", HOSTILE_VALUES.values(), ids=HOSTILE_VALUES.keys())
def test_describing_a_hostile_value_reports_it_and_breaks_nothing(kernel, code, type_name):
    state = ok(kernel, code)["state_name"]
    described = kernel.describe(state)["variables"]["value"]
    assert described["type"] == type_name
    assert isinstance(described["repr"], str) and type(described["repr"]) is str
    assert printed(kernel, "print('still here')", state) == "still here\n"


def test_a_repr_reads_the_globals_of_its_state(kernel):
    state = ok(kernel, "LABEL = 'mine'\nclass C:\n    def __repr__(self):\n        return LABEL\n"
                       "value = C()")["state_name"]
    assert kernel.describe(state)["variables"]["value"]["repr"] == "mine"


UNFORMATTABLE = {
    "SyntaxError with a bad line number": 'raise SyntaxError("bad", ("<x>", 1, "2", "text"))',
    "__str__ raising": "class E(Exception):\n    def __str__(self):\n        raise ValueError\nraise E()",
    "str subclass message": ("class S(str):\n    def __len__(self):\n        raise ValueError\n"
                             "raise ValueError(S('odd'))"),
}


@pytest.mark.parametrize("code", UNFORMATTABLE.values(), ids=UNFORMATTABLE.keys())
def test_any_exception_gives_an_error_reply_at_once(code):
    kernel = SnapshotKernel(timeout=None)
    reply = kernel.execute(code, "initial")
    assert reply["error"] is not None and reply["state_name"] is None
    assert all(type(line) is str for line in reply["error"]["traceback"])
    assert kernel.executions() == []


def test_a_cell_interrupted_by_shutdown_says_so(kernel, signal_name):
    reply = in_background(kernel, f"import helpers\nhelpers.{signal_name}.wait({WAIT})",
                          exec_id="long")
    wait_until_running(kernel, "long")
    kernel.close()
    assert reply()["error"]["ename"] == "KernelShutdown"


def cell_sources():
    return {name for name in linecache.cache if name.startswith("<cell-")}


def cells_in(reply):
    """The cell file names a failed reply's traceback passes through, innermost last."""
    return re.findall(r'File "(<cell-\d+>)"', "".join(reply["error"]["traceback"]))


def test_cell_sources_go_with_the_last_code_made_from_them():
    """Named from the tracebacks, not by counting ``linecache``: cells of other kernels
    (threads earlier tests left running) may come and go meanwhile."""
    kernel = SnapshotKernel()
    state = ok(kernel, "def f():\n    return 1 / 0\nx = 1")["state_name"]
    child = ok(kernel, "y = x + 1", state)["state_name"]
    failed = cells_in(kernel.execute("1 / 0", state))
    reply = kernel.execute("f()", child)
    assert 'return 1 / 0' in "".join(reply["error"]["traceback"])  # f's source is still there
    calling, defining = cells_in(reply)
    gc.collect()
    assert defining in cell_sources()  # f lives on in the states
    assert not {calling, *failed} & cell_sources()  # the failed cells made no code that lives
    kernel.delete(child)
    kernel.delete(state)
    gc.collect()
    assert defining not in cell_sources()


def test_a_reset_releases_every_cell_source():
    kernel = SnapshotKernel()
    gc.collect()
    before = cell_sources()
    state = "initial"
    for i in range(20):
        state = ok(kernel, f"def f{i}():\n    return {i}", state)["state_name"]
    kernel.reset()
    gc.collect()
    assert cell_sources() - before == set()


def test_multi_line_cells_compiled_at_once_all_run(kernel):
    body = "\n".join(f"def f{i}(x):\n    return [x * k for k in range({i})]" for i in range(40))
    code = body + "\nprint(sum(len(f39(1)) for _ in range(3)))"
    failures, threads = [], []

    def run():
        for _ in range(10):
            reply = kernel.execute(code, "initial")
            if reply["error"] is not None:
                failures.append(reply["error"]["evalue"])

    for _ in range(6):
        threads.append(threading.Thread(target=run))
        threads[-1].start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert failures == []


def test_a_repr_that_never_returns_does_not_hold_the_description(kernel, signal_name):
    state = ok(kernel, f"import helpers\nother = 1\nclass Slow:\n    def __repr__(self):\n"
                       f"        helpers.{signal_name}.wait({WAIT})\n        return 'slow'\n"
                       "value = Slow()")["state_name"]
    kernel.describe_budget = 0.3
    started = time.monotonic()
    try:
        variables = kernel.describe(state)["variables"]
    finally:
        getattr(helpers, signal_name).set()
    assert time.monotonic() - started < 2
    assert variables["value"]["repr"] == "<repr did not finish within 0.3 s>"
    assert variables["other"]["repr"] == "1"


def test_a_kernel_nobody_holds_is_freed_and_its_supervisor_ends():
    def supervisors():
        return [thread for thread in threading.enumerate()
                if thread.name == "snapshot-kernel supervisor"]

    before = set(supervisors())
    kernel = SnapshotKernel()
    ok(kernel, "x = list(range(10))")
    ours = set(supervisors()) - before
    assert len(ours) == 1  # it stays after the cell, for the next one
    gone = weakref.ref(kernel)
    del kernel
    deadline = time.monotonic() + WAIT
    while gone() is not None or any(thread.is_alive() for thread in ours):
        assert time.monotonic() < deadline, "the supervisor kept its kernel, or ran on"
        gc.collect()
        time.sleep(0.02)


def test_idle_cell_threads_end_and_a_later_cell_still_runs():
    threads = CellThreads(idle_end=0.2)
    ran = []
    for number in range(3):
        threads.submit(lambda number=number: ran.append(number), f"test-idle-{number}")
    deadline = time.monotonic() + WAIT
    while any(thread.name.startswith("test-idle-") for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "idle cell threads did not end"
        time.sleep(0.05)
    done = threading.Event()
    threads.submit(done.set, "test-idle-later")
    assert done.wait(WAIT) and sorted(ran) == [0, 1, 2]
