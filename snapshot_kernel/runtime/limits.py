"""Two process-wide numbers held per cell: the recursion limit and the default socket
timeout.

``sys.getrecursionlimit``/``setrecursionlimit`` and ``socket.getdefaulttimeout``/
``setdefaulttimeout`` are replaced: in a thread holding a cell's settings they read and
write the cell's value (its state's, else the server's). What each number does stays
one per process, so it is made to serve every running cell: the interpreter's
recursion limit is the highest any running cell holds (a cell that lowered its own
recurses as deep as another cell's limit allows), and a socket made in a cell's thread
gets the cell's default timeout.

A state's value is what its cells set: None where it is the server's.
"""

import socket
import sys
import threading

from .held import current

RECURSION, TIMEOUT = "recursionlimit", "socket.timeout"


class HeldNumber:
    """A number the process has one of, held per cell as kind ``name``."""

    def __init__(self, name, read, write):
        self.name, self._read, self._write = name, read, write  # the originals
        self.server = None  # the process's value outside cells, read when first needed

    def server_value(self):
        if self.server is None:
            self.server = (self._read(),)
        return self.server[0]

    def value(self, held):
        """The calling cell's value."""
        found = held.working.get(self.name)
        if found is None:
            found = held.values.get(self.name)
        return self.server_value() if found is None else found

    def get(self):
        held = current()
        return self._read() if held is None else self.value(held)

    def set(self, value):
        held = current()
        if held is None:
            self._write(value)
            self.server = (self._read(),)
        else:
            self.check(value)
            held.working[self.name] = value
            self.applied(held)

    def check(self, value):
        """Raise what the original would for a value it refuses."""

    def applied(self, held):
        """The cell's value changed: make the process serve it."""

    def leave(self, held, value):
        """The state's new value: ``value`` itself unless the cell set another."""
        now = held.working.get(self.name)
        if now is None or now == (self.server_value() if value is None else value):
            return value
        return None if now == self.server_value() else now


class _RecursionLimit(HeldNumber):
    """The interpreter's limit is the highest of the running cells' and the server's."""

    def __init__(self):
        super().__init__(RECURSION, sys.getrecursionlimit, sys.setrecursionlimit)
        self._running = {}  # id(Held) -> its limit, for cells that hold one of their own
        self._cells = set()  # id(Held) of every running cell
        self._lock = threading.Lock()

    def check(self, value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an "
                            "integer")
        if value < 1:
            raise ValueError("recursion limit must be greater or equal than 1")

    def enter(self, held, value):
        self._cells.add(id(held))  # (a set's add and discard hold the GIL: no lock)
        if value is not None:
            self.applied(held, value)

    def applied(self, held, value=None):
        with self._lock:
            self._running[id(held)] = self.value(held) if value is None else value
            self._serve(held)

    def release(self, held):
        self._cells.discard(id(held))
        if id(held) in self._running or self._lowered_later:  # (most cells: no lock)
            with self._lock:
                self._running.pop(id(held), None)
                self._serve(None)

    _lowered_later = False

    def _serve(self, caller):
        """Make the interpreter's limit the highest wanted. It is lowered only while no
        other cell runs: a thread deeper than a new, lower limit may be past it by more
        than the 50 frames CPython allows a RecursionError's handling: a fatal error
        that aborts the process (CI's 3.10 run did; 3.11 does too)."""
        wanted = max([self.server_value(), *self._running.values()])
        limit = self._read()
        others = self._cells - {id(caller)}
        if wanted < limit and others:
            self._lowered_later = True
            return
        self._lowered_later = False
        if limit != wanted:
            self._write(wanted)


class _Timeout(HeldNumber):
    def __init__(self):
        super().__init__(TIMEOUT, socket.getdefaulttimeout, socket.setdefaulttimeout)

    def check(self, value):
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as a "
                            "timeout")  # (the original's words vary: the type is the point)
        if not value >= 0:
            raise ValueError("Timeout value out of range")


RECURSION_LIMIT, SOCKET_TIMEOUT = _RecursionLimit(), _Timeout()


def _socket_init(init):
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        held = current()
        if held is not None:
            timeout = SOCKET_TIMEOUT.value(held)
            if timeout != SOCKET_TIMEOUT._read():
                self.settimeout(timeout)

    __init__._snapshot_kernel = True
    __init__.__doc__ = init.__doc__
    return __init__


def install():
    """Hold both per cell; idempotent."""
    if getattr(sys.getrecursionlimit, "_snapshot_kernel", False):
        return
    for module, getter, setter, number in (
            (sys, "getrecursionlimit", "setrecursionlimit", RECURSION_LIMIT),
            (socket, "getdefaulttimeout", "setdefaulttimeout", SOCKET_TIMEOUT)):
        get, put = _named(number.get, getattr(module, getter)), \
            _named(number.set, getattr(module, setter))
        setattr(module, getter, get)
        setattr(module, setter, put)
    socket.socket.__init__ = _socket_init(socket.socket.__init__)


def _named(method, original):
    def function(*args):
        return method(*args)

    function.__name__, function.__doc__ = original.__name__, original.__doc__
    function._snapshot_kernel = True
    return function
