"""What a request sends, checked: its JSON body and its query numbers.

Each check returns the value or raises ``BadRequest`` with a 4xx status and a
message that says what to send instead; ``main`` turns it into the one JSON
error. Nothing here touches the kernel, so a refused request has changed
nothing; nor the web framework: the body is read from the WSGI environ.
"""

import json
import re

MAX_JSON_DEPTH = 32  # request bodies are flat objects; this only has to stop a parse's recursion
# The JSON types a field accepts, as Python types (a field table: name -> (types, required)).
TEXT, NUMBER, WHOLE, BOOL = (str,), (int, float), (int,), (bool,)

# Request fields: name -> (JSON types accepted, required).
EXECUTE_FIELDS = {"code": (TEXT, True), "state_name": (TEXT, True),
                  "exec_id": (TEXT, False), "new_state_name": (TEXT, False),
                  "timeout": (NUMBER, False), "max_output": (WHOLE, False),
                  "wait": (BOOL, False), "format": (TEXT, False), "store": (BOOL, False)}
INTERRUPT_FIELDS = {"exec_id": (TEXT, True), "force": (BOOL, False)}
FORMATS = ("json", "text")
MAX_POLL = 60.0   # seconds ?wait= may hold a request
MAX_OFFSET = 10 ** 12   # the largest ?offset=
DEFAULT_PAGE = 100_000  # characters of full output a page holds unless ?limit= says
MAX_PAGE = 10 ** 7      # characters ?limit= may ask for
CHUNK = 1 << 16         # bytes of a streamed body read at a time
DEFAULT_MAX_IMPORT = 64 << 30  # bytes of an archive PUT /states/<name> reads at most


class BadRequest(Exception):
    """What the client sent cannot be served: ``status`` and ``str()`` say why."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def query_number(name, text, default, highest, whole=False):
    """The text of query parameter ``?name=`` as a number from 0 to ``highest``;
    ``default`` if it is absent. Empty is not absent: the document says a number."""
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if whole:  # JSON Schema: 7.0 is an integer
        value = int(value) if value.is_integer() else -1
    if not 0 <= value <= highest:
        kind = "a whole number" if whole else "a number"
        raise BadRequest(400, f"?{name}= must be {kind} from 0 to {highest:g}, not {text!r}")
    return value


FLAGS = {"true": True, "1": True, "false": False, "0": False}  # what ?flag= takes


def query_flag(name, text):
    """The text of query parameter ``?name=`` as a boolean; False if it is absent."""
    if text is None:
        return False
    if text not in FLAGS:
        raise BadRequest(400, f"?{name}= must be true or false (or 1 or 0), not {text!r}")
    return FLAGS[text]


def json_body(environ, max_body, fields):
    """The WSGI request's body as a dict with exactly ``fields`` (a field table), or a 4xx."""
    body = _parse_json(_read_body(environ, max_body))
    if not isinstance(body, dict):
        raise BadRequest(400, f"the body must be a JSON object, not {_json_type(body)}")
    unknown = body.keys() - fields.keys()
    if unknown:
        raise BadRequest(400, f"unknown field(s) {', '.join(sorted(unknown))}; "
                         f"this route takes {', '.join(fields)}")
    for name, (types, required) in fields.items():
        value = body.get(name)
        if value is None and required:
            raise BadRequest(400, f"field {name!r} is required")
        if types == WHOLE and isinstance(value, float) and value.is_integer():
            value = body[name] = int(value)  # JSON Schema: 7.0 is an integer
        if value is not None and not _of_type(value, types):
            expected = " or ".join(sorted({_json_type(t()) for t in types}))
            raise BadRequest(400, f"field {name!r} must be {expected}, "
                             f"not {_json_type(value)}")
    return body


def _of_type(value, types):
    """JSON ``true`` is a boolean only: bool is an int subclass in Python."""
    return isinstance(value, bool) == (types == BOOL) and isinstance(value, types)


def body_length(environ):
    """The request body's length in bytes; None for a chunked body that the server
    ends (``wsgi.input_terminated``); a 4xx for a body whose end cannot be known."""
    length = _content_length(environ)
    if length < 0 and environ.get("wsgi.input_terminated"):
        return None
    if length < 0 and environ.get("HTTP_TRANSFER_ENCODING"):
        raise BadRequest(411, "send the body with a Content-Length header")
    return max(length, 0)


