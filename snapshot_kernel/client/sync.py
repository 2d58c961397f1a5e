"""``Client``: a snapshot-kernel server from Python, with ``http.client``; standard library
only. Each thread keeps one keep-alive connection; a connection the server closed while
idle is replaced before it is used. Files move in pieces both ways, never whole in memory."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from types import TracebackType
from typing import (IO, Any, Dict, Literal, Mapping, Optional, Type, TypeVar, Union, cast,
                    overload)

from . import calls
from .calls import (CHUNK, DEFAULT_TIMEOUT, Call, Endpoint, Saving, Source, Target, Upload,
                    as_text, json_call)
from .errors import Busy, ClientError, ProtocolError, Unreachable, transport_errors
from .replies import (Deleted, StateTree, ExecutionList, ExecutionRecord, ExecutionReply, FileListing,
                      FileStored, Imported, Interrupted, OutputPage, Started, StateDiff,
                      StateInfo, StateList, TextReply, Transfer)

R = TypeVar("R")
HangUp = (Unreachable, ProtocolError)  # the connection closed, or broke, before the reply


class Client:
    """A snapshot-kernel server at ``url`` (``http://`` or ``https://``, maybe with a path
    prefix), opened by ``token`` (by default $SNAPSHOT_KERNEL_TOKEN); ``timeout`` bounds
    each request beyond the time it asks the server to wait. A ``with`` block closes the
    thread's connection at its end."""

    def __init__(self, url: str, token: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.endpoint = Endpoint.of(url)
        self.url, self.timeout = self.endpoint.url, timeout
        self._headers: Dict[str, Union[str, bytes]] = {
            "Authorization": calls.authorization(token), "Accept": "application/json"}
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, timeout={self.timeout!r})"

    def close(self) -> None:
        """Close this thread's connection (a later call opens another)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    # -- executions ----------------------------------------------------------------------

    @overload
    def execute(self, code: str, state_name: str = ..., *, new_state_name: Optional[str] = ...,
                exec_id: Optional[str] = ..., timeout: Optional[float] = ...,
                max_output: Optional[int] = ..., wait: Literal[True] = ..., store: bool = ...,
                format: Literal["json"] = ...) -> ExecutionReply: ...

    @overload
    def execute(self, code: str, state_name: str = ..., *, new_state_name: Optional[str] = ...,
                exec_id: Optional[str] = ..., timeout: Optional[float] = ...,
                max_output: Optional[int] = ..., wait: Literal[True] = ..., store: bool = ...,
                format: Literal["text"]) -> TextReply: ...

    @overload
    def execute(self, code: str, state_name: str = ..., *, new_state_name: Optional[str] = ...,
                exec_id: Optional[str] = ..., timeout: Optional[float] = ...,
                max_output: Optional[int] = ..., wait: Literal[False], store: bool = ...,
                format: str = ...) -> Started: ...

    @overload
    def execute(self, code: str, state_name: str = ..., *, new_state_name: Optional[str] = ...,
                exec_id: Optional[str] = ..., timeout: Optional[float] = ...,
                max_output: Optional[int] = ..., wait: bool = ..., store: bool = ...,
                format: str = ...) -> Union[ExecutionReply, TextReply, Started]: ...

    def execute(self, code: str, state_name: str = "initial", *,
                new_state_name: Optional[str] = None, exec_id: Optional[str] = None,
                timeout: Optional[float] = None, max_output: Optional[int] = None,
                wait: bool = True, store: bool = True, format: str = "json"
                ) -> Union[ExecutionReply, TextReply, Started]:
        """Run ``code`` on ``state_name``: the reply once the cell ends (a ``TextReply``
        with ``format="text"``), or with ``wait=False`` at once a ``Started``.

        A waiting call whose connection closes before the reply (the cell crashed the
        server process, or a proxy hung up) returns the reply the server recorded for
        the execution: for a crash, a ``KernelCrash`` error naming the cause. So the
        call sends an ``exec_id`` of its own when given none."""
        call, exec_id = calls.execute(code, state_name, new_state_name, exec_id, timeout,
                                      max_output, wait, format, store)
        try:
            return self._call(call)
        except HangUp as lost:
            if not wait:
                raise
            reply = self._reply_after_hang_up(exec_id, lost)
            return as_text(reply) if format == "text" else reply

    def _reply_after_hang_up(self, exec_id: str, lost: ClientError) -> ExecutionReply:
        """The reply of execution ``exec_id``, whose connection closed before its reply
        came: the server process crashed under the cell (the next one reports it
        ``crashed``), or something between here and the server dropped the connection
        (the server then interrupts the cell). Waits up to MAX_POLL s for it. ``lost``
        is raised again if the server has no record of it or cannot be reached."""
        self.close()
        try:
            record = self.execution(exec_id, calls.MAX_POLL)
        except ClientError:  # no record (NotFound), or no server
            raise lost from None
        if record.reply is None:  # still running after all that waiting
            raise lost
        return record.reply

    def execution(self, exec_id: str, wait: float = 0.0) -> ExecutionRecord:
        """The record of ``exec_id`` (status, output so far, ``reply`` once it ended),
        after waiting up to ``wait`` seconds for it to end (polling MAX_POLL s at a time)."""
        deadline = time.monotonic() + wait
        while True:
            left = max(0.0, deadline - time.monotonic())
            record = self._poll(exec_id, min(left, calls.MAX_POLL))
            if record.reply is not None or time.monotonic() >= deadline:
                return record

    def _poll(self, exec_id: str, wait: float) -> ExecutionRecord:
        try:
            return self._call(json_call("GET", calls.execution_path(exec_id, wait),
                                        ExecutionRecord, waits=wait))
        except Busy:  # every waiting slot is taken: wait here instead, then just look
            time.sleep(min(wait, calls.BUSY_POLL))
            return self._call(json_call("GET", calls.execution_path(exec_id, 0.0),
                                        ExecutionRecord))

    def executions(self) -> ExecutionList:
        """The running executions, and the finished ones still kept."""
        return self._call(json_call("GET", "/executions", ExecutionList))

    def output(self, exec_id: str, stream: str = "stdout", offset: int = 0,
               limit: Optional[int] = None) -> OutputPage:
        """A page of the whole text of an execution's ``stream``, from ``offset``."""
        return self._call(json_call("GET", calls.output_path(exec_id, stream, offset, limit),
                                    OutputPage))

    def interrupt(self, exec_id: str, force: bool = False) -> Interrupted:
        """Raise KeyboardInterrupt in a running execution; with ``force``, the server
        process is replaced if that has not stopped it within 0.5 s (``replaced``)."""
        return self._call(json_call("POST", "/interrupt", Interrupted,
                                    calls.interrupt_body(exec_id, force)))

    # -- states --------------------------------------------------------------------------

    @overload
    def states(self, tree: Literal[False] = ...) -> StateList: ...

    @overload
    def states(self, tree: Literal[True]) -> StateTree: ...

    def states(self, tree: bool = False) -> Union[StateList, StateTree]:
        """The states' names, in creation order; with ``tree``, each state's parent,
        depth, time, first line of code, size and children, depth first."""
        if tree:
            return self._call(json_call("GET", "/states?tree=true", StateTree))
        return self._call(json_call("GET", "/states", StateList))

    def describe(self, name: str) -> StateInfo:
        """A state's parent, code, time, and each variable's type and repr."""
        return self._call(json_call("GET", f"/states/{calls.name(name)}", StateInfo))

    def delete(self, name: str, descendants: bool = False) -> Deleted:
        """Delete a state; the states made from it are untouched, unless ``descendants``:
        then they go too."""
        return self._call(json_call("DELETE", calls.delete_path(name, descendants), Deleted))

    def reset(self) -> StateList:
        """Drop every state but a fresh ``initial``; running cells are interrupted."""
        return self._call(json_call("POST", "/reset", StateList))

    def diff(self, name: str, other: str) -> StateDiff:
        """The names ``other`` adds to ``name``, removes and changes, each side's repr."""
        path = f"/states/{calls.name(name)}/diff/{calls.name(other)}"
        return self._call(json_call("GET", path, StateDiff))

    # -- files and archives ----------------------------------------------------------------

    def upload(self, path: str, source: Source) -> FileStored:
        """Store ``source`` as the file ``path`` of the server's working directory: bytes,
        a binary file object (read from where it stands, in pieces), or the name of a
        local file."""
        return FileStored(self._put(f"/files/{calls.file_path(path)}", source,
                                    "application/octet-stream"))

    def import_state(self, name: str, source: Source) -> Imported:
        """Make state ``name`` of an archive that ``export_state`` wrote: bytes, a binary
        file object or a local file's name, streamed."""
        return Imported(self._put(f"/states/{calls.name(name)}", source, "application/x-tar"))

    def _put(self, url_path: str, source: Source, content_type: str) -> Any:
        upload = Upload(source)
        try:
            response = self._exchange("PUT", url_path, upload.body,
                                      upload.headers(content_type))
            return self._read_json(response)
        finally:
            upload.close()

    def open_file(self, path: str) -> Download:
        """The file ``path`` as a ``Download`` (``read``, ``size``, ``content_type``);
        close it, or use it in a ``with`` block."""
        return self._open(f"/files/{calls.file_path(path)}")

    def download(self, path: str, target: Target) -> Transfer:
        """Copy the file ``path`` into ``target``: a binary file object, or the name of a
        local file (written whole or not at all)."""
        return _save(self.open_file(path), target, path)

    def read_file(self, path: str) -> bytes:
        """The bytes of the file ``path``, whole: for small files."""
        with self.open_file(path) as remote:
            return remote.read()

    def list_files(self, path: str = "") -> FileListing:
        """The entries of a directory ('' is the working directory)."""
        return self._call(json_call("GET", calls.listing_path(path), FileListing))

    def delete_file(self, path: str) -> Deleted:
        """Delete a file, a symbolic link or an empty directory."""
        return self._call(json_call("DELETE", f"/files/{calls.file_path(path)}", Deleted))

    def export_state(self, name: str, target: Target) -> Transfer:
        """Write state ``name`` as an archive into ``target``: a binary file object, or the
        name of a local file (written whole or not at all)."""
        return _save(self._open(f"/states/{calls.name(name)}/export"), target, name)

    def _open(self, url_path: str) -> Download:
        response = self._exchange("GET", url_path)
        if response.status >= 400:
            self._read_json(response)  # raises
        return Download(response, self._local.conn, self.url)

    # -- the wire ----------------------------------------------------------------------------

    def _call(self, call: Call[R]) -> R:
        response = self._exchange(call.method, call.path, call.body, call.headers, call.waits)
        with transport_errors(self.url):
            payload = response.read()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return call.read(response.status, response.reason, headers, payload)

    def _read_json(self, response: http.client.HTTPResponse) -> Any:
        with transport_errors(self.url):
            payload = response.read()
        return calls.decoded(response.status, response.reason, payload)

    def _exchange(self, method: str, path: str, body: calls.Body = None,
                  headers: Optional[Mapping[str, str]] = None, waits: Optional[float] = 0.0
                  ) -> http.client.HTTPResponse:
        """Send one request on this thread's connection; the response, its head read.

        A GET that meets a connection the server had closed is sent again on a
        new one. A server that answers before the body is all sent and hangs up is
        still heard.
        """
        timeout = None if waits is None else waits + self.timeout
        path = self.endpoint.prefix + path
        sent: Dict[str, Union[str, bytes]] = {**self._headers, **(headers or {})}
        with transport_errors(self.url):
            conn, reused = self._connection(timeout)
            try:
                return _send(conn, method, path, body, sent)
            except ConnectionError:  # http.client.RemoteDisconnected included
                conn.close()
                if not (reused and method == "GET"):
                    raise
            return _send(self._connection(timeout)[0], method, path, body, sent)

    def _connection(self, timeout: Optional[float]
                    ) -> tuple[http.client.HTTPConnection, bool]:
        """``(connection, reused)``: this thread's connection, with ``timeout`` set."""
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is None:
            kind = (http.client.HTTPSConnection if self.endpoint.https
                    else http.client.HTTPConnection)
            conn = self._local.conn = kind(self.endpoint.host, self.endpoint.port,
                                           timeout=timeout, blocksize=CHUNK)
        elif conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, conn.sock is not None


