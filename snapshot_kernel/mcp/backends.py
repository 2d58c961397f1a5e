"""What the MCP tools run on: a kernel in this process, or a snapshot-kernel server.

Both backends have the same blocking methods and return the dicts of the HTTP
API (``start`` returns the exec_id; ``read_file`` adds the bytes as ``data``),
so the tool layer (``server``) is one piece of code. Whatever either refuses is
a ``BackendError`` whose message says what to do. Standard library only: the
server is reached with ``client``.
"""

import contextlib
import os

from ..client import Client, ClientError
from ..errors import KernelError
from ..files import Workdir

SLACK = 30.0          # seconds a request to the server may take beyond what it waits for
MAX_READ = 1 << 20    # bytes: the largest file read_file returns


class BackendError(Exception):
    """A refused request (unknown state, name taken, server unreachable, ...)."""


class KernelBackend:
    """A ``SnapshotKernel`` in this process, and the files of ``files`` (a ``Workdir``;
    by default the current directory)."""

    def __init__(self, kernel, files=None):
        self.kernel = kernel
        self.files = Workdir(os.getcwd()) if files is None else files

    def start(self, code, state_name, new_state_name=None, exec_id=None, timeout=None,
              max_output=None, store=True):
        """Start the cell without waiting; its exec_id."""
        with _refusals():
            return self.kernel.start(code, state_name, exec_id, new_state_name, timeout,
                                     max_output, store).exec_id

    def execution(self, exec_id, wait=0.0):
        """The record of GET /executions/<id>, after waiting up to ``wait`` s for the reply."""
        with _refusals():
            return self.kernel.execution(exec_id, wait)

    def output(self, exec_id, stream, offset, limit):
        with _refusals():
            return self.kernel.output(exec_id, stream, offset, limit)

    def executions(self):
        return {"executions": self.kernel.executions(),
                "finished": self.kernel.finished_executions()}

    def states(self, tree=False):
        return {"states": self.kernel.state_tree() if tree else self.kernel.state_names()}

    def describe(self, name):
        with _refusals():
            return self.kernel.describe(name)

    def diff(self, name, other):
        with _refusals():
            return self.kernel.diff(name, other)

    def delete(self, name, descendants=False):
        with _refusals():
            below = self.kernel.delete(name, descendants)
        return {"deleted": name, "descendants": below} if descendants else {"deleted": name}

    def interrupt(self, exec_id, force=False):
        with _refusals():
            if force:  # refused here: no supervisor could start another process
                return {"interrupted": exec_id, "replaced": not self.kernel.stop_by_force(
                    exec_id)}
            self.kernel.interrupt(exec_id)
        return {"interrupted": exec_id}

    def read_file(self, path, limit=MAX_READ):
        """``{"name", "size", "content_type", "data"}`` of a file of at most ``limit`` bytes."""
        with _refusals():
            opened, size, content_type = self.files.open(path)
        with opened:
            _check_readable(path, size, limit)
            return {"name": path, "size": size, "content_type": content_type,
                    "data": opened.read(limit)}

    def write_file(self, path, data):
        with _refusals():
            return self.files.store(path, [data])

    def list_files(self, path=""):
        with _refusals():
            return self.files.listing(path)

    def close(self):
        """Interrupt the running cells: the process is about to end."""
        self.kernel.close()


@contextlib.contextmanager
def _refusals():
    """Turn the kernel's refusals into ``BackendError``."""
    try:
        yield
    except KernelError as exc:
        raise BackendError(str(exc)) from None


def _check_readable(path, size, limit):
    if size > limit:
        raise BackendError(f"{path!r} is {size} bytes; read_file returns files of up to "
                           f"{limit} bytes: read part of it in a cell, or fetch it with "
                           "GET /files/<path>")


class HttpBackend:
    """A snapshot-kernel server at ``url``, which ``token`` opens."""

    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.client = Client(url, token, timeout=SLACK)

    def start(self, code, state_name, new_state_name=None, exec_id=None, timeout=None,
              max_output=None, store=True):
        return self._call(self.client.execute, code, state_name, new_state_name=new_state_name,
                          exec_id=exec_id, timeout=timeout, max_output=max_output,
                          wait=False, store=store)["exec_id"]

    def execution(self, exec_id, wait=0.0):
        return self._call(self.client.execution, exec_id, wait)

    def output(self, exec_id, stream, offset, limit):
        return self._call(self.client.output, exec_id, stream, offset, limit)

    def executions(self):
        return self._call(self.client.executions)

    def states(self, tree=False):
        return self._call(self.client.states, tree)

    def describe(self, name):
        return self._call(self.client.describe, name)

    def diff(self, name, other):
        return self._call(self.client.diff, name, other)

    def delete(self, name, descendants=False):
        return self._call(self.client.delete, name, descendants)

    def interrupt(self, exec_id, force=False):
        return self._call(self.client.interrupt, exec_id, force)

    def read_file(self, path, limit=MAX_READ):
        with self._refusals(), self.client.open_file(path) as remote:
            _check_readable(path, remote.size, limit)
            return {"name": path, "size": remote.size, "content_type": remote.content_type,
                    "data": remote.read(limit)}

    def write_file(self, path, data):
        return self._call(self.client.upload, path, data)

    def list_files(self, path=""):
        return self._call(self.client.list_files, path)

    def close(self):
        """Nothing to do: the server's cells are the server's."""

    def _call(self, method, *args, **kwargs):
        with self._refusals():
            return method(*args, **kwargs)

    @contextlib.contextmanager
    def _refusals(self):
        """Turn the server's error replies, and failures to reach it, into ``BackendError``."""
        try:
            yield
        except ClientError as exc:  # an error reply, or "cannot reach the server at ..."
            raise BackendError(exc.message) from None
