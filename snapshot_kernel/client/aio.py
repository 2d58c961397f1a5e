"""``AsyncClient``: ``Client``'s methods for asyncio, on asyncio streams (``http11``);
standard library only. Concurrent calls each take a connection of their own, kept alive
for the next call when its reply has been read; local files are read and written off
the event loop."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import (IO, Any, Awaitable, Dict, List, Literal, Mapping, Optional, Tuple, Type,
                    TypeVar, Union, overload)

from . import calls
from .calls import (DEFAULT_TIMEOUT, Call, Endpoint, Saving, Source, Target, Upload, as_text,
                    json_call)
from .errors import Busy, ClientError, ProtocolError, TimedOut, Unreachable, transport_errors
from .http11 import Connection, Response
from .replies import (Deleted, StateTree, ExecutionList, ExecutionRecord, ExecutionReply, FileListing,
                      FileStored, Imported, Interrupted, OutputPage, Started, StateDiff,
                      StateInfo, StateList, TextReply, Transfer)

T = TypeVar("T")
HangUp = (Unreachable, ProtocolError)  # the connection closed, or broke, before the reply


class AsyncClient:
    """``Client`` for asyncio: the same arguments, methods, replies and errors, each
    method a coroutine. ``async with AsyncClient(...)`` closes its idle connections at
    the end of the block (``aclose``)."""

    def __init__(self, url: str, token: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.endpoint = Endpoint.of(url)
        self.url, self.timeout = self.endpoint.url, timeout
        port = self.endpoint.port
        host = f"[{self.endpoint.host}]" if ":" in self.endpoint.host else self.endpoint.host
        default = port == (443 if self.endpoint.https else 80)
        self._headers: Dict[str, Union[str, bytes]] = {
            "Host": host if default else f"{host}:{port}",
            "Authorization": calls.authorization(token), "Accept": "application/json"}
        self._idle: List[Connection] = []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, timeout={self.timeout!r})"

    async def aclose(self) -> None:
        """Close the idle connections (a later call opens another)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: Optional[Type[BaseException]],
                        value: Optional[BaseException],
                        traceback: Optional[TracebackType]) -> None:
        await self.aclose()

    # -- executions ----------------------------------------------------------------------

    @overload
    async def execute(self, code: str, state_name: str = ..., *,
                      new_state_name: Optional[str] = ..., exec_id: Optional[str] = ...,
                      timeout: Optional[float] = ..., max_output: Optional[int] = ...,
                      wait: Literal[True] = ..., store: bool = ..., format: Literal["json"] = ...
                      ) -> ExecutionReply: ...

    @overload
    async def execute(self, code: str, state_name: str = ..., *,
                      new_state_name: Optional[str] = ..., exec_id: Optional[str] = ...,
                      timeout: Optional[float] = ..., max_output: Optional[int] = ...,
                      wait: Literal[True] = ..., store: bool = ..., format: Literal["text"]) -> TextReply: ...

    @overload
    async def execute(self, code: str, state_name: str = ..., *,
                      new_state_name: Optional[str] = ..., exec_id: Optional[str] = ...,
                      timeout: Optional[float] = ..., max_output: Optional[int] = ...,
                      wait: Literal[False], store: bool = ..., format: str = ...) -> Started: ...

    @overload
    async def execute(self, code: str, state_name: str = ..., *,
                      new_state_name: Optional[str] = ..., exec_id: Optional[str] = ...,
                      timeout: Optional[float] = ..., max_output: Optional[int] = ...,
                      wait: bool = ..., store: bool = ..., format: str = ...
                      ) -> Union[ExecutionReply, TextReply, Started]: ...

    async def execute(self, code: str, state_name: str = "initial", *,
                      new_state_name: Optional[str] = None, exec_id: Optional[str] = None,
                      timeout: Optional[float] = None, max_output: Optional[int] = None,
                      wait: bool = True, store: bool = True, format: str = "json"
                      ) -> Union[ExecutionReply, TextReply, Started]:
        """As ``Client.execute``."""
        call, exec_id = calls.execute(code, state_name, new_state_name, exec_id, timeout,
                                      max_output, wait, format, store)
        try:
            return await self._call(call)
        except HangUp as lost:
            if not wait:
                raise
            reply = await self._reply_after_hang_up(exec_id, lost)
            return as_text(reply) if format == "text" else reply

    async def _reply_after_hang_up(self, exec_id: str, lost: ClientError) -> ExecutionReply:
        """As ``Client._reply_after_hang_up``."""
        try:
            record = await self.execution(exec_id, calls.MAX_POLL)
        except ClientError:  # no record (NotFound), or no server
            raise lost from None
        if record.reply is None:  # still running after all that waiting
            raise lost
        return record.reply

    async def execution(self, exec_id: str, wait: float = 0.0) -> ExecutionRecord:
        """As ``Client.execution``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            left = max(0.0, deadline - loop.time())
            record = await self._poll(exec_id, min(left, calls.MAX_POLL))
            if record.reply is not None or loop.time() >= deadline:
                return record

    async def _poll(self, exec_id: str, wait: float) -> ExecutionRecord:
        try:
            return await self._call(json_call("GET", calls.execution_path(exec_id, wait),
                                              ExecutionRecord, waits=wait))
        except Busy:  # every waiting slot is taken: wait here instead, then just look
            await asyncio.sleep(min(wait, calls.BUSY_POLL))
            return await self._call(json_call("GET", calls.execution_path(exec_id, 0.0),
                                              ExecutionRecord))

    async def executions(self) -> ExecutionList:
        """As ``Client.executions``."""
        return await self._call(json_call("GET", "/executions", ExecutionList))

    async def output(self, exec_id: str, stream: str = "stdout", offset: int = 0,
                     limit: Optional[int] = None) -> OutputPage:
        """As ``Client.output``."""
        path = calls.output_path(exec_id, stream, offset, limit)
        return await self._call(json_call("GET", path, OutputPage))

    async def interrupt(self, exec_id: str, force: bool = False) -> Interrupted:
        """As ``Client.interrupt``."""
        return await self._call(json_call("POST", "/interrupt", Interrupted,
                                          calls.interrupt_body(exec_id, force)))

    # -- states --------------------------------------------------------------------------

    @overload
    async def states(self, tree: Literal[False] = ...) -> StateList: ...

    @overload
    async def states(self, tree: Literal[True]) -> StateTree: ...

    async def states(self, tree: bool = False) -> Union[StateList, StateTree]:
        """As ``Client.states``."""
        if tree:
            return await self._call(json_call("GET", "/states?tree=true", StateTree))
        return await self._call(json_call("GET", "/states", StateList))

    async def describe(self, name: str) -> StateInfo:
        """As ``Client.describe``."""
        return await self._call(json_call("GET", f"/states/{calls.name(name)}", StateInfo))

    async def delete(self, name: str, descendants: bool = False) -> Deleted:
        """As ``Client.delete``."""
        return await self._call(json_call("DELETE", calls.delete_path(name, descendants),
                                          Deleted))

    async def reset(self) -> StateList:
        """As ``Client.reset``."""
        return await self._call(json_call("POST", "/reset", StateList))

    async def diff(self, name: str, other: str) -> StateDiff:
        """As ``Client.diff``."""
        path = f"/states/{calls.name(name)}/diff/{calls.name(other)}"
        return await self._call(json_call("GET", path, StateDiff))

    # -- files and archives ----------------------------------------------------------------

    async def upload(self, path: str, source: Source) -> FileStored:
        """As ``Client.upload``."""
        return FileStored(await self._put(f"/files/{calls.file_path(path)}", source,
                                          "application/octet-stream"))

    async def import_state(self, name: str, source: Source) -> Imported:
        """As ``Client.import_state``."""
        return Imported(await self._put(f"/states/{calls.name(name)}", source,
                                        "application/x-tar"))

    async def _put(self, url_path: str, source: Source, content_type: str) -> Any:
        upload = Upload(source)
        try:
            headers = {"Content-Type": content_type}
            response = await self._exchange("PUT", url_path, upload.body, upload.length,
                                            headers)
            return calls.decoded(response.status, response.reason,
                                 await self._read_all(response))
        finally:
            upload.close()

    async def open_file(self, path: str) -> AsyncDownload:
        """The file ``path`` as an ``AsyncDownload``; use it in an ``async with`` block."""
        return await self._open(f"/files/{calls.file_path(path)}")

    async def download(self, path: str, target: Target) -> Transfer:
        """As ``Client.download``."""
        return await _save(await self.open_file(path), target, path)

    async def read_file(self, path: str) -> bytes:
        """As ``Client.read_file``."""
        async with await self.open_file(path) as remote:
            return await remote.read()

    async def list_files(self, path: str = "") -> FileListing:
        """As ``Client.list_files``."""
        return await self._call(json_call("GET", calls.listing_path(path), FileListing))

    async def delete_file(self, path: str) -> Deleted:
        """As ``Client.delete_file``."""
        return await self._call(json_call("DELETE", f"/files/{calls.file_path(path)}",
                                          Deleted))

    async def export_state(self, name: str, target: Target) -> Transfer:
        """As ``Client.export_state``."""
        return await _save(await self._open(f"/states/{calls.name(name)}/export"), target,
                           name)

    async def _open(self, url_path: str) -> AsyncDownload:
        response = await self._exchange("GET", url_path)
        if response.status >= 400:
            calls.decoded(response.status, response.reason, await self._read_all(response))
        return AsyncDownload(self, response)

    # -- the wire ----------------------------------------------------------------------------

    async def _call(self, call: Call[T]) -> T:
        response = await self._exchange(call.method, call.path, call.body,
                                        None if call.body is None else len(call.body),
                                        call.headers, call.waits)
        payload = await self._read_all(response)
        return call.read(response.status, response.reason, response.headers, payload)

    async def _read_all(self, response: Response) -> bytes:
        """The whole body; the connection is kept for the next call, or closed if the body
        did not come to its end."""
        try:
            with transport_errors(self.url):
                return await self._bounded(response.read(), self.timeout)
        finally:
            self._release(response)

    async def _exchange(self, method: str, path: str,
                        body: Union[None, bytes, IO[bytes]] = None, length: Optional[int] = 0,
                        headers: Optional[Mapping[str, str]] = None,
                        waits: Optional[float] = 0.0) -> Response:
        """Send one request; the response, its head read. As ``Client._exchange``: a GET
        that meets a connection the server had closed is sent again on a new one, and a
        reply sent before the server hangs up is heard."""
        seconds = None if waits is None else waits + self.timeout
        target = self.endpoint.prefix + path
        sent = {**self._headers, **(headers or {})}
        with transport_errors(self.url):
            conn, reused = await self._connection()
            try:
                return await self._send(conn, method, target, sent, body, length, seconds)
            except ConnectionError:  # Unreachable included
                if not (reused and method == "GET"):
                    raise
            conn, _ = await self._connection()
            return await self._send(conn, method, target, sent, body, length, seconds)

    async def _send(self, conn: Connection, method: str, target: str,
                    headers: Mapping[str, Union[str, bytes]],
                    body: Union[None, bytes, IO[bytes]], length: Optional[int],
                    seconds: Optional[float]) -> Response:
        """The response to a request on ``conn``, which is closed if it fails."""
        answered = False
        try:
            response = await conn.exchange(method, target, headers, body, length, seconds)
            answered = True
            return response
        finally:
            if not answered:
                conn.close()

    async def _connection(self) -> Tuple[Connection, bool]:
        """``(connection, reused)``: an idle connection that can carry a request, or a new
        one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn, True
            conn.close()
        return await self._bounded(Connection.open(self.endpoint), self.timeout), False

    def _release(self, response: Response) -> None:
        """Keep the connection of a response read to its end for the next call."""
        if response.done and response.conn.reusable:
            self._idle.append(response.conn)
        else:
            response.conn.close()

    async def _bounded(self, step: Awaitable[T], seconds: Optional[float]) -> T:
        """``await step``, or TimedOut after ``seconds`` (None: no bound)."""
        if seconds is None:
            return await step
        try:
            return await asyncio.wait_for(step, seconds)
        except asyncio.TimeoutError:  # not TimeoutError itself before 3.11
            raise TimedOut(f"{self.url} did not answer within {seconds:g} s") from None


