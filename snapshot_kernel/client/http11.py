"""HTTP/1.1 over asyncio streams, as much as ``AsyncClient`` needs: a request with a body
of bytes or a binary file object (chunked when its length is unknown), and a response
whose body comes by Content-Length, chunks, or until the connection closes."""

from __future__ import annotations

import asyncio
import ssl
from typing import IO, AsyncIterator, Awaitable, Dict, Mapping, Optional, Tuple, TypeVar, Union

from .calls import CHUNK, Endpoint
from .errors import ProtocolError, TimedOut, Unreachable

MAX_HEAD_LINES = 100  # header lines of a response, at most
T = TypeVar("T")


class _Reader(asyncio.StreamReader):
    """A StreamReader that a connection lost in a write does not make unreadable: asyncio's
    raises the write's error on every read after it, even of what had come before, such as
    the refusal of an upload that the server sent before it hung up. Here the reads get what
    had come, then the end."""

    def set_exception(self, exc: Exception) -> None:
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            self.feed_eof()
        else:
            super().set_exception(exc)


class Connection:
    """One keep-alive connection to a server, on the event loop that opened it."""

    def __init__(self, url: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.url, self.reader, self.writer = url, reader, writer
        self.loop = asyncio.get_running_loop()
        self.reusable = True  # false once a response said it closes, or one broke off
        self._seconds: Optional[float] = None  # the bound on each piece of the body sent

    @classmethod
    async def open(cls, endpoint: Endpoint) -> Connection:
        """``asyncio.open_connection``, with a ``_Reader`` (as its docstring suggests)."""
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if endpoint.https else None
        reader = _Reader(limit=CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.create_connection(
            lambda: protocol, endpoint.host, endpoint.port, ssl=context,
            server_hostname=endpoint.host if context else None)
        return cls(endpoint.url, reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    def usable(self) -> bool:
        """True if this idle connection can carry a request: the server has not closed it
        (nor sent what nobody asked for), and it belongs to the running loop."""
        return (self.reusable and self.loop is asyncio.get_running_loop()
                and not self.reader.at_eof() and not self.writer.is_closing())

    def close(self) -> None:
        self.reusable = False
        self.writer.close()

    async def exchange(self, method: str, target: str,
                       headers: Mapping[str, Union[str, bytes]],
                       body: Union[None, bytes, IO[bytes]], length: Optional[int],
                       seconds: Optional[float]) -> Response:
        """Send a request and read the response's head, at once: a server that answers
        before the body is all sent (a refusal) is heard, and the rest is not sent. A body
        of unknown ``length`` (a file object) goes chunked. Each piece of the body, and
        then the head, must come within ``seconds`` (None: no bound)."""
        self._seconds = seconds
        head, chunked = self._head(method, target, headers, body, length)
        answer = asyncio.ensure_future(self.response())
        try:
            try:
                await self._send(head, body, chunked, answer)
            except (BrokenPipeError, ConnectionResetError):  # hung up: its answer may be in
                pass
            return await self._within(answer, "did not answer")
        finally:
            if answer.done() and not answer.cancelled():
                answer.exception()  # seen: it was raised above, or another error was
            answer.cancel()  # if it has not come: no one may read this connection now

    def _head(self, method: str, target: str, headers: Mapping[str, Union[str, bytes]],
              body: Union[None, bytes, IO[bytes]], length: Optional[int]) -> Tuple[bytes, bool]:
        lines = [f"{method} {target} HTTP/1.1".encode("latin-1")]
        chunked = body is not None and length is None
        extra = {"Transfer-Encoding": "chunked"} if chunked else (
            {} if body is None else {"Content-Length": str(length)})
        for name, value in {**headers, **extra}.items():
            raw = value if isinstance(value, bytes) else value.encode("latin-1")
            lines.append(name.encode("latin-1") + b": " + raw)
        return b"\r\n".join(lines) + b"\r\n\r\n", chunked

    async def _send(self, head: bytes, body: Union[None, bytes, IO[bytes]], chunked: bool,
                    answer: asyncio.Future[Response]) -> None:
        if body is None or isinstance(body, bytes):
            self.writer.write(head + (body or b""))
            await self._within(self.writer.drain(), "did not take the request")
            return
        self.writer.write(head)
        while True:
            chunk = await asyncio.to_thread(body.read, CHUNK)  # a local file: off the loop
            if answer.done():  # answered before the body's end: it closes the connection
                self.reusable = False
                return
            if not chunk:
                break
            self.writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            await self._within(self.writer.drain(), "did not take the request's body")
        if chunked:
            self.writer.write(b"0\r\n\r\n")
            await self._within(self.writer.drain(), "did not take the request's body")

    async def _within(self, step: Awaitable[T], what: str) -> T:
        """``await step``, or TimedOut after the exchange's ``seconds``."""
        if self._seconds is None:
            return await step
        try:
            return await asyncio.wait_for(step, self._seconds)
        except asyncio.TimeoutError:  # not TimeoutError itself before 3.11
            raise TimedOut(f"{self.url} {what} within {self._seconds:g} s") from None

    async def response(self) -> Response:
        """The response's head, past any 1xx (``100 Continue``); its body follows."""
        while True:
            status, reason, headers = await self._response_head()
            if not 100 <= status < 200:
                return Response(self, status, reason, headers)

    async def _response_head(self) -> Tuple[int, str, Dict[str, str]]:
        line = await self._line()
        if not line:
            raise Unreachable(f"{self.url} closed the connection without a reply")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"the server answered what is not HTTP/1.x: {line[:80]!r}")
        if version == "HTTP/1.0":
            self.reusable = False
        headers: Dict[str, str] = {}
        for _ in range(MAX_HEAD_LINES):
            line = await self._line()
            if line in (b"\r\n", b"\n", b""):
                return int(code), reason, headers
            name, _, value = line.decode("latin-1").partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        raise ProtocolError(f"the reply's head is over {MAX_HEAD_LINES} lines")

    async def _line(self) -> bytes:
        try:
            return await self.reader.readline()
        except ValueError:  # longer than the reader's limit (asyncio's LimitOverrunError)
            raise ProtocolError(f"a line of the reply is over {CHUNK} bytes") from None


class Response:
    """A response whose head has been read: ``status``, ``reason``, ``headers`` (lower-case
    names), and ``read(n)`` for its body, which hands the connection back at its end."""

    def __init__(self, conn: Connection, status: int, reason: str,
                 headers: Dict[str, str]) -> None:
        self.conn, self.status, self.reason, self.headers = conn, status, reason, headers
        if "close" in headers.get("connection", "").lower():
            conn.reusable = False
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = "0" if status in (204, 304) else headers.get("content-length")  # no body
        self._left: Optional[int] = int(length) if length and not self._chunked else None
        if self._left is None and not self._chunked:
            conn.reusable = False  # the body ends when the connection does
        self.done = self._left == 0

    async def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of the body (all of it if ``size`` < 0); b"" at its end."""
        if self.done:
            return b""
        if size < 0:
            return b"".join([chunk async for chunk in self.chunks()])
        if self._chunked:
            data = await self._read_chunk(size)
            self.done = not data
            return data
        data = await self.conn.reader.read(size if self._left is None else min(size, self._left))
        if self._left is not None:
            if not data:
                raise Unreachable(f"{self.conn.url} closed the connection in the middle of its "
                                  "reply")
            self._left -= len(data)
        self.done = not data or self._left == 0
        return data

    async def chunks(self) -> AsyncIterator[bytes]:
        while not self.done:
            data = await self.read(CHUNK)
            if data:
                yield data

    async def _read_chunk(self, size: int) -> bytes:
        """Up to ``size`` bytes of the current chunk; b"" after the last one."""
        if not self._left:
            line = await self.conn._line()
            try:
                self._left = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"a chunk's size is not hexadecimal: {line[:40]!r}") \
                    from None
            if self._left == 0:
                while await self.conn._line() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b""
        try:
            data = await self.conn.reader.readexactly(min(size, self._left))
            self._left -= len(data)
            if self._left == 0:
                await self.conn.reader.readexactly(2)  # the chunk's CRLF
        except asyncio.IncompleteReadError:
            raise Unreachable(f"{self.conn.url} closed the connection in the middle of its "
                              "reply") from None
        return data
