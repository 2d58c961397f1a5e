"""numpy arrays in states: views stay views, object arrays copy their elements.

Imported by the copier the first time it meets a numpy type (numpy is never a
dependency). ``ndarray.__deepcopy__`` copies a view as a new array and copies
the elements of an object array with ``copy.deepcopy``, which neither rebinds
cells' classes nor tells the copier which names share them. Here:

* a view is rebuilt over the copy of the array that owns its memory, with the
  same offset, strides, dtype and flags, so writes through it reach the copied
  base (views made by ``as_strided`` and ``sliding_window_view`` included);
* an object array's elements go through the copier like any other value;
* large buffers are kept copy-on-write when the copier has ``buffers``;
* a flat iterator (``a.flat``) iterates over the copied array, from where it was;
* numpy scalars and dtypes are immutable and shared.

Subclasses (``np.matrix``, masked arrays, record arrays) take the generic path,
but for a view: it is made again, as its own type, over the copy of the array
that owns its memory, and its attributes (a masked array's mask, itself a view
maybe) go through the copier. A view of an object array is made again over the
copy of its array where numpy allows it (``OBJECT_VIEWS``), else it becomes an
array of its own holding the same (copied) elements.

What owns an array's memory, where its data starts, and whether two arrays are the
same: ``numpy_memory``.
"""

import collections
import itertools
import weakref

import numpy as np

from ..states import cow
from ..copying.dispatch import ATOMIC, Pending, register, register_same, register_unpinned
from ..values import register_comparer
from .numpy_memory import OBJECT_VIEWS, _flat, _root, address, same_array


def copy_ndarray(copier, arr):
    if copier.lenient and not arr.dtype.hasobject:  # finding parts: its data holds none
        copier.as_is.add(id(arr))
        return _found(arr)
    if arr.dtype.hasobject:
        if arr.dtype.fields is not None:  # structured with object fields: as pickle does
            return copier.reduce_copy(arr)
        if arr.base is not None and OBJECT_VIEWS and not copier.detach_arrays:
            root = _root(arr)
            if root is not arr and type(root) is np.ndarray and root.dtype == object:
                return _copy_object_view(copier, arr, root)
        return _copy_objects(copier, arr)
    root = _root(arr)
    if root is not arr and not copier.detach_arrays and (
            type(root) is np.ndarray or not root.dtype.hasobject):
        new_root = copier.lookup(root)  # (a subclass's root: checked in _view_over)
        if new_root is copier.MISS:
            return _copy_view(copier, arr, root)
        return _view_over(arr, root, new_root)  # at once: the views after a base's first
    if copier.buffers is not None:
        new = _copy_on_write(copier, arr, root)
        if new is not None:
            return new
    if copier.storing:  # an array the cell did not change is the stored one: no copy to make
        origin = copier.origins.get(id(arr))
        if type(origin) is np.ndarray and same_array(arr, origin):
            return origin
    return _copy_data(arr)


def _found(arr):
    """For a copy that only finds the objects a value reaches (``Copier.parts_to_share``):
    an array of numbers is itself, and the array it views is reached too."""
    root = _root(arr)
    if root is not arr:
        yield root
    return arr


def copy_subclass(copier, arr):
    """An instance of an ndarray subclass: a view stays a view (see the module's doc)."""
    if not arr.dtype.hasobject and not copier.detach_arrays:
        root = _root(arr)
        if root is not arr and not root.dtype.hasobject:
            return _copy_subclass_view(copier, arr, root)
    return copier.copy_object(arr)  # its own __deepcopy__ or reduction, as before


def _copy_subclass_view(copier, arr, root):
    """Over the copy of its base if that can be a buffer (so ``r.base is z`` holds, as
    numpy keeps a subclass view's base), else over the copy of its root."""
    new_root = yield root
    if new_root.strides != root.strides or new_root.shape != root.shape:
        # the root's copy has another layout (its own reduction made it): the view's
        # offsets mean nothing there, so the view is copied on its own
        return (yield _Detached(arr))
    new = None
    base = arr.base
    if base is not root and isinstance(base, np.ndarray):
        new_base = yield base
        try:
            new = np.ndarray.__new__(type(arr), arr.shape, arr.dtype, buffer=new_base,
                                     offset=address(arr) - address(base), strides=arr.strides)
        except (ValueError, TypeError, BufferError):  # not contiguous, or before its start
            new = None
    if new is None:
        new = np.ndarray.__new__(type(arr), arr.shape, arr.dtype, buffer=new_root,
                                 offset=address(arr) - address(root), strides=arr.strides)
    _with_flags(new, arr)
    copier.memo[id(arr)] = new  # before its attributes: one may refer back to it
    attributes = getattr(arr, "__dict__", None)
    if attributes:
        new.__dict__.update((yield dict(attributes)))
    return new


