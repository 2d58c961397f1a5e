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
from pandas.core.internals.managers import BaseBlockManager

from ..copying.dispatch import register
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
for _cls in (pd.DataFrame, pd.Series, pd.Index):
    register_comparer(_cls, equal_frames, subclasses=True)
for _immutable in (pd.Timestamp, pd.Timedelta, pd.Period, pd.Interval, type(pd.NaT), type(pd.NA)):
    register(_immutable, _share, subclasses=True)
