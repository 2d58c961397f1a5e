"""Where a ``memoryview`` looks into its exporter, so the view can be made again over a copy.

A memoryview is a window on another object's buffer (``view.obj``: a bytearray, an
array, a numpy array, ...). Shared between states, a branch writing through it writes
into its parent's object, and a state's view stops seeing the state's own copy of the
object. So the copier (``handlers.copy_memoryview``) and the state pickler
(``persist``) keep a view as its ``Layout`` over its exporter, and make it again with
``rebuild`` over the exporter's copy.

What can be made again from Python: views of an exporter whose whole buffer is
C-contiguous, that are themselves C-contiguous (any format and shape, by ``cast``) or
one-dimensional with a step. Others (several dimensions with gaps, or an exporter that
is itself a strided view) raise ``Unrebuildable``.
"""

import ctypes
import struct
from typing import NamedTuple, Optional, Tuple

_PyBUF_FULL_RO = 0x0100 | 0x0008 | 0x0010 | 0x0004  # indirect, strides, nd, format


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = (ctypes.POINTER(_PyBuffer),)
_release_buffer.restype = None


class Unrebuildable(Exception):
    """The view cannot be made again over a copy of its exporter; the message says why."""


class Layout(NamedTuple):
    """A view over its exporter's bytes: ``offset`` of its first item, its ``format``,
    and either its ``shape`` (C-contiguous) or its ``step`` in items and ``length``."""
    offset: int
    format: str
    shape: Optional[Tuple[int, ...]]
    step: int
    length: int
    readonly: bool


def _address(obj):
    """The address of the first item of ``obj``'s buffer."""
    buffer = _PyBuffer()
    if _get_buffer(obj, ctypes.byref(buffer), _PyBUF_FULL_RO) != 0:
        raise Unrebuildable("its buffer cannot be read")  # not reached: Python raised
    try:
        return buffer.buf or 0
    finally:
        _release_buffer(ctypes.byref(buffer))


def layout(view):
    """The ``Layout`` of ``view`` over ``view.obj``; Unrebuildable if it has none. A layout
    is returned only once ``rebuild`` over the same exporter gave the same view."""
    whole = memoryview(view.obj)
    if not whole.c_contiguous:
        raise Unrebuildable("its exporter's buffer is not contiguous")
    offset = _address(view) - _address(whole) if view.nbytes else 0
    if view.c_contiguous and view.ndim:
        place = Layout(offset, view.format, tuple(view.shape), 1, view.nbytes, view.readonly)
    elif view.ndim == 1 and not view.strides[0] % view.itemsize:
        place = Layout(offset, view.format, None, view.strides[0] // view.itemsize, len(view),
                       view.readonly)
    else:
        raise Unrebuildable(f"a view of {view.ndim} dimensions with gaps")
    try:
        again = rebuild(view.obj, place)
    except (ValueError, TypeError, NotImplementedError) as exc:  # a format cast refuses
        raise Unrebuildable(f"{type(exc).__name__}: {exc}") from None
    if (again.format, again.shape, again.strides, again.readonly) != (
            view.format, view.shape, view.strides, view.readonly) or (
            view.nbytes and _address(again) != _address(view)):
        raise Unrebuildable("it cannot be laid out again over its exporter")
    return place


def rebuild(exporter, place):
    """A view of ``exporter`` laid out as ``place`` (a ``Layout``)."""
    flat = memoryview(exporter).cast("B")
    if place.shape is not None:
        view = flat[place.offset:place.offset + place.length]
        if place.format != "B" or len(place.shape) != 1:
            view = view.cast(place.format, place.shape)
    else:
        size = struct.calcsize(place.format)
        if place.offset % size:
            raise ValueError("the view's items are not aligned with its exporter's")
        items = flat[:len(flat) - len(flat) % size].cast(place.format)
        start = place.offset // size
        stop = start + place.step * place.length
        view = items[start:stop if stop >= 0 else None:place.step]
    return view.toreadonly() if place.readonly and not view.readonly else view
