"""The routes as requests, and their replies read, for both clients (``Client`` sends them
with ``http.client``, ``AsyncClient`` with asyncio streams): no I/O here but local files."""

from __future__ import annotations

import json
import os
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import (IO, Any, Callable, Dict, Generic, Iterator, Mapping, Optional, Tuple,
                    TypeVar, Union)

from .errors import ClientError, UsageError, error_reply
from .replies import ExecutionReply, Started, TextReply

DEFAULT_TIMEOUT = 30.0  # seconds a request may take beyond what it asks the server to wait
MAX_POLL = 60.0         # seconds the server lets one GET /executions/<id>?wait= wait
BUSY_POLL = 0.25        # seconds between plain polls while every waiting slot is taken
CHUNK = 1 << 16         # bytes sent or received at a time
TOKEN_VARIABLE = "SNAPSHOT_KERNEL_TOKEN"  # where the token is read from when none is given

R = TypeVar("R")
PathName = Union[str, "os.PathLike[str]"]
# What goes up: bytes, a binary file object (read from where it stands), a local file's name.
Source = Union[bytes, bytearray, memoryview, PathName, IO[bytes]]
# Where a download goes: a binary file object, or a local file's name (whole or not at all).
Target = Union[PathName, IO[bytes]]
Body = Union[None, bytes, IO[bytes]]


@dataclass(frozen=True)
class Endpoint:
    """A server's URL, read: ``https``, ``host``, ``port`` and the path ``prefix``."""

    url: str
    https: bool
    host: str
    port: int
    prefix: str

    @classmethod
    def of(cls, url: str) -> Endpoint:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"expected an http:// or https:// URL, not {url!r}")
        https = parts.scheme == "https"
        return cls(url.rstrip("/"), https, parts.hostname, parts.port or (443 if https else 80),
                   parts.path.rstrip("/"))


def authorization(token: Optional[str]) -> bytes:
    """The Authorization header's value for ``token``, or for $SNAPSHOT_KERNEL_TOKEN;
    UTF-8, as the server compares it."""
    token = token if token is not None else os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise UsageError(f"no token: pass token=..., or set {TOKEN_VARIABLE}")
    return b"Bearer " + token.encode("utf-8")


@dataclass(frozen=True)
class Call(Generic[R]):
    """One request, and how its reply is read: ``read(status, reason, headers, body)``.
    ``waits``: seconds the server may take on purpose (None: no bound)."""

    method: str
    path: str
    read: Callable[[int, str, Mapping[str, str], bytes], R]
    body: Optional[bytes] = None
    headers: Dict[str, str] = field(default_factory=dict)
    waits: Optional[float] = 0.0


def json_call(method: str, path: str, make: Callable[[Any], R], body: Optional[object] = None,
              waits: Optional[float] = 0.0) -> Call[R]:
    """A request whose reply is JSON, made into ``make(payload)``."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {} if body is None else {"Content-Type": "application/json"}
    return Call(method, path, lambda status, reason, _, payload: make(
        decoded(status, reason, payload)), data, headers, waits)


def decoded(status: int, reason: str, payload: bytes) -> Any:
    """The JSON of a 2xx reply; the ``ClientError`` of its status for any other."""
    if status >= 400:
        raise error_reply(status, reason, payload)
    try:
        return json.loads(payload)
    except ValueError:  # UnicodeDecodeError included: not a snapshot-kernel reply
        raise ClientError(status, "the reply is not JSON") from None


# -- executions -------------------------------------------------------------------------------

def execute(code: str, state_name: str, new_state_name: Optional[str], exec_id: Optional[str],
            timeout: Optional[float], max_output: Optional[int], wait: bool, format: str,
            store: bool = True) -> Tuple[Call[Union[ExecutionReply, TextReply, Started]], str]:
    """``(call, exec_id)``: a waiting call sends an exec_id of its own when given none,
    so that its execution can be looked up should the connection close under it."""
    if format not in ("json", "text"):
        raise UsageError(f"format must be 'json' or 'text', not {format!r}")
    if wait and exec_id is None:
        exec_id = uuid.uuid4().hex
    fields = {"code": code, "state_name": state_name, "new_state_name": new_state_name,
              "exec_id": exec_id, "timeout": timeout, "max_output": max_output, "wait": wait,
              "format": format if format != "json" else None, "store": None if store else False}
    body = {name: value for name, value in fields.items() if value is not None}
    # A waiting request lasts as long as its cell: the cell's timeout bounds it.
    waits = 0.0 if not wait else None if timeout is None else timeout
    call = Call("POST", "/execute", _execute_reply, json.dumps(body).encode("utf-8"),
                {"Content-Type": "application/json"}, waits)
    return call, exec_id or ""


def _execute_reply(status: int, reason: str, headers: Mapping[str, str], payload: bytes
                   ) -> Union[ExecutionReply, TextReply, Started]:
    if status == 202:
        return Started(decoded(status, reason, payload))
    if status < 400 and headers.get("content-type", "").startswith("text/plain"):
        return TextReply(payload.decode("utf-8"), _header(headers, "x-exec-id") or "",
                         _header(headers, "x-state-name"), _header(headers, "x-parent") or "",
                         _header(headers, "x-error-name"))
    return ExecutionReply(decoded(status, reason, payload))


def interrupt_body(exec_id: str, force: bool) -> Dict[str, Any]:
    return {"exec_id": exec_id, **({"force": True} if force else {})}


def delete_path(state: str, descendants: bool) -> str:
    return f"/states/{name(state)}" + ("?descendants=true" if descendants else "")


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    """A name the server sent in a header: UTF-8, which HTTP carries as latin-1."""
    value = headers.get(name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not what the server sends
        return value


def as_text(reply: ExecutionReply) -> TextReply:
    """A reply the server recorded (after a hang-up) as ``format="text"`` would have it:
    the streams, then the error's traceback, joined plainly."""
    error = reply.error
    parts = [reply.stdout, reply.stderr, "".join(error.traceback) if error else ""]
    return TextReply("\n".join(part for part in parts if part), reply.exec_id,
                     reply.state_name, reply.parent, error.ename if error else None)


