"""Object arrays in saved states (``persist``'s pickler hands them here).

numpy pickles an object array as an empty array whose memory and elements come with its
state, after its elements are loaded; and a view of an object array as a copy. So a view
of one came back an array of its own, and a view made over the empty array (met among its
elements) would point at memory numpy frees. Here an array is made with its final shape
and memory first and filled after, and a view is made again over its array. The
functions that make them are named in saved states: keep their names and places.
"""

import pickle

PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})  # no reductions


def reduce_array(arr):
    """An object array that owns its memory. Of strings and numbers only (a pandas text
    column): a pickle of its own, made without the state pickler's hooks, which pickle
    calls for every element (a million strings: 186 ms, not 234). Else: made empty, its shape
    and memory final, then filled in place, so that a view of it or an element that
    refers back to it, met while its elements load, finds its memory (numpy's own pickle
    makes the array empty and gives it memory only once its elements are loaded).
    NotImplemented (numpy's own pickle) if its memory is not contiguous."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return NotImplemented
    flat = arr.ravel(order="K")  # (no copy: contiguous) in memory order
    if arr.size and type(flat[0]) in PLAIN and set(map(type, flat)) <= PLAIN:
        return _load_plain, (pickle.dumps(arr, protocol=5),)
    order = "C" if arr.flags.c_contiguous else "F"
    return (_empty_objects, (arr.shape, order), (flat.tolist(), arr.flags.writeable),
            None, None, _fill_objects)


def _load_plain(data):
    """An array of strings and numbers only, as ``reduce_array`` saved it (states saved
    before this function was named hold ``pickle.loads``, which loads them as well): known
    to hold only such values, so copying it in need not read their types again."""
    from ..libraries.numpy import remember_only_atomic
    arr = pickle.loads(data)
    remember_only_atomic(arr)
    return arr


def _empty_objects(shape, order):
    import numpy
    return numpy.empty(shape, dtype=object, order=order)


def _fill_objects(arr, state):
    from ..libraries.numpy_memory import _flat
    items, writeable = state
    flat = _flat(arr)  # (a view: the array is contiguous)
    for index, item in enumerate(items):  # one by one: a list item is not a sequence to unpack
        flat[index] = item
    if not writeable:
        arr.flags.writeable = False


def reduce_view(view):
    """A view of an object array, made again over that array (pickled once, for all its
    views: see ``reduce_array``); NotImplemented (a copy, as numpy pickles it) where
    numpy cannot make one."""
    from ..libraries.numpy_memory import OBJECT_VIEWS, _root, address  # (numpy is imported)
    root = _root(view)
    if (not OBJECT_VIEWS or root is view or type(root) is not type(view)
            or root.dtype != view.dtype
            or not (root.flags.c_contiguous or root.flags.f_contiguous)):
        return NotImplemented
    return _make_object_view, (root, address(view) - address(root), view.shape, view.strides,
                               view.flags.writeable)


def _make_object_view(root, offset, shape, strides, writeable):
    import numpy
    view = numpy.ndarray(shape, object, buffer=root, offset=offset, strides=strides)
    if not writeable:
        view.flags.writeable = False
    return view
