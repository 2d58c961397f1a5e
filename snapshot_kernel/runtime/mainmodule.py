"""``__main__`` is the running cell's namespace, as IPython's ``DummyMod`` makes it.

pickle, copyreg and ``multiprocessing`` find a class or function by its module
and name; cell-defined ones say ``__main__``. ``install`` puts a module in
``sys.modules["__main__"]`` whose names, in a thread running a cell, are that
cell's namespace, and elsewhere the server's own ``__main__``'s. A process
forked from a cell thread keeps that thread (and so its namespace), which is
what ``multiprocessing``'s fork start method needs.
"""

import os
import sys
import threading
import types

from . import capture

_namespaces = {}  # thread id -> the namespace of the cell it runs
_installed = None
_THREAD_ATTR = "_snapshot_kernel_main"  # on threads a cell starts: its namespace


def _inherit(thread):
    namespace = _namespaces.get(threading.get_ident())
    if namespace is None:
        namespace = getattr(threading.current_thread(), _THREAD_ATTR, None)
    if namespace is not None:
        setattr(thread, _THREAD_ATTR, namespace)


class MainModule(types.ModuleType):
    """``sys.modules["__main__"]``: the running cell's namespace in a cell thread."""

    def __getattr__(self, name):
        namespace = _namespace()
        if namespace is not None:
            try:
                return namespace[name]
            except KeyError:
                raise AttributeError(f"module '__main__' has no attribute {name!r}") from None
        return getattr(self._original, name)

    def __setattr__(self, name, value):
        namespace = _namespace()
        if namespace is None:
            setattr(self._original, name, value)
        else:
            namespace[name] = value

    def __delattr__(self, name):
        namespace = _namespace()
        if namespace is None:
            delattr(self._original, name)
        else:
            del namespace[name]

    @property
    def __dict__(self):
        namespace = _namespace()
        return vars(self._original) if namespace is None else namespace


def _namespace():
    namespace = _namespaces.get(threading.get_ident())
    if namespace is None:  # a thread a cell started (a pool's task feeder, say)
        namespace = getattr(threading.current_thread(), _THREAD_ATTR, None)
    if namespace is None and len(_namespaces) == 1 and _forked_child():
        namespace = next(iter(_namespaces.values()))  # a child of the one running cell
    return namespace


_server_pid = None


def _forked_child():
    return os.getpid() != _server_pid


def install():
    """Put the ``MainModule`` in ``sys.modules`` once; idempotent."""
    global _installed, _server_pid
    if _installed is not None and sys.modules.get("__main__") is _installed:
        return
    original = sys.modules.get("__main__")
    if isinstance(original, MainModule):
        _installed = original
        return
    module = MainModule("__main__", getattr(original, "__doc__", None))
    object.__setattr__(module, "_original", original if original is not None
                       else types.ModuleType("__main__"))
    for name in ("__file__", "__spec__", "__loader__", "__package__", "__builtins__"):
        if hasattr(original, name):
            types.ModuleType.__setattr__(module, name, getattr(original, name))
    _server_pid = os.getpid()
    if _inherit not in capture.INHERITED:
        capture.INHERITED.append(_inherit)
    sys.modules["__main__"] = _installed = module


def running(namespace):
    """Make ``__main__`` the namespace ``namespace`` in this thread; returns an undo."""
    ident = threading.get_ident()
    _namespaces[ident] = namespace
    return lambda: _namespaces.pop(ident, None)