class _Detached:
    """Asks the copier for ``arr`` copied as the generic path copies it."""

    __slots__ = ("arr",)

    def __init__(self, arr):
        self.arr = arr


def _copy_detached(copier, detached):
    return copier.copy_object(detached.arr)


def _copy_on_write(copier, arr, root):
    """``arr`` on a mapping (see ``cow``), or None if it is not kept copy-on-write.

    Copying in maps the stored blob; storing keeps the stored mapping if the cell
    wrote none of its pages. ``arr`` is a root, or a detached view (then it gets a
    mapping of its own, which is what detached means).
    """
    buffers, mapping = copier.buffers, cow.mapping_of(root.base)
    if mapping is not None:
        if mapping.stored:
            return _on(arr, buffers.map_in(mapping), address(arr) - mapping.address)
        if copier.storing:
            stored = buffers.store(mapping)
            _count(copier, stored, reused=stored is mapping.source)
            return _on(arr, stored, address(arr) - mapping.address)
        return None
    if not arr.nbytes or arr.nbytes < buffers.threshold or not copier.storing:
        return None  # (an empty buffer has no page to map)
    strides = np.empty_like(arr, order="K").strides  # the layout of a copy; touches no page

    def fill(mapping):
        np.copyto(np.ndarray(arr.shape, arr.dtype, buffer=mapping, strides=strides), arr)

    contiguous = arr.flags.c_contiguous or arr.flags.f_contiguous  # laid out as its copy
    stored = buffers.new(fill, arr.nbytes,
                         arr.ravel(order="K").view(np.uint8) if contiguous else None)
    _count(copier, stored, reused=False)
    return _on(arr, stored, 0, strides)


def _count(copier, mapping, reused):
    """Tell the copier's bookkeeping the bytes a stored mapping holds, and how many are new."""
    if copier.covariables is not None:
        new = 0 if reused else len(mapping.overlay) * cow.PAGE or len(mapping)
        copier.covariables.add_bytes(copier.label, new, True)
        copier.covariables.add_bytes(copier.label, len(mapping) - new, False)


def _on(arr, mapping, offset, strides=None):
    """An array like ``arr`` on ``mapping``, ``offset`` bytes in."""
    new = np.ndarray(arr.shape, arr.dtype, buffer=mapping, offset=offset,
                     strides=arr.strides if strides is None else strides)
    return _with_flags(new, arr)


def _with_flags(new, arr):
    """``new``, read-only or unaligned if ``arr`` is (code may clear either flag)."""
    if not arr.flags.writeable:
        new.flags.writeable = False
    if not arr.flags.aligned:
        new.flags.aligned = False
    return new


def _copy_view(copier, arr, root):
    return _view_over(arr, root, (yield root))


def _view_over(arr, root, new_root):
    """``arr``, a view of ``root``, made again over ``new_root``, the copy of ``root``."""
    if new_root.strides != root.strides or new_root.shape != root.shape:
        return _copy_data(arr)  # a subclass root copied by its reduction, laid out anew
    view = np.ndarray(arr.shape, arr.dtype, buffer=new_root,
                      offset=address(arr) - address(root), strides=arr.strides)
    return _with_flags(view, arr)


def _copy_object_view(copier, arr, root):
    """A view of an object array, made again over the copy of the array it views: writing
    an element through it changes that copy, as in one process. Copied once, the
    elements stay shared between the two."""
    new_root = yield root
    if type(new_root) is not np.ndarray or new_root.strides != root.strides:
        return (yield _Detached(arr))  # (laid out anew: the view's offsets mean nothing there)
    return _view_over(arr, root, new_root)


def _copy_data(arr):
    """A new array owning a copy of ``arr``'s bytes, laid out the same way."""
    return _with_flags(arr.copy(order="K"), arr)


# Stored object arrays that hold only strings, numbers and other atomic values: id -> a
# weak reference to the array. A stored array is never written, so this stays true while
# it lives, and copying it in need not read each element's type again (19 ms a million,
# of 27 for the copy).
_ONLY_ATOMIC = {}


def remember_only_atomic(arr):
    """``arr``, a stored object array no code writes, holds only ``ATOMIC`` values."""
    key = id(arr)
    _ONLY_ATOMIC[key] = weakref.ref(arr, lambda _, key=key: _ONLY_ATOMIC.pop(key, None))