def execution_path(exec_id: str, wait: float) -> str:
    return f"/executions/{name(exec_id)}" + (f"?wait={wait:.3f}" if wait else "")


def output_path(exec_id: str, stream: str, offset: int, limit: Optional[int]) -> str:
    query = {"stream": stream, "offset": offset, **({"limit": limit} if limit else {})}
    return f"/executions/{name(exec_id)}/output?{urllib.parse.urlencode(query)}"


def listing_path(path: str) -> str:
    directory = file_path(path.strip("/"))
    return f"/files/{directory}/" if directory else "/files/"


def name(value: str) -> str:
    """A state name or exec_id as one path segment."""
    return urllib.parse.quote(value, safe="")


def file_path(path: str) -> str:
    """A file path as path segments: '/' stays, everything else is quoted."""
    return urllib.parse.quote(path, safe="/")


# -- bytes up and down -------------------------------------------------------------------------

class Upload:
    """What an upload sends, from a ``Source``: ``body`` (bytes or a binary file object),
    ``length`` (None: unknown, sent chunked). Close it: it may have opened a local file."""

    def __init__(self, source: Source) -> None:
        self._opened: Optional[IO[bytes]] = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.body: Union[bytes, IO[bytes]] = bytes(source)
            self.length: Optional[int] = len(self.body)
        elif isinstance(source, (str, os.PathLike)):
            self.body = self._opened = open(source, "rb")
            self.length = os.fstat(self._opened.fileno()).st_size
        else:
            self.body, self.length = source, remaining(source)

    def headers(self, content_type: str) -> Dict[str, str]:
        headers = {"Content-Type": content_type}
        if self.length is not None:
            headers["Content-Length"] = str(self.length)
        return headers

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()


def remaining(source: IO[bytes]) -> Optional[int]:
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


class Saving:
    """Where a download goes, from a ``Target``: ``file`` to write into; ``done()`` once
    it is all there (a local file, written to ``<name>.part``, then takes its name), or
    ``failed()``."""

    def __init__(self, target: Target) -> None:
        self._final: Optional[str] = None
        if isinstance(target, (str, os.PathLike)):
            self._final = os.fspath(target)
            self.file: IO[bytes] = open(f"{self._final}.part", "wb")
        else:
            self.file = target

    def done(self) -> None:
        if self._final is not None:
            self.file.close()
            os.replace(f"{self._final}.part", self._final)

    def failed(self) -> None:
        if self._final is not None:
            self.file.close()
            os.unlink(f"{self._final}.part")


def chunks_of(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """The pieces ``read(CHUNK)`` gives until it gives nothing."""
    return iter(lambda: read(CHUNK), b"")
