"""A Python client for a snapshot-kernel server; standard library only.

    from snapshot_kernel.client import Client, NotFound

    kernel = Client("http://127.0.0.1:8080", token)
    reply = kernel.execute("x = 41\\nx + 1")            # waits for the cell
    kernel.execute("x += 1", reply["state_name"], new_state_name="more")
    kernel.diff(reply["state_name"], "more")["changed"]
    kernel.upload("data/input.csv", "local.csv")        # a local file, streamed
    kernel.download("plot.png", "here.png")

Each method makes one request (``execution`` with a long ``wait`` a few) and
returns the route's JSON reply as a dict. An error reply raises ``ClientError``,
or the subclass for its status (``BadRequest``, ``Unauthorized``, ``NotFound``,
``Conflict``, ``TooLarge``, ``Busy``), whose message is the server's
``{"error": ...}``. A server that cannot be reached raises ``OSError`` (or
``http.client.HTTPException`` for what is not HTTP), but a waiting ``execute``
whose connection closes under its cell (a crash of the server process) returns
the reply the server recorded for it (``KernelCrash``). Each thread keeps one
keep-alive connection; a connection the server closed while idle is replaced
before it is used. Files move in pieces both ways, never whole in memory.
"""

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
import uuid

DEFAULT_TIMEOUT = 30.0  # seconds a request may take beyond what it asks the server to wait
MAX_POLL = 60.0         # seconds the server lets one GET /executions/<id>?wait= wait
BUSY_POLL = 0.25        # seconds between plain polls while every waiting slot is taken
CHUNK = 1 << 16         # bytes sent or received at a time


