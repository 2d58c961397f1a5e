"""What the clients raise: one tree under ``ClientError``.

    ClientError                      status (None unless the server answered), message
    ├── BadRequest (400), Unauthorized (401), NotFound (404), Conflict (409),
    │   TooLarge (413), Incompatible (422), Busy (503)    the server's error replies
    ├── Unreachable (also ConnectionError, an OSError)    refused, reset, dropped
    ├── TimedOut (also TimeoutError, an OSError)          no answer within the timeout
    ├── ProtocolError                                     an answer that is not HTTP
    ├── CellFailed                                        reply.raise_for_error()
    └── UsageError (also ValueError)                      a bad URL, no token

An error reply of any other status is a plain ``ClientError``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from typing import Iterator, Optional, Sequence


class ClientError(Exception):
    """Anything a client raises: ``status`` (the HTTP status, or None when no reply
    came) and ``message`` (the server's ``{"error": ...}``, or what went wrong)."""

    def __init__(self, status: Optional[int], message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status!r}, {self.message!r})"


class BadRequest(ClientError):
    """400: the request is malformed (a field, a name, a path that leaves the workdir)."""


class Unauthorized(ClientError):
    """401: the token is missing or wrong."""


class NotFound(ClientError):
    """404: no such state, execution or file."""


class Conflict(ClientError):
    """409: a name taken, a protected state, a directory where a file is wanted."""


class TooLarge(ClientError):
    """413: a body over --max-body, a file over --max-file, an archive over --max-import."""


class Incompatible(ClientError):
    """422: an archive this server cannot load (another CPython, a library it lacks)."""


class Busy(ClientError):
    """503: the server serves as many waiting requests as it can; retry later."""


class Unreachable(ClientError, ConnectionError):
    """The server cannot be reached, or dropped the connection before its reply: also a
    ``ConnectionError``, so an ``OSError``; ``errno`` is the system's, if it gave one."""

    def __init__(self, message: str, errno: Optional[int] = None) -> None:
        super().__init__(None, message)
        self.errno = errno


class TimedOut(ClientError, TimeoutError):
    """The server did not answer within the client's timeout (also a ``TimeoutError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class ProtocolError(ClientError):
    """What answered is not an HTTP server, or not one this client can read."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class CellFailed(ClientError):
    """The cell raised (``reply.raise_for_error()``): its ``ename``, ``evalue``,
    ``traceback`` (lines), and the ``reply`` itself."""

    def __init__(self, ename: str, evalue: str, traceback: Sequence[str], reply: object
                 ) -> None:
        super().__init__(None, f"{ename}: {evalue}" if evalue else ename)
        self.ename, self.evalue, self.traceback = ename, evalue, list(traceback)
        self.reply = reply


class UsageError(ClientError, ValueError):
    """The client was given what it cannot use: a URL that is not http(s), no token."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


ERRORS = {400: BadRequest, 401: Unauthorized, 404: NotFound, 409: Conflict, 413: TooLarge,
          422: Incompatible, 503: Busy}


def error_reply(status: int, reason: str, payload: bytes) -> ClientError:
    """The exception of an error reply: the class of its status, the server's message."""
    try:
        message = json.loads(payload)["error"]
        if not isinstance(message, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):  # not the server's error shape (a proxy's?)
        message = f"the server answered {status} {reason}"
    return ERRORS.get(status, ClientError)(status, message)


@contextlib.contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Raise what the transport raises as the ``ClientError`` it means."""
    try:
        yield
    except ClientError:  # already one (Unreachable and TimedOut are OSErrors too)
        raise
    except (socket.timeout, TimeoutError) as exc:  # socket.timeout is not one before 3.10
        raise TimedOut(f"{url} did not answer in time ({exc or 'timed out'})") from exc
    except http.client.IncompleteRead as exc:
        raise Unreachable(f"{url} closed the connection in the middle of its reply "
                          f"({exc!r})") from exc
    except OSError as exc:  # refused, reset, no route; http.client.RemoteDisconnected too
        raise Unreachable(f"cannot reach the snapshot-kernel server at {url} "
                          f"({exc.strerror or exc})", exc.errno) from exc
    except http.client.HTTPException as exc:  # a status line or header that is not HTTP
        raise ProtocolError(f"{url} answered what is not HTTP ({exc!r})") from exc
