"""pandas objects in states: copied the way pickle rebuilds them.

Imported by the copier the first time it meets a pandas type (pandas is never
a dependency). ``DataFrame.__deepcopy__`` is ``copy(deep=True)``, which leaves
the objects in object columns shared (a branch appending to a list in a cell
changed its parent state) and gives every name its own copy of a shared Index.
Here frames, series, indexes and extension arrays are rebuilt from their
reduce value, as pickle does, through the copier: an Index shared by two names
stays one object, object columns copy their contents like any other value,
and cells' classes inside them are the copied classes.

Under copy-on-write (pandas >= 3, or pandas 2 with ``mode.copy_on_write``
set to True) arrays inside a block manager are detached
(``copier.detach_arrays``): each block gets memory of its own, as after pickle.
pandas tracks which blocks share memory to copy before writing; that
bookkeeping is not carried over, so blocks must not share memory after a copy,
and under copy-on-write no user can tell. Without copy-on-write (pandas 2's
default) writes go through shared memory (``col = df['a']`` then
``col[0] = 1`` changes ``df``), so there blocks are copied like any other
arrays: a view stays a view of its copied base.
"""

import pandas as pd
from pandas.api.extensions import ExtensionArray
from pandas.core.generic import NDFrame
from pandas.core.internals.managers import BaseBlockManager, BlockManager, SingleBlockManager

import numpy as np

from ..copying.dispatch import VALUES, equal_values, register, register_same
from ..copying.covariables import count_shallow
from ..values import register_comparer


def copy_by_reduce(copier, obj):
    return copier.reduce_copy(obj)


def _copy_on_write():
    if _PANDAS_3:
        return True
    try:
        return pd.options.mode.copy_on_write is True
    except (AttributeError, KeyError):  # pandas 1: no such option, no copy-on-write
        return False


_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def copy_manager(copier, manager):
    if not _copy_on_write():
        return (yield from copier.reduce_copy(manager))
    copier.detach_arrays += 1
    try:
        return (yield from copier.reduce_copy(manager))
    finally:
        copier.detach_arrays -= 1


def same_manager(new, origin):
    """True if the block manager ``new`` (a copy just built) is what ``origin`` is: its
    axes are the origin's Indexes and its blocks hold the origin's arrays at the same
    places. The copier finds most of a frame a cell only read to be the stored objects
    themselves (arrays, Indexes, blocks: ``Reducing._reduced_origin``), but a manager's
    axes list is made anew by its constructor, and a Series' manager reduces to Indexes
    made for the occasion (``items[indexer]``, as pandas 2's managers do), so without
    this check the manager, and the frame holding it, would be stored again, and saved
    again, after every cell that only read it."""
    return (len(new.axes) == len(origin.axes) and len(new.blocks) == len(origin.blocks)
            and all(a is b for a, b in zip(new.axes, origin.axes))
            and all(a is b or _same_block(a, b) for a, b in zip(new.blocks, origin.blocks)))


def same_frame(new, origin):
    """True if the DataFrame or Series ``new`` (a copy just built) is what ``origin`` is:
    the same manager (``same_manager``), name and metadata, and equal ``attrs`` and flags.
    Its ``attrs`` is compared by value: pandas copies the dict it is given, in pickling
    as in copying, so a frame's copy never holds its origin's ``attrs`` dict itself."""
    mine, theirs = new.__getstate__(), origin.__getstate__()
    return list(mine) == list(theirs) and all(
        mine[key] is theirs[key] or _same_value(mine[key], theirs[key]) for key in mine)


def same_backed_array(new, origin):
    """True if the extension array ``new`` (a copy just built) that keeps its values in a
    numpy array (dates, categories, strings) is what ``origin`` is: the same array and
    dtype, and its other attributes the same but for its ``_cache``, of values it
    computes when asked (a date array's resolution, once a cell has read a date)."""
    if new._ndarray is not origin._ndarray or new._dtype is not origin._dtype:
        return False
    mine, theirs = _uncached(new), _uncached(origin)
    return list(mine) == list(theirs) and all(
        mine[key] is theirs[key] or _same_value(mine[key], theirs[key]) for key in mine)


def _uncached(array):
    return {key: value for key, value in getattr(array, "__dict__", {}).items()
            if key != "_cache"}


