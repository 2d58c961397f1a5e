"""``threading.local`` objects in states: one logical thread per lineage.

Imported by the copier the first time it meets a ``_thread._local`` (what
``threading.local`` is). Cells run on pooled threads, so the values a cell put
in a local would be gone in the next cell (another thread), or show up in an
unrelated state's cell (the same thread). As in a process that ran the state's
lineage on its main thread, a state's local holds what its cells' thread saw:

- copied out of a running cell (into a state), a local's copy keeps a copy of
  the values the cell's thread sees in it (``_LINEAGE``);
- copied into a running cell, the copy is a new local whose values on the
  cell's thread are a copy of those, so a child sees its parent's values and
  a branch's changes reach neither its parent nor its siblings.

Other threads a cell starts see a local as Python makes them: empty (or as the
subclass's ``__init__`` fills it). A subclass whose ``__init__`` needs
arguments cannot be made anew: such a local stays shared, as before.
A state directory and an export archive keep a local as its class and those values
(``states.persist``), so it comes back after a restart or an import.
"""

import _thread
import weakref

from ..copying.dispatch import register

_LINEAGE = weakref.WeakKeyDictionary()  # a stored local -> the values its lineage's thread saw


def copy_local(copier, local):
    cls = yield type(local)  # a class a cell defined is copied with its state, as any
    new = cls.__new__(cls)
    copier.memo[id(local)] = new
    if copier.storing:  # out of a running cell: what the cell's thread sees in it now
        values = dict(local.__dict__)
    else:               # into a running cell: what the state's lineage saw
        values = _LINEAGE.get(local, {})
    copied = yield values
    if copier.storing:
        _LINEAGE[new] = copied
    else:
        new.__dict__.update(copied)  # this thread is the cell's
    return new


def lineage_values(local):
    """The values a stored local's lineage saw (what a state directory keeps of it)."""
    return _LINEAGE.get(local, {})


def stored_local(cls, values):
    """A stored local of class ``cls`` whose lineage saw ``values`` (loaded from disk)."""
    local = cls.__new__(cls)
    _LINEAGE[local] = values
    return local


register(_thread._local, copy_local, subclasses=True)
