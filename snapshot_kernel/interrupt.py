"""Raising KeyboardInterrupt in another thread, through ``PyThreadState_SetAsyncExc``."""

import ctypes

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
