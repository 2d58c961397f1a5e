"""Requests that wait on a cell: the slots that bound how many are served at once
(``--max-running``), and the wait for a reply that interrupts the cell if its client
hangs up. Nothing here imports the web framework: ``main`` passes in what it raises."""

import threading

from .. import errors
from .server import RETRY_AFTER

WAIT_SLICE = 0.25  # seconds between checks that a waiting client is still there


class Slots:
    """Requests that may wait on a cell at once; past the limit, a 503 at once, raised
    as ``refusal(503, message, **headers)`` (main's: ``bottle.HTTPError``)."""

    def __init__(self, limit, refusal):
        self.limit = limit
        self._refusal = refusal
        self._used = 0
        self._lock = threading.Lock()

    def slot(self):
        """A context manager holding a slot for its block; it gives ``release()``, which
        frees the slot sooner (it frees it once, however often it is called)."""
        with self._lock:
            if self._used >= self.limit:
                raise self._refusal(503, f"{self.limit} requests are waiting on cells or "
                                         "moving files, the most this server serves at "
                                         "once (--max-running); retry later, or send "
                                         "\"wait\": false",
                                    **{"Retry-After": RETRY_AFTER})
            self._used += 1
        return Slot(self)


class Slot:
    """One held slot of ``Slots``; a class, not a generator: this runs on every request."""

    __slots__ = ("_slots", "_held")

    def __init__(self, slots):
        self._slots, self._held = slots, True

    def __enter__(self):
        return self.release

    def __exit__(self, *exc_info):
        self.release()

    def release(self):
        slots = self._slots
        with slots._lock:
            if self._held:
                self._held = False
                slots._used -= 1


def reply_while_client_waits(kernel, exec_id, gone):
    """The execution's reply; if the client hangs up first (``gone()``, the environ's
    ``CLIENT_GONE``; None: never asked), the cell is interrupted."""
    while True:
        reply = kernel.wait(exec_id, WAIT_SLICE)
        if reply is not None:
            return reply
        if gone is not None and gone():
            try:
                kernel.interrupt(exec_id, "disconnect")
            except errors.UnknownExecution:  # it ended meanwhile
                pass
            return kernel.wait(exec_id)
