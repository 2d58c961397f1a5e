"""Reusable daemon threads for cells.

Starting a thread costs more than running a trivial cell, so threads that
finish a cell wait for the next one (up to ``max_idle`` of them, for up to
``idle_end`` seconds). A waiting thread holds no job, so nothing of the
kernel that submitted its last one is kept alive by it. Each cell
runs in a fresh ``contextvars.Context``, so context variables such as the
``decimal`` context do not carry over from one cell to the next. Plain
``threading.local`` data does carry over, as it does between the cells of a
Jupyter kernel, which all run on one thread.
"""

import contextvars
import queue
import threading


class CellThreads:
    """Runs each submitted job in a daemon thread, reusing idle ones."""

    def __init__(self, max_idle=4, idle_end=60.0):
        self.max_idle, self.idle_end = max_idle, idle_end
        self._lock = threading.Lock()
        self._idle = 0
        self._busy = 0  # jobs submitted and not yet returned
        self._closed = False
        self._jobs = queue.SimpleQueue()

    def submit(self, job, name):
        """Run ``job()`` in a thread called ``name``; return at once."""
        with self._lock:
            self._jobs.put((job, name))
            self._busy += 1
            if self._idle:
                self._idle -= 1
                return
        # Not Thread(args=(job,)): a thread keeps its args until it ends.
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self):
        while True:
            try:
                job, name = self._jobs.get(timeout=self.idle_end)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():  # no job was handed to it meanwhile: end
                        self._idle -= 1
                        return
                continue
            if job is None:  # close(): this idle thread ends
                return
            threading.current_thread().name = name
            try:
                contextvars.Context().run(job)
            finally:
                job = None  # an idle thread must not keep the last cell's objects alive
                with self._lock:
                    self._busy -= 1
            with self._lock:
                if self._idle >= self.max_idle or self._closed:
                    return
                self._idle += 1

    def busy(self):
        """How many jobs have not returned yet: a job may still hold what its cell made
        after the reply it sent (its frames unwind after that)."""
        with self._lock:
            return self._busy

    def close(self):
        """End the idle threads now; those running a job end when it ends."""
        with self._lock:
            self._closed = True
            for _ in range(self._idle):
                self._jobs.put((None, None))
            self._idle = 0
