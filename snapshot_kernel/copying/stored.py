"""The globals of stored functions, and reading a state's globals while copying it."""

import builtins
import threading


class StoredNamespace(dict):
    """The globals of functions in stored states. Functions whose ``__globals__``
    is one are cells' own and get rebound when copied.

    Stored states run no cells, but copying a stored object runs its own methods
    (``__reduce_ex__``, ``__getstate__``, ``__repr__``), which may read globals:
    one instance, ``STORED_GLOBALS``, serves every state, and a name missing from
    it is looked up in the state this thread is reading (``reading``)."""

    def __missing__(self, name):
        names = getattr(_reading, "names", None)
        entry = names.get(name) if names is not None else None
        if entry is None:
            raise KeyError(name)
        return entry.value


STORED_GLOBALS = StoredNamespace(__builtins__=builtins)
_reading = threading.local()


class reading:
    """Context manager: stored functions read the globals of ``names`` (a Namespace)
    in this thread until exit."""

    def __init__(self, names):
        self.names = names

    def __enter__(self):
        self.outer, _reading.names = getattr(_reading, "names", None), self.names

    def __exit__(self, *exc_info):
        _reading.names = self.outer
