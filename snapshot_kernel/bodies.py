"""What a request sends, checked: its JSON body and its query numbers.

Each check either returns the value or raises a ``bottle.HTTPError`` with a 4xx
status and a message that says what to send instead; the app's error handler
turns it into ``{"error": ...}``. Nothing here touches the kernel, so a refused
request has changed nothing.
"""

import json
import re

import bottle

MAX_JSON_DEPTH = 32  # request bodies are flat objects; this only has to stop a parse's recursion
# The JSON types a field accepts, as Python types (a field table: name -> (types, required)).
TEXT, NUMBER, WHOLE, BOOL = (str,), (int, float), (int,), (bool,)


def query_number(name, default, highest, whole=False):
    """The query parameter ``?name=`` as a number from 0 to ``highest``; ``default`` if absent."""
    text = bottle.request.query.getunicode(name)
    if text is None or text == "":
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if not 0 <= value <= highest:
        kind = "a whole number" if whole else "a number"
        raise bottle.HTTPError(400, f"?{name}= must be {kind} from 0 to {highest:g}, "
                                    f"not {text!r}")
    return value


def json_body(max_body, fields):
    """The request body as a dict with exactly ``fields`` (name: required), or a 4xx."""
    body = _parse_json(_read_body(max_body))
    if not isinstance(body, dict):
        raise bottle.HTTPError(400, f"the body must be a JSON object, not {_json_type(body)}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise bottle.HTTPError(400, f"unknown field(s) {', '.join(unknown)}; "
                                    f"this route takes {', '.join(fields)}")
    for name, (types, required) in fields.items():
        value = body.get(name)
        if value is None and required:
            raise bottle.HTTPError(400, f"field {name!r} is required")
        if value is not None and not _of_type(value, types):
            expected = " or ".join(sorted({_json_type(t()) for t in types}))
            raise bottle.HTTPError(400, f"field {name!r} must be {expected}, "
                                        f"not {_json_type(value)}")
    return body


def _of_type(value, types):
    """JSON ``true`` is a boolean only: bool is an int subclass in Python."""
    return isinstance(value, bool) == (types == BOOL) and isinstance(value, types)


def _read_body(max_body):
    length = bottle.request.content_length
    # The raw WSGI value: bottle's get_header fails on bytes that are not UTF-8.
    if length < 0 and bottle.request.environ.get("HTTP_TRANSFER_ENCODING"):
        raise bottle.HTTPError(411, "send the body with a Content-Length header")
    if length > max_body:
        raise bottle.HTTPError(413, f"the body is {length} bytes; the limit is {max_body}")
    try:
        return bottle.request.environ["wsgi.input"].read(length) if length > 0 else b""
    except OSError:  # a socket timeout or reset: the body stopped coming
        raise bottle.HTTPError(408, "the body stopped arriving before its Content-Length "
                                    "was reached") from None


def _parse_json(raw):
    if not raw.strip():
        raise bottle.HTTPError(400, "the body is empty; send a JSON object")
    if _nests_too_deep(raw):
        raise bottle.HTTPError(400, f"the body nests arrays and objects more than "
                                    f"{MAX_JSON_DEPTH} deep")
    try:
        return json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError both are
        raise bottle.HTTPError(400, f"the body is not valid JSON: {exc}") from None


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