def body_chunks(environ, length, size=CHUNK):
    """The body in pieces of at most ``size`` bytes: ``length`` bytes in all, or all
    of it if ``length`` is None (``body_length``); a 408 if it stops short."""
    stream, left = environ["wsgi.input"], length
    while left is None or left > 0:
        try:
            chunk = stream.read(size if left is None else min(size, left))
        except OSError:  # a socket timeout or reset: the body stopped coming
            chunk = None
        if not chunk:
            if left is None and chunk is not None:
                return
            raise BadRequest(408, "the body stopped arriving before its end")
        if left is not None:
            left -= len(chunk)
        yield chunk


def _content_length(environ):
    """The Content-Length header as a number; -1 if there is none."""
    try:
        return int(environ.get("CONTENT_LENGTH") or -1)
    except ValueError:  # servers check the header; this is for those that do not
        raise BadRequest(400, "the Content-Length header is not a number") from None


def _read_body(environ, max_body):
    length = _content_length(environ)
    if length < 0 and environ.get("HTTP_TRANSFER_ENCODING"):
        raise BadRequest(411, "send the body with a Content-Length header")
    if length > max_body:
        raise BadRequest(413, f"the body is {length} bytes; the limit is {max_body}")
    try:
        return environ["wsgi.input"].read(length) if length > 0 else b""
    except OSError:  # a socket timeout or reset: the body stopped coming
        raise BadRequest(408, "the body stopped arriving before its Content-Length "
                         "was reached") from None


def _parse_json(raw):
    if not raw.strip():
        raise BadRequest(400, "the body is empty; send a JSON object")
    if _nests_too_deep(raw):
        raise BadRequest(400, f"the body nests arrays and objects more than "
                         f"{MAX_JSON_DEPTH} deep")
    try:
        return json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError both are
        raise BadRequest(400, f"the body is not valid JSON: {exc}{_hint(exc)}") from None


def _hint(error):
    """What usually causes ``error``: a raw newline or tab in a string (code sent as is)."""
    if str(error).startswith("Invalid control character"):
        return ("; a newline or tab inside a JSON string must be sent escaped, as \\n or "
                "\\t (code with a literal line break in curl -d '...' sends it raw)")
    return ""


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _nests_too_deep(raw):
    """True if ``raw``'s arrays and objects nest over MAX_JSON_DEPTH deep, strings aside.

    Checked before parsing because json.loads recurses once per level, and
    what a deep body then raises differs across CPython versions.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the common case, decided at C speed
    depth = 0
    for bracket in _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > MAX_JSON_DEPTH:
            return True
    return False


def _json_type(value):
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a whole number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


class BodyStream:
    """The WSGI request's body, read as it arrives (``read(n)``), at most ``limit`` bytes:
    a body over it is a 413, one that stops arriving a 408. A body may be chunked."""

    def __init__(self, environ, limit):
        try:
            length = int(environ.get("CONTENT_LENGTH") or -1)
        except ValueError:  # servers check the header; this is for those that do not
            raise BadRequest(400, "the Content-Length header is not a number") from None
        if length > limit:
            raise BadRequest(413, f"the body is {length} bytes; the limit is {limit}")
        self._input, self._limit = environ["wsgi.input"], limit
        self._left = length if length >= 0 else None  # None: read to the end (chunked)
        if length < 0 and not environ.get("HTTP_TRANSFER_ENCODING"):
            self._left = 0  # no body at all
        self._read = 0

    def read(self, size):
        if self._left is not None:
            size = min(size, self._left)
        if size <= 0:
            return b""
        try:
            data = self._input.read(size)
        except OSError:  # a socket timeout or reset: the body stopped coming
            raise BadRequest(408, "the body stopped arriving before its end") from None
        self._read += len(data)
        if self._left is not None:
            self._left -= len(data)
        if self._read > self._limit:
            raise BadRequest(413, f"the body is over {self._limit} bytes, the limit")
        return data