def _only_atomic(arr, flat):
    known = _ONLY_ATOMIC.get(id(arr))
    if known is not None and known() is arr:
        return True
    return flat.size and type(flat[0]) in ATOMIC and set(map(type, flat)) <= ATOMIC


def _copy_objects(copier, arr):
    if copier.storing and arr.base is None:
        # Holding its origin's very objects, it is its origin (1 ms a million, where
        # copying them to compare the copy costs 30).
        origin = copier.origins.get(id(arr))
        if type(origin) is np.ndarray and same_array(arr, origin):
            return origin
    new = np.empty_like(arr, order="K")
    copier.memo[id(arr)] = new  # before the elements: one may refer back to the array
    source, target = _flat(arr), _flat(new)
    if _only_atomic(arr, source):
        target[...] = source  # strings and numbers, shared as the loop shares them: 3x faster
        if copier.storing:
            remember_only_atomic(new)
        return _finish_objects(arr, new)
    attempt = copier.attempt
    # The elements are values of their own: arrays among them keep their views.
    detached, copier.detach_arrays = copier.detach_arrays, 0
    try:
        for index in range(source.size):
            item = source[index]
            if type(item) not in ATOMIC:
                item = attempt(item)
                if type(item) is Pending:
                    return _copy_objects_rest(copier, arr, new, (source, target, index, item),
                                              detached)
            target[index] = item
    finally:
        copier.detach_arrays = detached
    return _finish_objects(arr, new)


def _copy_objects_rest(copier, arr, new, progress, detached):
    source, target, start, pending = progress
    copier.detach_arrays = 0
    try:
        target[start] = yield pending
        attempt = copier.attempt
        for index in range(start + 1, source.size):
            item = source[index]
            if type(item) not in ATOMIC:
                item = attempt(item)
                if type(item) is Pending:
                    item = yield item
            target[index] = item
    finally:
        copier.detach_arrays = detached
    return _finish_objects(arr, new)


def _finish_objects(arr, new):
    return _with_flags(new, arr)


def copy_flatiter(copier, it):
    """``a.flat``: the copied array's, advanced as far (a flatiter cannot seek)."""
    new = (yield it.base).flat
    collections.deque(itertools.islice(new, it.index), maxlen=0)
    return new


def _share(copier, obj):
    return obj


# -- comparing values (``values``: what a diff calls unchanged) --

CHUNK_BYTES = 1 << 24  # bytes of each side compared at a time: equal arrays never copy whole


def equal_arrays(a, b, budget):
    """Pairs for ``values.equal``: none if two exact ndarrays have the same shape, dtype
    and elements (NaN equal to NaN), the pairs of elements of object arrays."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if a.dtype.hasobject:
        budget.spend(objects=a.size)
        if a.dtype.fields is not None:
            return zip(a.ravel().tolist(), b.ravel().tolist())
        return zip(a.flat, b.flat)
    budget.spend(data=a.nbytes)
    if a.ndim == 0 or a.size == 0:
        return () if _same_elements(a, b) else None
    rows = max(1, CHUNK_BYTES // max(1, a[0].nbytes))
    for start in range(0, len(a), rows):
        if not _same_elements(a[start:start + rows], b[start:start + rows]):
            return None  # the first difference ends it
    return ()


def _same_elements(a, b):
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # no NaN in this dtype (strings, structured): plain equality
        return bool(np.array_equal(a, b))


def equal_scalars(a, b, budget):
    """Numpy scalars and dtypes: equal as one-element arrays of their dtype."""
    if isinstance(a, np.dtype):
        return () if a == b else None
    if a.dtype != b.dtype:
        return None
    return () if _same_elements(np.asarray(a), np.asarray(b)) else None


register(np.ndarray, copy_ndarray)
register(np.ndarray, copy_subclass, subclasses=True)  # (exact ndarrays: copy_ndarray)
register(_Detached, _copy_detached)
register_same(np.ndarray, same_array)
register_unpinned(np.ndarray)  # a.resize() refuses while anything else refers to a
register(np.flatiter, copy_flatiter)
register(np.dtype, _share, subclasses=True)
for _scalar in (np.bool_, np.number, np.datetime64, np.timedelta64, np.str_, np.bytes_):
    register(_scalar, _share, subclasses=True)  # immutable; np.void can be a view, so not it
    register_comparer(_scalar, equal_scalars, subclasses=True)
register_comparer(np.ndarray, equal_arrays)  # subclasses (masked, ...) by their reduction
register_comparer(np.dtype, equal_scalars, subclasses=True)
