"""The outputs of a reply as one concise text, for language models.

Follows fastcore's ``render_text`` conventions (the rendering clikernel gives
models) but for the order: outputs stay in the order they happened, a stream's
pieces that follow each other joined and cleaned as a terminal would show them;
each rich output shows one mime type, its plain text rather than its HTML; one
output is returned bare, and several are each wrapped in a tag named after the
stream or output type. ``closing_parts`` says what the JSON reply adds.
Pure functions: no I/O, no kernel state.
"""

import base64
import re

# After markdown and images, a rich output shows its plain text, unless that is only a
# default repr (``<x.Y object at 0x...>``) and one of these has something to say.
MARKDOWN = "text/markdown"
TEXT_MIMES = ("text/html", "application/javascript", "text/latex")
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml")
PLAIN = "text/plain"
MAX_LISTED = 5  # checkpoints a closing line names one by one

_ALTERNATE_SCREEN = re.compile(
    r"\x1b\[\?(?:1049|1047|47)h.*?(?:\x1b\[\?(?:1049|1047|47)l|\Z)", re.DOTALL)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]"       # CSI: colours, cursor moves, erasing
                   r"|\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
                   r"|[()][0-9A-Za-z]|[@-Z\\-_0-9=>])")  # charsets, two-character escapes
_ERASE_IN_LINE = re.compile(r"\x1b\[[012]?K")
_LINE_CONTROL = re.compile(r"\r|\x08|\x1b\[[012]?K")
_CARETS_ONLY = re.compile(r"\s*[~^]+\s*")
_DEFAULT_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>")
_STYLES_AND_SCRIPTS = re.compile(r"<(style|script)\b.*?</\1\s*>\s*", re.DOTALL | re.IGNORECASE)


def render_text(outputs, tb_maxlen=180):
    """The outputs as one text, in their order: the only one bare, or several each in a tag."""
    items = [(tag, mime, text) for tag, mime, text in
             (_render(output, tb_maxlen) for output in _joined_streams(outputs)) if text]
    if len(items) == 1:
        return items[0][2]
    return "\n".join(_tagged(tag, mime, text) for tag, mime, text in items)


def _joined_streams(outputs):
    """The outputs with each run of pieces of one stream joined into one (empty pieces,
    which show nothing, do not break a run)."""
    joined = []
    for output in outputs:
        if output.get("output_type") != "stream":
            joined.append(output)
            continue
        name, text = output.get("name", "stdout"), _joined(output.get("text"))
        last = joined[-1] if joined else {}
        if last.get("output_type") == "stream" and last["name"] == name:
            last["text"] += text
        elif text:
            joined.append({"output_type": "stream", "name": name, "text": text})
    return joined


def _render(output, tb_maxlen):
    """``(tag, mime, text)`` for one output; the text is empty if nothing shows."""
    kind = output.get("output_type")
    if kind == "stream":
        return output["name"], PLAIN, clean_terminal(output["text"])
    if kind == "error":
        return kind, PLAIN, shorten_traceback(output, tb_maxlen)
    if kind in ("execute_result", "display_data"):
        return (kind, *_preferred(output.get("data") or {}, output.get("metadata") or {}))
    return kind, PLAIN, ""  # an output type this renderer does not know shows nothing


def _tagged(tag, mime, text):
    attribute = "" if mime == PLAIN else f' mime="{mime}"'
    ending = "" if text.endswith("\n") else "\n"
    return f"<{tag}{attribute}>\n{text}{ending}</{tag}>"


def _joined(value):
    """Notebook files may hold text as a list of lines."""
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def _preferred(data, metadata):
    """``(mime, text)``: markdown, an image's note, the plain text unless it is a bare
    default repr, HTML (without its styles and scripts), JavaScript, LaTeX, or plain."""
    markdown = strip_ansi(_joined(data.get(MARKDOWN)))
    if markdown:
        return MARKDOWN, markdown
    for mime in IMAGE_MIMES:
        value = _joined(data.get(mime))
        if value:
            return mime, image_note(mime, value, metadata.get(mime) or {})
    plain = strip_ansi(_joined(data.get(PLAIN)))
    if plain and not _DEFAULT_REPR.fullmatch(plain.strip()):
        return PLAIN, plain
    for mime in TEXT_MIMES:
        text = strip_ansi(_joined(data.get(mime)))
        if mime == "text/html":
            text = _STYLES_AND_SCRIPTS.sub("", text)
        if text.strip():
            return mime, text
    return PLAIN, plain


# -- what the JSON reply adds --

def closing_line(reply, paging):
    """One line, in brackets, of what the reply's JSON adds to its outputs
    (``closing_parts``), for the end of its text."""
    return "[" + "; ".join(closing_parts(reply, paging)) + "]"


