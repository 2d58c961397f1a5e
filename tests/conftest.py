import threading
import time

import pytest
import webtest

import helpers

from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.storage import TOUCHED, WHOLE
from snapshot_kernel.main import create_app

TOKEN = "test-token"


@pytest.fixture(params=[TOUCHED, WHOLE])
def kernel(request):
    """A kernel in each copy mode: what a cell's code may touch copied in, with every
    numpy buffer copy-on-write (the default, with the threshold at 0 so small test
    arrays take that path), or the whole state copied in, buffers copied as well."""
    if request.param == TOUCHED:
        return SnapshotKernel(copy_mode=TOUCHED, copy_on_write=0)
    return SnapshotKernel(copy_mode=WHOLE, copy_on_write=None)


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
