"""How states are stored: their names, entries, groups and layers.

A stored state maps each name to an ``Entry``: the stored object, the group of
names whose objects it shares (co-variables), and why it is shared by
reference, if it is. No running code ever reaches a stored object, so states
may share objects freely: a child state is its parent's ``Namespace`` plus the
entries its cell changed (``Namespace`` layers, flattened when chains grow).

An execution gets its private copy of one from ``working``.
"""

import builtins
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from ..runtime.places import ABSENT

MAX_DEPTH = 16  # a Namespace over more layers than this is flattened
DELETED = None  # what a layer holds for a name its cell deleted
GONE = type("Gone", (), {"__repr__": lambda self: "<not restored>"})()  # a lost name, restored
NOT_EXPORTED = "not exported: "  # begins why a name of an imported state is lost


@dataclass(frozen=True)
class Group:
    """Names whose values share objects; the bytes their objects take in all, and
    the bytes of those the state that made the group stored anew."""

    names: frozenset
    weight: int = 0
    fresh: int = 0


class Entry:
    """A stored name: its object, its group, why it is shared by reference (if it is),
    and why it could not be saved to disk (if it could not: ``lost``).

    Its object is either held here or, for a state saved to disk, in a ``record``
    that loads the group's objects on first use and may drop them again.
    """

    __slots__ = ("name", "group", "shared", "lost", "_value", "record")

    def __init__(self, name, value, group, shared=None, lost=None, record=None):
        self.name, self.group, self.shared, self.lost = name, group, shared, lost
        self._value, self.record = value, record

    @property
    def value(self):
        if self.record is not None:
            return self.record.values()[self.name]
        return self._value

    def saved(self, record, lost=None):
        """This entry, its object now kept by ``record`` (a store's), or lost on disk."""
        return Entry(self.name, None if lost is None else self._value, self.group,
                     self.shared, lost, None if lost is not None else record)


class Namespace:
    """A stored state's names: a base Namespace plus the entries its cell changed.

    Immutable to readers. ``absorb_base`` folds the base in, for when the state
    that owned it is deleted (its objects that no one uses are then freed).
    """

    __slots__ = ("_base", "_changes", "_depth", "_lost", "layer_id", "__weakref__")

    def __init__(self, base, changes):
        if base is not None and base._depth >= MAX_DEPTH:
            base, changes = None, base._merged(changes)
        self._base, self._changes = base, changes
        self._depth = 0 if base is None else base._depth + 1
        self._lost = None  # lost(), once asked
        self.layer_id = None  # its row in a state directory (``store``), once saved

    def lost(self):
        """``{name: why}`` for its names that could not be saved or exported
        (``Entry.lost``), its base's included; do not change it. Worked out once,
        from the base's, the first time it is asked (a layer is saved before that)."""
        lost = self._lost
        if lost is None:
            lost = {} if self._base is None else self._base.lost()
            own = self._changes
            own_lost = {name: entry.lost for name, entry in own.items()
                        if entry is not DELETED and entry.lost}
            if own_lost or not own.keys().isdisjoint(lost):
                lost = {name: why for name, why in lost.items() if name not in own}
                lost.update(own_lost)
            self._lost = lost
        return lost

    def get(self, name):
        """The Entry of ``name``, or None."""
        layer = self
        while layer is not None:
            entry = layer._changes.get(name, layer)
            if entry is not layer:
                return entry
            layer = layer._base
        return None

    def entries(self):
        """``{name: Entry}`` in order: the base's order, then names added later."""
        return self._merged({})

    def _merged(self, changes):
        flat = {} if self._base is None else self._base._merged({})
        for layer_changes in (self._changes, changes):
            for name, entry in layer_changes.items():
                if entry is DELETED:
                    flat.pop(name, None)
                else:
                    flat[name] = entry
        return flat

    def absorb_base(self):
        """Take the base's changes in, so the base can be freed."""
        base = self._base
        if base is None:
            return
        changes = dict(base._changes)
        changes.update(self._changes)
        self._changes = changes  # first: a reader between the two lines sees both
        self._base = base._base
        self._depth = base._depth

    @property
    def base(self):
        return self._base

    def own_entries(self):
        """The entries this layer itself holds (DELETED for names it deletes)."""
        return dict(self._changes)

    def own(self, name):
        return self._changes[name]

    def replace_own(self, name, entry):
        """Swap one of its entries for an equal one (a saved one); before it is shared."""
        self._changes[name] = entry
        self._lost = None


def fresh_namespace():
    dunders = {"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
               "__builtins__": builtins}
    return Namespace(None, {name: Entry(name, value, Group(frozenset([name])))
                            for name, value in dunders.items()})


@dataclass(frozen=True)
class State:
    """An immutable snapshot. No running code ever reaches its objects."""

    name: str
    names: Namespace
    parent: Optional[str]
    code: str
    new_bytes: int = 0    # bytes of the objects it holds that its parent does not
    total_bytes: int = 0  # bytes of all the objects it holds
    meta: dict = field(default_factory=dict)  # {"checkpoint": True, "progress": ...} if one
    created: float = field(default_factory=time.time)  # seconds since the epoch
    process: Optional[object] = None  # runtime.settings.Process: settings and context

    def peek(self, name):
        """The stored object of ``name`` (not a copy: only for telling what it is);
        ``places.ABSENT`` if the state has none."""
        entry = self.names.get(name)
        return ABSENT if entry is None or entry.value is GONE else entry.value

    @property
    def timestamp(self):
        """When the state was stored, in ISO 8601 (UTC)."""
        return datetime.fromtimestamp(self.created, timezone.utc).isoformat()


def sizes(parent, changes):
    """``(new_bytes, total_bytes)`` of the state that ``changes`` make of ``parent``."""
    replaced = {id(entry.group): entry.group for name in changes
                for entry in [parent.names.get(name)] if entry is not None}
    added = {id(entry.group): entry.group for entry in changes.values() if entry is not DELETED}
    new = sum(group.fresh for group in added.values())
    total = (parent.total_bytes - sum(group.weight for group in replaced.values())
             + sum(group.weight for group in added.values()))
    return new, max(total, new)