def closing_parts(reply, paging):
    """Short phrases: the state stored, or that none was and why; the checkpoints; each
    cut stream and ``paging(exec_id, stream, facts)``, how to read all of it; the names
    a crash or restart would lose; what the cell waited for before it ran."""
    parent = reply["parent"]
    if reply["error"] is not None:
        parts = [f"{reply['error']['ename']}, no state stored ({parent!r} is unchanged)"]
    elif reply["state_name"] is None:
        parts = [f"no state stored, as asked ({parent!r} is unchanged)"]
    else:
        parts = [f"new state {reply['state_name']!r} (from {parent!r})"]
    names = [point["state_name"] for point in reply.get("checkpoints", ())]
    if 0 < len(names) <= MAX_LISTED:
        parts.append("checkpoints: " + ", ".join(map(repr, names)))
    elif names:
        parts.append(f"{len(names)} checkpoints, {names[0]!r} to {names[-1]!r}")
    for stream, facts in reply.get("truncated", {}).items():
        parts.append(f"{stream} was cut: {paging(reply['exec_id'], stream, facts)} pages "
                     "through all of it")
    if reply.get("lost"):
        parts.append("not saved to the state directory, so a crash or restart loses: "
                     + ", ".join(sorted(reply["lost"])))
    waited = reply.get("waited")
    if waited:
        parts.append(f"waited {waited['seconds']:.1f} s before it ran (its timeout did not "
                     f"run meanwhile) for {', '.join(map(repr, waited['for']))}: "
                     + "; ".join(waited["settings"]))
    return parts


# -- streams: what a terminal would show --

def strip_ansi(text):
    """``text`` without ANSI escape sequences (colours, cursor moves, titles)."""
    return _ANSI.sub("", text)


def clean_terminal(text):
    """What a terminal shows for ``text``: alternate-screen content dropped, ``\\r``
    and ``\\b`` applied, erase-in-line honoured, other escapes stripped."""
    text = _ALTERNATE_SCREEN.sub("", text)
    # Erase-in-line is kept until the lines are drawn: `\r\x1b[K` is how many tools redraw.
    text = _ANSI.sub(lambda match: match.group() if _ERASE_IN_LINE.fullmatch(match.group()) else "",
                     text)
    return "\n".join(_draw_line(line) for line in text.split("\n"))


def _draw_line(line):
    """One line as a terminal leaves it, so a progress bar keeps only its last state."""
    if not _LINE_CONTROL.search(line):
        return line
    shown, column, start = "", 0, 0
    for match in _LINE_CONTROL.finditer(line):
        shown, column = _overwrite(shown, column, line[start:match.start()])
        start, control = match.end(), match.group()
        if control == "\r":
            column = 0
        elif control == "\x08":
            column = max(column - 1, 0)
        elif control == "\x1b[2K":
            shown = " " * column
        elif control == "\x1b[1K":
            shown = " " * column + shown[column:]
        else:  # erase from the cursor to the end of the line
            shown = shown[:column]
    return _overwrite(shown, column, line[start:])[0]


def _overwrite(shown, column, text):
    shown = shown.ljust(column)
    return shown[:column] + text + shown[column + len(text):], column + len(text)


# -- tracebacks --

def shorten_traceback(error, tb_maxlen):
    """The error's traceback without ANSI, long lines cut with ``…``; ``File``
    lines and the final exception message are kept whole."""
    pieces = error.get("traceback") or [f"{error.get('ename', 'Error')}: {error.get('evalue', '')}"]
    # The kernel sends pieces that end in newlines; Jupyter kernels send bare lines.
    text = strip_ansi("".join(p if p.endswith("\n") else p + "\n" for p in pieces))
    rows = text.rstrip("\n").split("\n")
    final = _final_message_row(rows, error.get("ename", ""))
    kept = []
    for index, row in enumerate(rows):
        if index >= final or len(row) <= tb_maxlen or row.lstrip().startswith('File "'):
            kept.append(row)
        elif not _CARETS_ONLY.fullmatch(row):  # carets under a cut line point at nothing
            kept.append(row[:max(tb_maxlen - 1, 0)] + "…")
    return "\n".join(kept)


def _final_message_row(rows, ename):
    """Where the final ``Name: message`` starts (its later lines and notes follow)."""
    if ename:
        pattern = re.compile(rf"(?:[\w.]+\.)?{re.escape(ename)}(?::|$)")
        for index in range(len(rows) - 1, -1, -1):
            if pattern.match(rows[index]):
                return index
    return len(rows) - 1


# -- images --

def image_note(mime, value, metadata):
    """A one-line note for an image: ``[image/png 640x480, 23 KB]``."""
    size = len(value.encode()) if mime == "image/svg+xml" else _base64_size(value)
    width, height = metadata.get("width"), metadata.get("height")
    if (width is None or height is None) and mime == "image/png":
        width, height = _png_dimensions(value)
    dimensions = f" {width}x{height}" if width is not None and height is not None else ""
    return f"[{mime}{dimensions}, {_human_size(size)}]"


def _base64_size(value):
    """Bytes encoded by a base64 string, without decoding it."""
    compact = "".join(value.split())
    return len(compact) * 3 // 4 - compact[-2:].count("=")


def _png_dimensions(value):
    """``(width, height)`` from a base64 PNG's header, or ``(None, None)``."""
    try:
        header = base64.b64decode("".join(value[:64].split())[:32])
    except ValueError:  # binascii.Error included: not base64, so no dimensions in the note
        return None, None
    if len(header) < 24 or not header.startswith(b"\x89PNG\r\n\x1a\n"):
        return None, None
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def _human_size(size):
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
