"""numpy arrays' memory: the array that owns it, where an array's data starts, whether
numpy makes object arrays over another's memory, and whether two arrays are the same.

What the copier's numpy support (``numpy.py``) builds views with, and what the state
directory's pickles (``states.persist``, ``states.object_arrays``) read arrays by.
Imported only once numpy is: it imports numpy.
"""

import ctypes

import numpy as np

try:  # numpy >= 2
    from numpy.lib._stride_tricks_impl import DummyArray as _StridedBase
except ImportError:  # numpy 1
    from numpy.lib.stride_tricks import DummyArray as _StridedBase


def _root(arr):
    """The array that owns ``arr``'s memory (or holds the foreign buffer it views).

    ``as_strided`` and ``sliding_window_view`` make views whose base is a
    DummyArray over the array they view: the root is that array's.
    """
    while True:
        base = arr.base
        if type(base) is _StridedBase:
            base = base.base
        if not isinstance(base, np.ndarray):
            return arr
        arr = base


def _interface_address(arr):
    return arr.__array_interface__["data"][0]


def _pointer_reader():
    """What reads an array's data address: its C struct's pointer, right after the object
    header (what ``PyArray_DATA`` reads: 0.2 us, not the 1 us of ``__array_interface__``,
    which builds a dict), if the two agree here."""
    header = object.__basicsize__

    def pointer(arr):
        return ctypes.c_void_p.from_address(id(arr) + header).value or 0

    base = np.arange(12.0).reshape(3, 4)
    probes = (base, base[1:, ::2], base.T[2], np.zeros(0), np.frombuffer(b"xy", np.uint8)[1:])
    if all(pointer(each) == _interface_address(each) for each in probes):
        return pointer
    return _interface_address


address = _pointer_reader()  # the address of an array's first byte


def _object_views():
    """True if numpy makes an object array over another's memory, as a view of it (numpy
    2 does; ``frombuffer`` never does for objects)."""
    try:
        items = np.array([None, 1, 2], dtype=object)
        view = np.ndarray((2,), dtype=object, buffer=items, offset=items.itemsize)
    except (TypeError, ValueError):
        return False
    return view.base is items and view[1] == 2


OBJECT_VIEWS = _object_views()


def same_array(new, origin):
    """True if ``new`` has the dtype, layout and contents of ``origin``."""
    if (new.dtype != origin.dtype or new.shape != origin.shape or new.strides != origin.strides
            or new.flags.writeable != origin.flags.writeable
            or new.flags.aligned != origin.flags.aligned):
        return False
    if new.base is not None or origin.base is not None:  # views: of the same memory
        return new.base is origin.base and address(new) == address(origin)
    if new.dtype.hasobject:
        return _same_objects(new, origin)
    return new.tobytes(order="A") == origin.tobytes(order="A")


def _same_objects(new, origin):
    """True if two object arrays of one layout hold the very same objects, in order."""
    if new.dtype == object and new.flags.c_contiguous and origin.flags.c_contiguous:
        # The pointers they hold, compared as integers: 1 ms, not 40, for a million.
        return not new.size or bool(np.array_equal(_pointers(new), _pointers(origin)))
    return all(a is b for a, b in zip(_flat(new), _flat(origin)))


def _pointers(arr):
    """A C-contiguous object array's elements as the addresses it holds: a view of its
    memory, to read while ``arr`` lives."""
    return np.frombuffer((ctypes.c_char * arr.nbytes).from_address(address(arr)),
                         dtype=np.intp)


def _flat(arr):
    """A one-dimensional view of ``arr`` in memory order (``arr`` owns contiguous memory)."""
    if arr.flags.c_contiguous:
        return arr.reshape(-1)
    if arr.flags.f_contiguous:
        return arr.T.reshape(-1)
    return arr.ravel(order="K")  # a copy, read only: the target is made contiguous