class AsyncDownload:
    """A file coming from the server: ``size``, ``content_type``, ``await read(n)``; use it
    in an ``async with`` block (or ``await aclose()``)."""

    def __init__(self, client: AsyncClient, response: Response) -> None:
        self._client, self._response = client, response
        self.size = int(response.headers.get("content-length") or -1)
        self.content_type = response.headers.get("content-type") or "application/octet-stream"

    async def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (the rest if ``size`` < 0); b"" at the end."""
        if self._response.done:
            return b""
        with transport_errors(self._client.url):
            data = await self._client._bounded(self._response.read(size),
                                               self._client.timeout)
        if self._response.done:  # its connection can carry the next call
            self._client._release(self._response)
        return data

    async def copy_to(self, target: IO[bytes]) -> int:
        """Write the rest into the binary file object ``target``, in pieces; the bytes."""
        copied = 0
        while True:
            chunk = await self.read(calls.CHUNK)
            if not chunk:
                return copied
            await asyncio.to_thread(target.write, chunk)
            copied += len(chunk)

    async def aclose(self) -> None:
        """Done with it; a file not read to its end costs its connection."""
        if not self._response.done:
            self._response.conn.close()

    async def __aenter__(self) -> AsyncDownload:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _save(download: AsyncDownload, target: Target, name: str) -> Transfer:
    """Copy ``download`` into ``target``, a binary file object or a local file's name."""
    async with download as remote:
        saving, size = Saving(target), None
        try:
            size = await remote.copy_to(saving.file)
        finally:  # whatever stopped it, even a cancellation: no half-written file stays
            if size is None:
                saving.failed()
        saving.done()
    return Transfer({"name": name, "size": size, "content_type": remote.content_type})
