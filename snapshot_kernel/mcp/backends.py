"""What the MCP tools run on: a kernel in this process, or a snapshot-kernel server.

Both backends have the same blocking methods and return the dicts of the HTTP
API (``start`` returns the exec_id), so the tool layer (``server``) is one
piece of code. Whatever either refuses is a ``BackendError`` whose message says
what to do. Standard library only: the server is reached with ``urllib``.
"""

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from ..errors import KernelError

MAX_POLL = 60.0  # seconds the server lets one GET /executions/<id>?wait= wait
SLACK = 30.0     # seconds a request to the server may take beyond what it waits for


class BackendError(Exception):
    """A refused request (unknown state, name taken, server unreachable, ...)."""


class KernelBackend:
    """A ``SnapshotKernel`` in this process."""

    def __init__(self, kernel):
        self.kernel = kernel

    def start(self, code, state_name, new_state_name=None, exec_id=None, timeout=None,
              max_output=None):
        """Start the cell without waiting; its exec_id."""
        with _refusals():
            return self.kernel.start(code, state_name, exec_id, new_state_name, timeout,
                                     max_output).exec_id

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

    def states(self):
        return {"states": self.kernel.state_names()}

    def describe(self, name):
        with _refusals():
            return self.kernel.describe(name)

    def delete(self, name):
        with _refusals():
            self.kernel.delete(name)
        return {"deleted": name}

    def interrupt(self, exec_id):
        with _refusals():
            self.kernel.interrupt(exec_id)
        return {"interrupted": exec_id}

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


class HttpBackend:
    """A snapshot-kernel server at ``url``, which ``token`` opens."""

    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def start(self, code, state_name, new_state_name=None, exec_id=None, timeout=None,
              max_output=None):
        fields = {"code": code, "state_name": state_name, "new_state_name": new_state_name,
                  "exec_id": exec_id, "timeout": timeout, "max_output": max_output,
                  "wait": False}
        body = {name: value for name, value in fields.items() if value is not None}
        return self._call("POST", "/execute", body)["exec_id"]

    def execution(self, exec_id, wait=0.0):
        wait = min(wait, MAX_POLL)
        path = f"/executions/{_quoted(exec_id)}"
        try:
            return self._call("GET", path + (f"?wait={wait:g}" if wait else ""), wait=wait)
        except _Busy:  # every waiting slot is taken: wait here instead, then just look
            time.sleep(wait)
            return self._call("GET", path)

    def output(self, exec_id, stream, offset, limit):
        query = urllib.parse.urlencode({"stream": stream, "offset": offset, "limit": limit})
        return self._call("GET", f"/executions/{_quoted(exec_id)}/output?{query}")

    def executions(self):
        return self._call("GET", "/executions")

    def states(self):
        return self._call("GET", "/states")

    def describe(self, name):
        return self._call("GET", f"/states/{_quoted(name)}")

    def delete(self, name):
        return self._call("DELETE", f"/states/{_quoted(name)}")

    def interrupt(self, exec_id):
        return self._call("POST", "/interrupt", {"exec_id": exec_id})

    def close(self):
        """Nothing to do: the server's cells are the server's."""

    def _call(self, method, path, body=None, wait=0.0):
        """The server's JSON reply; a 4xx or 5xx is a ``BackendError`` with its message."""
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(self.url + path, data, self._headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=wait + SLACK) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            message = _error_message(exc)
            if exc.code == 503:
                raise _Busy(message) from None
            raise BackendError(message) from None
        except OSError as exc:  # URLError included: refused, reset, timed out
            reason = getattr(exc, "reason", exc)
            raise BackendError(f"cannot reach the snapshot-kernel server at {self.url} "
                               f"({reason})") from None


class _Busy(BackendError):
    """A 503: the server serves as many waiting requests as it can."""


def _error_message(exc):
    """The ``error`` of the server's JSON error body, else the status line."""
    try:
        return json.loads(exc.read())["error"]
    except (ValueError, KeyError, TypeError, OSError):  # not the server's error shape
        return f"the server answered {exc.code} {exc.reason}"


def _quoted(name):
    """A name as one path segment: names may hold any printable character but ``/``."""
    return urllib.parse.quote(name, safe="")
