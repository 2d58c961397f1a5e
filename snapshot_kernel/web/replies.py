"""How a reply to ``POST /execute`` is written: JSON, or the concise text for models
(``render``) with the names in headers. Pure functions of the reply dict."""

import json

from ..render import closing_line, render_text
from .bodies import FORMATS, BadRequest


def reply_format(requested, accept):
    """``json`` or ``text``: the ``format`` asked for, else what the Accept header
    ``accept`` prefers; a 400 for another format."""
    if requested is None:
        return "text" if "text/plain" in accept and "json" not in accept else "json"
    if requested not in FORMATS:
        raise BadRequest(400, f"format must be one of {', '.join(FORMATS)}, not {requested!r}")
    return requested


def reply_parts(reply, form):
    """``(headers, body)`` of the reply to an execution, outside any framework's response."""
    if form == "json":
        return [("Content-Type", "application/json")], json.dumps(reply).encode("utf-8")
    headers = [("Content-Type", "text/plain; charset=utf-8")]
    for header, value in (("X-Exec-Id", reply["exec_id"]), ("X-State-Name", reply["state_name"]),
                          ("X-Parent", reply["parent"]),
                          ("X-Error-Name", (reply["error"] or {}).get("ename"))):
        if value is not None:
            headers.append((header, header_text(value)))
    text = "\n".join(part for part in (render_text(reply["output"]),
                                        closing_line(reply, paging_route)) if part)
    # Encoded here: a cell can print a lone surrogate, which UTF-8 cannot carry and which
    # would fail the framework's encoding outside every handler, as an HTML 500.
    return headers, text.encode("utf-8", "backslashreplace")


def paging_route(exec_id, stream, facts):
    """How a text reply says to read the whole of a cut stream: its exact route."""
    return f"GET {facts['location']}"


def header_text(value):
    """A header value: names may hold characters HTTP headers cannot carry."""
    return value.encode("utf-8").decode("latin-1") if value.isprintable() else repr(value)