class ClientError(Exception):
    """An error reply: ``status`` (the HTTP status) and ``message`` (the server's words)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message

    def __repr__(self):
        return f"{type(self).__name__}({self.status}, {self.message!r})"


class BadRequest(ClientError):
    """400: the request is malformed (a field, a name, a path that leaves the workdir)."""


class Unauthorized(ClientError):
    """401: the token is missing or wrong."""


class NotFound(ClientError):
    """404: no such state, execution or file."""


class Conflict(ClientError):
    """409: a name taken, a protected state, a directory where a file is wanted."""


class TooLarge(ClientError):
    """413: a body over --max-body, or a file over --max-file."""


class Busy(ClientError):
    """503: the server serves as many waiting requests as it can; retry later."""


ERRORS = {400: BadRequest, 401: Unauthorized, 404: NotFound, 409: Conflict, 413: TooLarge,
          503: Busy}


class Client:
    """A snapshot-kernel server at ``url`` (``http://`` or ``https://``, maybe with a
    path prefix), opened by ``token``; ``timeout`` bounds each request beyond the time
    it asks the server to wait."""

    def __init__(self, url, token, timeout=DEFAULT_TIMEOUT):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._address = (parts.hostname, parts.port or (443 if self._https else 80))
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._local = threading.local()

    def close(self):
        """Close this thread's connection (a later call opens another)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- executions --------------------------------------------------------------------

    def execute(self, code, state_name="initial", *, new_state_name=None, exec_id=None,
                timeout=None, max_output=None, wait=True, store=True):
        """Run ``code`` on ``state_name``: the reply once the cell ends, or with
        ``wait=False`` at once ``{"exec_id", "status", "location"}`` (poll ``execution``).
        With ``store=False`` the cell stores no state.

        A waiting call whose connection closes before the reply (the cell crashed the
        server process, or a proxy hung up) returns the reply the server recorded for
        the execution: for a crash, a ``KernelCrash`` error naming the cause. So the
        call sends an ``exec_id`` of its own when given none."""
        if wait and exec_id is None:
            exec_id = uuid.uuid4().hex
        fields = {"code": code, "state_name": state_name, "new_state_name": new_state_name,
                  "exec_id": exec_id, "timeout": timeout, "max_output": max_output,
                  "wait": wait, "store": None if store else False}
        body = {name: value for name, value in fields.items() if value is not None}
        # A waiting request lasts as long as its cell: the cell's timeout bounds it.
        waits = 0.0 if not wait else None if timeout is None else timeout
        try:
            return self._json("POST", "/execute", body, waits)
        except (ConnectionError, http.client.HTTPException) as lost:
            if not wait:
                raise
            return self._reply_after_hang_up(exec_id, lost)

    def _reply_after_hang_up(self, exec_id, lost):
        """The reply of execution ``exec_id``, whose connection closed before its reply
        came: the server process crashed under the cell (the next one reports it
        ``crashed``), or something between here and the server dropped the connection
        (the server then interrupts the cell). Waits up to MAX_POLL s for it. ``lost``
        is raised again if the server has no record of it or cannot be reached."""
        self.close()
        try:
            record = self.execution(exec_id, MAX_POLL)
        except (NotFound, OSError, http.client.HTTPException):
            raise lost from None
        if record["reply"] is None:  # still running after all that waiting
            raise lost
        return record["reply"]

    def execution(self, exec_id, wait=0.0):
        """The record of ``exec_id`` (status, output so far, ``reply`` once it ended),
        after waiting up to ``wait`` seconds for it to end."""
        path = f"/executions/{_name(exec_id)}"
        deadline = time.monotonic() + wait
        while True:
            left = max(0.0, deadline - time.monotonic())
            record = self._poll(path, min(left, MAX_POLL))
            if record["reply"] is not None or time.monotonic() >= deadline:
                return record

    def _poll(self, path, wait):
        if not wait:
            return self._json("GET", path)
        try:
            return self._json("GET", f"{path}?wait={wait:.3f}", waits=wait)
        except Busy:  # every waiting slot is taken: wait here instead, then just look
            time.sleep(min(wait, BUSY_POLL))
            return self._json("GET", path)

    def executions(self):
        """``{"executions": [running...], "finished": [kept...]}``."""
        return self._json("GET", "/executions")

    def output(self, exec_id, stream="stdout", offset=0, limit=None):
        """A page of the whole text of an execution's ``stream``, from ``offset``."""
        query = {"stream": stream, "offset": offset, **({"limit": limit} if limit else {})}
        return self._json("GET", f"/executions/{_name(exec_id)}/output?"
                                 f"{urllib.parse.urlencode(query)}")

    def interrupt(self, exec_id, force=False):
        """Raise KeyboardInterrupt in a running execution; with ``force``, replace the
        server process if that has not stopped it within 0.5 s (``"replaced"`` says)."""
        body = {"exec_id": exec_id, **({"force": True} if force else {})}
        return self._json("POST", "/interrupt", body)

    # -- states ------------------------------------------------------------------------

    def states(self, tree=False):
        """``{"states": [names...]}`` in creation order; with ``tree``, each state's entry
        (parent, depth, time, first line, size, children), depth first."""
        return self._json("GET", "/states?tree=true" if tree else "/states")

    def describe(self, name):
        """A state's parent, code, time, and each variable's type and repr."""
        return self._json("GET", f"/states/{_name(name)}")

    def delete(self, name, descendants=False):
        """Delete a state; with ``descendants``, every state made from it too."""
        query = "?descendants=true" if descendants else ""
        return self._json("DELETE", f"/states/{_name(name)}{query}")

    def reset(self):
        """Drop every state but a fresh ``initial``; running cells are interrupted."""
        return self._json("POST", "/reset")

    def diff(self, name, other):
        """The names ``other`` adds to ``name``, removes and changes, each side's repr."""
        return self._json("GET", f"/states/{_name(name)}/diff/{_name(other)}")

    # -- files -------------------------------------------------------------------------

    def upload(self, path, source):
        """Store ``source`` as the file ``path`` of the server's working directory:
        bytes, a binary file object (read from where it stands, in pieces), or the
        name of a local file. ``{"name", "size"}``."""
        return self._put(f"/files/{_file(path)}", source, "application/octet-stream")

    def _put(self, url_path, source, content_type):
        """PUT ``source`` (bytes, a binary file object, a local file's name), streamed."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return self._put_body(url_path, bytes(source), len(source), content_type)
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as opened:
                return self._put_body(url_path, opened, os.fstat(opened.fileno()).st_size,
                                      content_type)
        return self._put_body(url_path, source, _remaining(source), content_type)

    def _put_body(self, url_path, body, length, content_type):
        headers = {"Content-Type": content_type}
        if length is not None:
            headers["Content-Length"] = str(length)  # else http.client sends it chunked
        return _decoded(self._exchange("PUT", url_path, body, headers))

    def open_file(self, path):
        """The file ``path`` as a ``Download`` (``read``, ``size``, ``content_type``);
        close it, or use it in a ``with`` block."""
        return self._open(f"/files/{_file(path)}")

    def _open(self, url_path):
        response = self._exchange("GET", url_path)
        if response.status >= 400:
            _decoded(response)  # raises
        return Download(response, self._local.conn)

    def download(self, path, target):
        """Copy the file ``path`` into ``target``: a binary file object, or the name
        of a local file (written whole or not at all). ``{"name", "size", "content_type"}``."""
        return _save(self.open_file(path), target, path)

    # -- portable states ------------------------------------------------------------------

    def export_state(self, name, target):
        """Write state ``name`` as an archive (GET /states/<name>/export) into ``target``:
        a binary file object, or the name of a local file (written whole or not at all)."""
        return _save(self._open(f"/states/{_name(name)}/export"), target, name)

    def import_state(self, name, source):
        """Make state ``name`` of an archive that ``export_state`` wrote: bytes, a binary
        file object or a local file's name, streamed. The reply of PUT /states/<name>."""
        return self._put(f"/states/{_name(name)}", source, "application/x-tar")

    def read_file(self, path):
        """The bytes of the file ``path``, whole: for small files."""
        with self.open_file(path) as remote:
            return remote.read()

    def list_files(self, path=""):
        """``{"files": [{"name", "size", "mtime", "is_dir"}]}`` of a directory ('' is
        the working directory)."""
        directory = _file(path.strip("/"))
        return self._json("GET", f"/files/{directory}/" if directory else "/files/")

    def delete_file(self, path):
        """Delete a file, a symbolic link or an empty directory."""
        return self._json("DELETE", f"/files/{_file(path)}")

    # -- the wire ----------------------------------------------------------------------

    def _json(self, method, path, body=None, waits=0.0):
        """The decoded JSON reply; ``waits``: seconds the server may take on purpose
        (None: no bound)."""
        data, headers = None, {}
        if body is not None:
            data, headers = json.dumps(body).encode("utf-8"), {"Content-Type":
                                                                "application/json"}
        return _decoded(self._exchange(method, path, data, headers, waits))

    def _exchange(self, method, path, body=None, headers=None, waits=0.0):
        """Send one request on this thread's connection; the response, its head read.

        A GET that meets a connection the server had closed is sent again on a
        new one. A server that answers before the body is all sent (a 413) and
        hangs up is still heard.
        """
        timeout = None if waits is None else waits + self.timeout
        path, headers = self._prefix + path, {**self._headers, **(headers or {})}
        conn, reused = self._connection(timeout)
        try:
            return _send(conn, method, path, body, headers)
        except ConnectionError:  # http.client.RemoteDisconnected included
            conn.close()
            if not (reused and method == "GET"):
                raise
        return _send(self._connection(timeout)[0], method, path, body, headers)

    def _connection(self, timeout):
        """``(connection, reused)``: this thread's connection, with ``timeout`` set."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = kind(*self._address, timeout=timeout, blocksize=CHUNK)
        elif conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, conn.sock is not None


def _send(conn, method, path, body, headers):
    """``conn.request`` then ``conn.getresponse``, hearing a reply sent before a hang-up."""
    hung_up = None
    try:
        conn.request(method, path, body, headers)
    except (BrokenPipeError, ConnectionResetError) as exc:  # its reply may be there
        hung_up = exc
    try:
        return conn.getresponse()
    except (OSError, http.client.HTTPException):
        if hung_up is not None:
            raise hung_up from None
        raise


class Download:
    """A file coming from the server: ``size``, ``content_type``, ``read(n)``."""

    def __init__(self, response, conn):
        self._response, self._conn = response, conn
        self.size = int(response.getheader("Content-Length") or -1)
        self.content_type = response.getheader("Content-Type", "application/octet-stream")

    def read(self, size=-1):
        return self._response.read(None if size is None or size < 0 else size)

    def copy_to(self, target, name):
        """Write the rest into the binary file object ``target``, in pieces."""
        copied = 0
        for chunk in iter(lambda: self._response.read(CHUNK), b""):
            target.write(chunk)
            copied += len(chunk)
        return {"name": name, "size": copied, "content_type": self.content_type}

    def close(self):
        """Done with it; a file not read to its end costs its connection."""
        if not self._response.isclosed():
            self._conn.close()
        self._response.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _save(download, target, name):
    """Copy ``download`` into ``target``, a binary file object or a local file's name."""
    with download as remote:
        if not isinstance(target, (str, os.PathLike)):
            return remote.copy_to(target, name)
        partial = f"{os.fspath(target)}.part"
        with open(partial, "wb") as local:
            copied = remote.copy_to(local, name)
        os.replace(partial, target)
        return copied


