import sys
import threading
import time

import pytest
import webtest

import helpers

from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.runtime import settings
from snapshot_kernel.states.working import TOUCHED, WHOLE
from snapshot_kernel.main import create_app

TOKEN = "test-token"


@pytest.fixture(autouse=True)
def process_settings():
    """Each test starts with the process-wide settings as pytest had them: cells leave
    those (a module attribute, the recursion limit) as their state has them until the
    next cell."""
    before, thread = settings.process_values(), settings.initial()
    yield
    settings.put_back(before)
    thread.enter_thread()


@pytest.fixture(params=[TOUCHED, WHOLE])
def kernel(request):
    """A kernel in each copy mode: what a cell's code may touch copied in, with every
    numpy buffer copy-on-write (the default, with the threshold at 0 so small test
    arrays take that path), or the whole state copied in, buffers copied as well."""
    if request.param == TOUCHED:
        made = SnapshotKernel(copy_mode=TOUCHED, copy_on_write=0)
    else:
        made = SnapshotKernel(copy_mode=WHOLE, copy_on_write=None)
    yield made
    # Its threads and states go with the test: left behind, 359 threads and 437,000 objects
    # made a full collection of the process take 0.3 s late in the suite (3.9), long
    # enough to stop a cell with a short timeout before its first line. (A cell a test
    # left stuck is left behind, as shutdown leaves it.)
    made.shutdown(grace=0)


@pytest.fixture
def anonymous(kernel):
    """A WebTest client that presents no token."""
    return webtest.TestApp(create_app(kernel, TOKEN))


@pytest.fixture
def app(anonymous):
    """A WebTest client that presents the token as a Bearer header."""
    anonymous.authorization = ("Bearer", TOKEN)
    return anonymous


@pytest.fixture
def signal_name():
    """A fresh threading.Event, reachable from cells as helpers.<name>."""
    name = f"event_{time.monotonic_ns()}"
    setattr(helpers, name, threading.Event())
    yield name
    delattr(helpers, name)


def pytest_terminal_summary(terminalreporter):
    """The corpus test's tally: what it harvested, compared, left out and excluded, and why."""
    corpus = sys.modules.get("corpus")  # imported only if test_corpus.py was collected
    if corpus is None or not corpus.TALLY:
        return
    terminalreporter.section("docstring corpus")
    for what, count in sorted(corpus.TALLY.items()):
        terminalreporter.write_line(f"{count:8d}  {what}")
