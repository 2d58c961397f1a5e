"""The memory budget of stored objects (``--max-memory``): a saved group's objects are
kept by a ``GroupRecord``, which a budget may drop, least recently used first; the next
use loads them again from the state directory."""

import collections
import functools
import threading
import weakref


class GroupRecord:
    """The objects of one stored group: in memory, or loaded from the state directory on
    use (``store.load_group``), counted in ``store.budget``."""

    def __init__(self, store, group_id, weight, values=None, pinned=False):
        """``pinned``: its objects are never evicted. A group with a name that could not
        be saved is (its pickle lacks that name's object, which the others may share)."""
        self.store, self.group_id, self.weight = store, group_id, weight
        self.pinned = pinned
        self._values = values
        self._lock = threading.Lock()
        if values is not None:
            store.budget.loaded(self)

    def values(self):
        values = self._values
        if values is None:
            with self._lock:
                if self._values is None:
                    self._values = self.store.load_group(self.group_id)
                values = self._values
            self.store.budget.loaded(self)
        else:
            self.store.budget.used(self)
        return values

    def evict(self):
        self._values = None


class Budget:
    """The records whose objects are in memory, least recently used first; past
    ``max_memory`` bytes (None: no limit), the oldest are evicted.

    Records are held weakly: a record whose states were all deleted goes, and its
    objects with it (it takes its weight out of the count as it goes). Pinned records
    count, but are never evicted: the others make room for them."""

    def __init__(self, max_memory=None):
        self.max_memory = max_memory
        self.bytes = 0
        self._lock = threading.Lock()
        self._loaded = collections.OrderedDict()  # id(GroupRecord) -> a weak reference to it
        self._pinned = {}  # the same, for pinned records

    def loaded(self, record):
        """``record``'s objects are in memory now; drop the least used if over budget."""
        if self.max_memory is None:
            return
        key = id(record)
        with self._lock:
            if key not in self._loaded and key not in self._pinned:
                self.bytes += record.weight
                held = self._pinned if record.pinned else self._loaded
                held[key] = weakref.ref(record, functools.partial(self._forget, key,
                                                                  record.weight))
            if key in self._loaded:
                self._loaded.move_to_end(key)
            while self.bytes > self.max_memory and len(self._loaded) > 1:
                _, oldest = self._loaded.popitem(last=False)
                oldest = oldest()
                if oldest is not None:
                    self.bytes -= oldest.weight
                    oldest.evict()

    def used(self, record):
        if self.max_memory is not None:
            with self._lock:
                if id(record) in self._loaded:
                    self._loaded.move_to_end(id(record))

    def _forget(self, key, weight, ref):
        """A loaded record was freed (the collector may call this in any thread)."""
        with self._lock:
            for held in (self._loaded, self._pinned):
                if held.get(key) is ref:
                    del held[key]
                    self.bytes -= weight