def _decoded(response):
    """The JSON body of a 2xx response; the matching ``ClientError`` for any other."""
    payload = response.read()
    if response.status < 400:
        try:
            return json.loads(payload)
        except ValueError:  # UnicodeDecodeError included: not a snapshot-kernel reply
            raise ClientError(response.status, "the reply is not JSON") from None
    try:
        message = json.loads(payload)["error"]
    except (ValueError, KeyError, TypeError):  # not the server's error shape (a proxy's?)
        message = f"the server answered {response.status} {response.reason}"
    raise ERRORS.get(response.status, ClientError)(response.status, message)


def _closed_by_peer(sock):
    """True if an idle connection has input: the server closed it (or broke the protocol)."""
    if not isinstance(sock, socket.socket) or hasattr(sock, "version"):  # TLS: cannot peek
        return False
    try:
        sock.setblocking(False)
        sock.recv(1, socket.MSG_PEEK)  # b"" (the end) or bytes nobody asked for
        return True
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def _remaining(source):
    """Bytes left in a file object from where it stands; None if it cannot say."""
    try:
        return os.fstat(source.fileno()).st_size - source.tell()
    except (AttributeError, OSError, ValueError):  # not a real file (a pipe, a stream, ...)
        pass
    try:
        here = source.tell()
        end = source.seek(0, os.SEEK_END)
        source.seek(here)
        return end - here
    except (AttributeError, OSError, ValueError):
        return None


def _name(name):
    """A state name or exec_id as one path segment."""
    return urllib.parse.quote(name, safe="")


def _file(path):
    """A file path as path segments: '/' stays, everything else is quoted."""
    return urllib.parse.quote(path, safe="/")
