"""Functions and classes met inside foreign ``__deepcopy__`` methods.

An object with its own ``__deepcopy__`` (a pydantic model, an ``xml`` element, a
user class) copies its contents with ``copy.deepcopy``, which treats functions,
classes, weak references and bound builtin methods as atomic: a function held
inside would keep reading the globals of the state that defined it. While the
copier calls such a method, this thread's ``copy.deepcopy`` hands those types
to the copier instead. The patch is installed once; in every other thread, and
in this one outside that call, it behaves exactly like the original.
"""

import abc
import contextlib
import copy
import threading
import types
import weakref

_state = threading.local()
_install_lock = threading.Lock()
_TYPES = (types.FunctionType, type, abc.ABCMeta, weakref.ref, types.BuiltinMethodType)
_original = {}


def _dispatch(original):
    def deepcopy_through_copier(x, memo):
        copier = getattr(_state, "copier", None)
        if copier is None:
            return original(x, memo)
        return copier.copy(x)

    return deepcopy_through_copier


@contextlib.contextmanager
def active(copier):
    """Route this thread's ``copy.deepcopy`` of the types above to ``copier``."""
    _install()
    outer, _state.copier = getattr(_state, "copier", None), copier
    try:
        yield
    finally:
        _state.copier = outer


def _install():
    if _original:
        return
    with _install_lock:
        if _original:
            return
        for cls in _TYPES:
            original = copy._deepcopy_dispatch.get(cls, _atomic)
            _original[cls] = original
            copy._deepcopy_dispatch[cls] = _dispatch(original)


def _atomic(x, memo):
    return x