def same_multi_index(new, origin):
    """True if the MultiIndex ``new`` (a copy just built) is what ``origin`` is: its levels
    hold the origin's levels' values (its constructor makes each level a new Index over
    them), its codes are equal (pandas makes them read-only copies), and its names and
    sort order are the same."""
    if (len(new.levels) != len(origin.levels) or list(new.names) != list(origin.names)
            or new.sortorder != origin.sortorder):
        return False
    return (all(_same_index_values(a, b) for a, b in zip(new._levels, origin._levels))
            and all(a.dtype == b.dtype and np.array_equal(a, b)
                    for a, b in zip(new._codes, origin._codes)))


def same_categorical_index(new, origin):
    """True if the CategoricalIndex ``new`` (a copy just built) is what ``origin`` is: its
    constructor makes a new Categorical of the one it is given, so its values are
    compared (an Index is not written in place)."""
    return _same_index_values(new, origin)


def _same_index_values(a, b):
    """An Index over the same values as ``b``: its array itself, or for categories, equal
    codes over equal categories in the same order."""
    if type(a) is not type(b) or not (a.name is b.name or _same_value(a.name, b.name)):
        return False
    if a._data is b._data:
        return True
    if not isinstance(a, pd.CategoricalIndex):
        return False
    x, y = a._data, b._data
    return (type(x) is type(y) and x.ordered == y.ordered
            and x.categories.dtype == y.categories.dtype and x.categories.equals(y.categories)
            and x._ndarray.dtype == y._ndarray.dtype and np.array_equal(x._ndarray, y._ndarray))


def _backed_array_types():
    try:
        from pandas.core.arrays._mixins import NDArrayBackedExtensionArray
    except ImportError:  # (pandas 1.x before it)
        return []
    found, queue = [], [NDArrayBackedExtensionArray]
    while queue:
        cls = queue.pop()
        found.append(cls)
        queue.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__.partition(".")[0] == "pandas"]


def _same_value(a, b):
    """Equal, for a value that is its value (a number, a string), or a list or dict
    holding the same objects or such values (a frame's attrs, flags, metadata names)."""
    if type(a) is not type(b):
        return False
    if type(a) in VALUES:
        return equal_values(a, b)
    if type(a) is list:
        return len(a) == len(b) and all(x is y or type(x) in VALUES and _same_value(x, y)
                                        for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(
            a[key] is b[key] or type(a[key]) in VALUES and _same_value(a[key], b[key])
            for key in a)
    return False


def _same_block(new, origin):
    if type(new) is not type(origin) or new.values is not origin.values or new.ndim != origin.ndim:
        return False
    here, there = new.mgr_locs.indexer, origin.mgr_locs.indexer
    if type(here) is slice:
        return here == there
    return type(there) is np.ndarray and np.array_equal(here, there)


def _share(copier, obj):
    return obj


def equal_frames(a, b, budget):
    """Pairs for ``values.equal``: a DataFrame, Series or Index equals another of its type
    with the same shape, dtypes, axes (compared as Indexes: values, dtype, names) and
    elements (``equals``: NaN equal to NaN), and the same name and ``attrs``."""
    if a.shape != b.shape:
        return None
    budget.spend(data=int(a.memory_usage(deep=False).sum()) if isinstance(a, pd.DataFrame)
                 else int(a.memory_usage(deep=False)))
    if isinstance(a, pd.Index):
        same_dtype, pairs = a.dtype == b.dtype, [(list(a.names), list(b.names))]
    elif isinstance(a, pd.Series):
        same_dtype, pairs = a.dtype == b.dtype, [(a.name, b.name), (a.index, b.index)]
    else:
        same_dtype = a.dtypes.equals(b.dtypes)
        pairs = [(a.columns, b.columns), (a.index, b.index)]
    if not same_dtype or not a.equals(b):
        return None
    return pairs + ([] if isinstance(a, pd.Index) else [(a.attrs, b.attrs)])


for _cls in (NDFrame, pd.Index, ExtensionArray):
    register(_cls, copy_by_reduce, subclasses=True)
    count_shallow(_cls)
register(BaseBlockManager, copy_manager, subclasses=True)
for _cls in (BlockManager, SingleBlockManager):
    register_same(_cls, same_manager)
for _cls in (pd.DataFrame, pd.Series):
    register_same(_cls, same_frame)
for _cls in _backed_array_types():
    register_same(_cls, same_backed_array)
register_same(pd.MultiIndex, same_multi_index)
register_same(pd.CategoricalIndex, same_categorical_index)
for _cls in (pd.DataFrame, pd.Series, pd.Index):
    register_comparer(_cls, equal_frames, subclasses=True)
for _immutable in (pd.Timestamp, pd.Timedelta, pd.Period, pd.Interval, type(pd.NaT), type(pd.NA)):
    register(_immutable, _share, subclasses=True)
