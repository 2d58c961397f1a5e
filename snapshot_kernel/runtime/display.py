"""Rich output as Jupyter shows it: mime bundles, and ``display()`` for cells.

A value's bundle has ``text/plain`` (its repr) and whatever its ``_repr_*_``
methods and ``_repr_mimebundle_`` give, as IPython's display formatter
collects them; types without such methods (a matplotlib Figure) get a
formatter registered by their support module. Each method is user code: one
that raises leaves its mime out and writes a line to the cell's stderr, as
IPython does. Text items are cut to the execution's output limit, and images
larger than its image limit are replaced by a note. Knows nothing of states.
"""

import base64
import builtins
import functools
import json
import threading

from . import capture as _capture
from ..cell import call_user, drop_tracebacks, safe_repr, truncate

_REPR_METHODS = (
    ("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"), ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"), ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
BINARY = frozenset({"image/png", "image/jpeg", "application/pdf"})  # sent as base64
IMAGES = BINARY | {"image/svg+xml"}  # bounded by the image limit, never cut
_formatters = {}  # type -> fn(obj) returning (data, metadata), for types without _repr_*_
_PLAIN = frozenset({int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset,
                    range, type(None)})  # no _repr_*_ methods: text/plain only
_formatters_lock = threading.Lock()


def register_formatter(cls, formatter):
    """Let ``formatter(obj) -> (data, metadata)`` render instances of ``cls`` and subclasses."""
    with _formatters_lock:
        _formatters[cls] = formatter


def bundle(obj, text_limit, image_limit):
    """``(data, metadata)``: every mime ``obj`` can show itself as, bounded."""
    data, metadata = {}, {}
    if type(obj) not in _PLAIN and not isinstance(obj, type):  # a class's are unbound
        _collect(obj, data, metadata)
    data["text/plain"] = safe_repr(obj, text_limit)
    return _bounded(data, metadata, text_limit, image_limit)


def _collect(obj, data, metadata):
    formatter = next((fn for cls, fn in _formatters.items() if isinstance(obj, cls)), None)
    if formatter is not None:
        _merge(_guarded(formatter, obj, name="a formatter"), data, metadata)
    mimebundle = _attribute(obj, "_repr_mimebundle_")
    if mimebundle is not None:
        _merge(_guarded(functools.partial(mimebundle, include=None, exclude=None),
                        name="_repr_mimebundle_"), data, metadata)
    for mime, name in _REPR_METHODS:
        method = _attribute(obj, name) if mime not in data else None
        if method is not None:
            _merge(({mime: _guarded(method, name=name)}, {}), data, metadata)


def _attribute(obj, name):
    found, exc = call_user(getattr, obj, name, None)
    if exc is not None:
        drop_tracebacks(exc)
    return found if callable(found) else None


def _guarded(fn, *args, name=None):
    """``fn(*args)``; None (and a line on the cell's stderr) if it raises."""
    result, exc = call_user(fn, *args)
    if exc is None:
        return result
    _capture.note("stderr", f"{name or 'display'} failed: {type(exc).__name__}: {exc}\n")
    drop_tracebacks(exc)
    return None


def _merge(result, data, metadata):
    """Add a formatter's result (a dict, or ``(dict, metadata)``) to the bundle."""
    if isinstance(result, tuple) and len(result) == 2:
        result, extra = result
        if isinstance(extra, dict):
            metadata.update(extra)
    if not isinstance(result, dict):
        return
    for mime, value in result.items():
        if isinstance(value, tuple) and len(value) == 2:  # IPython: (data, metadata)
            value, extra = value
            if isinstance(extra, dict):
                metadata[mime] = extra
        if value is not None and isinstance(mime, str) and mime not in data:
            data[mime] = value


def _bounded(data, metadata, text_limit, image_limit):
    """Encode binary mimes as base64, cut text, and replace images too large by a note."""
    result, notes = {}, []
    for mime, value in data.items():
        if mime in IMAGES:
            value, size = _encoded(mime, value)
            if value is not None and image_limit is not None and size > image_limit:
                notes.append(f"[{mime} of {size} bytes omitted: larger than the "
                             f"{image_limit}-byte image limit (--max-image)]")
                metadata.pop(mime, None)
            elif value is not None:
                result[mime] = value
        elif isinstance(value, str):
            result[mime] = truncate(value, text_limit)
        elif mime.endswith("json") and _is_json(value, text_limit):
            result[mime] = value
    if notes:
        result["text/plain"] = "\n".join([result.get("text/plain", "")] + notes).lstrip("\n")
    return result, metadata


def _encoded(mime, value):
    """``(text, size in bytes)`` of an image: binary ones as base64."""
    if isinstance(value, (bytes, bytearray)) and mime in BINARY:
        return base64.b64encode(bytes(value)).decode("ascii"), len(value)
    if isinstance(value, str):
        return value, (len(value) * 3 // 4 if mime in BINARY else len(value))
    return None, 0


def _is_json(value, limit):
    """True if ``value`` serializes to JSON within ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return False
    return limit is None or len(text) <= limit


def display_data(obj, text_limit, image_limit, raw=False, metadata=None):
    """The ``display_data`` output item for ``obj`` (a mime dict if ``raw``)."""
    if raw and isinstance(obj, dict):
        data, extra = _bounded(dict(obj), {}, text_limit, image_limit)
    else:
        data, extra = bundle(obj, text_limit, image_limit)
    extra.update(metadata or {})
    return {"output_type": "display_data", "data": data, "metadata": extra}


def display(*objs, raw=False, metadata=None, **ignored):
    """Show each object in the cell's output, as IPython's ``display`` does."""
    current = _capture.current_capture()
    for obj in objs:
        if current is None:  # outside a cell: print, as IPython does without a frontend
            print(repr(obj))
            continue
        current.add(display_data(obj, current.limit, current.image_limit, raw, metadata))


def install():
    """Make ``display`` a builtin, as IPython does; a state's own ``display`` shadows it."""
    builtins.display = display
