"""Interrupting a cell: KeyboardInterrupt raised in its thread through
``PyThreadState_SetAsyncExc``, and common blocking calls made to wait in short
slices so the exception is raised within ``SLICE`` seconds instead of when the
call returns."""

import ctypes
import queue
import threading
import time

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int


def raise_in_thread(thread_id, exc_type=KeyboardInterrupt):
    """Schedule ``exc_type`` to be raised in the thread ``thread_id``; True if it exists.

    The exception is raised at the thread's next bytecode boundary: a thread
    blocked in a C call (``time.sleep``, a lock, a socket read) sees it only when
    the call returns. It lands wherever the thread is then, so the caller must
    make sure the thread is still running the code meant to be interrupted, and
    clear it with ``clear_pending`` once that code is over.
    """
    modified = _set_async_exc(thread_id, exc_type)
    if modified > 1:  # documented as impossible; undo rather than hit other threads
        _set_async_exc(thread_id, ctypes.py_object())
        raise SystemError(f"PyThreadState_SetAsyncExc modified {modified} threads")
    return modified == 1


def clear_pending(thread_id):
    """Withdraw an exception scheduled by ``raise_in_thread`` and not yet raised."""
    _set_async_exc(thread_id, ctypes.py_object())


# -- blocking calls that wait in slices, so a pending interrupt is raised between them --

SLICE = 0.05  # seconds: the longest a patched wait stays in C without checking
_cell = threading.local()
_install_lock = threading.Lock()
_original = {}


class interruptible:
    """Context manager: the calling thread's patched waits run in slices until exit."""

    def __enter__(self):
        _cell.active = True

    def __exit__(self, *exc_info):
        _cell.active = False


def _in_cell():
    return getattr(_cell, "active", False)


def _sleep(seconds):
    sleep = _original["sleep"]
    if not _in_cell():
        return sleep(seconds)
    end = time.monotonic() + seconds
    sleep(min(seconds, SLICE))  # the original's own checks: TypeError, ValueError
    remaining = end - time.monotonic()
    while remaining > 0:
        sleep(min(remaining, SLICE))
        remaining = end - time.monotonic()
    return None


def _event_wait(self, timeout=None):
    wait = _original["Event.wait"]
    if not _in_cell():
        return wait(self, timeout)
    return _until(lambda step: wait(self, step), timeout)


def _thread_join(self, timeout=None):
    join = _original["Thread.join"]
    if not _in_cell():
        return join(self, timeout)
    _until(lambda step: (join(self, step), not self.is_alive())[1], timeout)
    return None


def _queue_get(self, block=True, timeout=None):
    get = _original["Queue.get"]
    if not _in_cell() or not block:
        return get(self, block, timeout)
    return _until_no(queue.Empty, lambda step: get(self, True, step), timeout)


def _queue_put(self, item, block=True, timeout=None):
    put = _original["Queue.put"]
    if not _in_cell() or not block:
        return put(self, item, block, timeout)
    return _until_no(queue.Full, lambda step: put(self, item, True, step), timeout)


def _until(attempt, timeout):
    """Call ``attempt(step)`` in slices until it returns true or ``timeout`` passes."""
    end = None if timeout is None else time.monotonic() + max(timeout, 0)
    while True:
        step = SLICE if end is None else min(SLICE, max(end - time.monotonic(), 0))
        if attempt(step):
            return True
        if end is not None and time.monotonic() >= end:
            return False


def _until_no(error, attempt, timeout):
    """Call ``attempt(step)`` in slices until it does not raise ``error`` in time."""
    if timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        step = SLICE if end is None else min(SLICE, max(end - time.monotonic(), 0))
        try:
            return attempt(step)
        except error:
            if end is not None and time.monotonic() >= end:
                raise


_PATCHES = {
    "sleep": (time, "sleep", _sleep),
    "Event.wait": (threading.Event, "wait", _event_wait),
    "Thread.join": (threading.Thread, "join", _thread_join),
    "Queue.get": (queue.Queue, "get", _queue_get),
    "Queue.put": (queue.Queue, "put", _queue_put),
}


def install():
    """Patch the waits in ``_PATCHES`` once; threads outside cells get the originals."""
    with _install_lock:
        for key, (owner, attribute, patched) in _PATCHES.items():
            if key not in _original:
                _original[key] = getattr(owner, attribute)
                patched.__doc__ = _original[key].__doc__
                setattr(owner, attribute, patched)
