"""pandas objects in states: copied the way pickle rebuilds them.

Imported by the copier the first time it meets a pandas type (pandas is never
a dependency). ``DataFrame.__deepcopy__`` is ``copy(deep=True)``, which leaves
the objects in object columns shared (a branch appending to a list in a cell
changed its parent state) and gives every name its own copy of a shared Index.
Here frames, series, indexes and extension arrays are rebuilt from their
reduce value, as pickle does, through the copier: an Index shared by two names
stays one object, object columns copy their contents like any other value,
and cells' classes inside them are the copied classes.

Inside a block manager, arrays are detached (``copier.detach_arrays``): each
block gets memory of its own, as after pickle. pandas tracks which blocks share
memory to copy before writing (copy-on-write); that bookkeeping is not carried
over, so blocks must not share memory after a copy. One consequence: a frame
and a view of it (pandas < 3 only: ``s = df['a']`` then ``s[0] = 1``) stop
sharing memory in the next cell.
"""

import pandas as pd
from pandas.api.extensions import ExtensionArray
from pandas.core.generic import NDFrame
from pandas.core.internals.managers import BaseBlockManager

from .copier import register
from .covariables import count_shallow


def copy_by_reduce(copier, obj):
    return copier.reduce_copy(obj)


def copy_manager(copier, manager):
    copier.detach_arrays += 1
    try:
        return (yield from copier.reduce_copy(manager))
    finally:
        copier.detach_arrays -= 1


def _share(copier, obj):
    return obj


for _cls in (NDFrame, pd.Index, ExtensionArray):
    register(_cls, copy_by_reduce, subclasses=True)
    count_shallow(_cls)
register(BaseBlockManager, copy_manager, subclasses=True)
for _immutable in (pd.Timestamp, pd.Timedelta, pd.Period, pd.Interval, type(pd.NaT), type(pd.NA)):
    register(_immutable, _share, subclasses=True)