def _send(conn: http.client.HTTPConnection, method: str, path: str, body: calls.Body,
          headers: Mapping[str, Union[str, bytes]]) -> http.client.HTTPResponse:
    """``conn.request`` then ``conn.getresponse``, hearing a reply sent before a hang-up."""
    hung_up = None
    try:
        conn.request(method, path, body, cast(Mapping[str, str], headers))
    except (BrokenPipeError, ConnectionResetError) as exc:  # its reply may be there
        hung_up = exc
    try:
        return conn.getresponse()
    except (OSError, http.client.HTTPException):
        if hung_up is not None:
            raise hung_up from None
        raise


class Download:
    """A file coming from the server: ``size``, ``content_type``, ``read(n)``; close it,
    or use it in a ``with`` block."""

    def __init__(self, response: http.client.HTTPResponse,
                 conn: http.client.HTTPConnection, url: str) -> None:
        self._response, self._conn, self._url = response, conn, url
        self.size = int(response.getheader("Content-Length") or -1)
        self.content_type = response.getheader("Content-Type") or "application/octet-stream"

    def read(self, size: int = -1) -> bytes:
        with transport_errors(self._url):
            return self._response.read(None if size < 0 else size)

    def copy_to(self, target: IO[bytes]) -> int:
        """Write the rest into the binary file object ``target``, in pieces; the bytes."""
        copied = 0
        for chunk in calls.chunks_of(self.read):
            target.write(chunk)
            copied += len(chunk)
        return copied

    def close(self) -> None:
        """Done with it; a file not read to its end costs its connection."""
        if not self._response.isclosed():
            self._conn.close()
        self._response.close()

    def __enter__(self) -> Download:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _save(download: Download, target: Target, name: str) -> Transfer:
    """Copy ``download`` into ``target``, a binary file object or a local file's name."""
    with download as remote:
        saving, size = Saving(target), None
        try:
            size = remote.copy_to(saving.file)
        finally:  # whatever stopped it, even an interrupt: no half-written file stays
            if size is None:
                saving.failed()
        saving.done()
    return Transfer({"name": name, "size": size, "content_type": remote.content_type})


def _closed_by_peer(sock: socket.socket) -> bool:
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
