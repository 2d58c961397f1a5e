"""How states are stored, and how an execution gets its private copy of one.

A stored state maps each name to an ``Entry``: the stored object, the group of
names whose objects it shares (co-variables), and why it is shared by
reference, if it is. No running code ever reaches a stored object, so states
may share objects freely: a child state is its parent's ``Namespace`` plus the
entries its cell changed (``Namespace`` layers, flattened when chains grow).

An execution runs on a plain dict. ``Working.open`` copies in, before the cell
runs, the names its code may touch (``code_needs``), with their groups and one
memo per group so aliases stay aliases, and the names that the functions
copied in may touch in turn. Code that can reach names no scan can see
(``eval``/``exec``/``compile``) gets a ``LazyBuiltins``: CPython looks there
after a miss in the globals, and ``__missing__`` copies the name in. Code that
reaches the whole namespace (``globals()``, frame inspection) gets every name.

When the cell succeeds, ``Working.commit`` copies out every name it copied in
or assigned; a copy that comes out identical to the stored object it came from
is that object (``copier.same_contents``), so a cell that only read a value
stores nothing for it, and a name whose group is unchanged is not stored again.
"""

import builtins
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from .copier import STORED_GLOBALS, copy_names, reading

TOUCHED, WHOLE, LAZY = "touched", "whole", "lazy"  # copy modes: see Working.open
MAX_DEPTH = 16  # a Namespace over more layers than this is flattened
# Names whose use can reach the globals dict without a name lookup.
_DICT_ACCESS = frozenset({"globals", "vars", "locals", "dir", "_getframe", "currentframe",
                          "f_globals", "__globals__"})
_DYNAMIC = frozenset({"eval", "exec", "compile"})  # code no scan can see
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DELETED = None  # what a layer holds for a name its cell deleted
_MODULE_DUNDERS = ("__name__", "__doc__", "__package__", "__spec__")  # every __main__ has them


@dataclass(frozen=True)
class Group:
    """Names whose values share objects; the bytes their objects take in all, and
    the bytes of those the state that made the group stored anew."""

    names: frozenset
    weight: int = 0
    fresh: int = 0


@dataclass(frozen=True)
class Entry:
    """A stored name: its object, its group, and why it is shared by reference, if it is."""

    value: object
    group: Group
    shared: Optional[str] = None


class Namespace:
    """A stored state's names: a base Namespace plus the entries its cell changed.

    Immutable to readers. ``absorb_base`` folds the base in, for when the state
    that owned it is deleted (its objects that no one uses are then freed).
    """

    __slots__ = ("_base", "_changes", "_depth")

    def __init__(self, base, changes):
        if base is not None and base._depth >= MAX_DEPTH:
            base, changes = None, base._merged(changes)
        self._base, self._changes = base, changes
        self._depth = 0 if base is None else base._depth + 1

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


def fresh_namespace():
    dunders = {"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
               "__builtins__": builtins}
    return Namespace(None, {name: Entry(value, Group(frozenset([name])))
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
    created: float = field(default_factory=time.time)  # seconds since the epoch

    @property
    def timestamp(self):
        """When the state was stored, in ISO 8601 (UTC)."""
        return datetime.fromtimestamp(self.created, timezone.utc).isoformat()


# -- what code may reach ---------------------------------------------------------------

@dataclass(frozen=True)
class Needs:
    names: frozenset      # names it may look up or assign, and identifiers in its strings
    strings: frozenset    # identifiers in its string constants (eval, df.query("@x"))
    everything: bool      # it may reach the whole namespace (globals(), frame inspection)
    dynamic: bool         # it may run code no scan can see (eval, exec, compile)


_needs_cache = weakref.WeakKeyDictionary()  # code -> Needs; dies with the code
_cache_lock = threading.Lock()


def code_needs(code):
    """What ``code`` and the code objects nested in it may reach of the globals."""
    found = _needs_cache.get(code)
    if found is None:
        names, strings = set(), set()
        for each in _code_tree(code):
            names.update(each.co_names)
            for const in each.co_consts:
                if isinstance(const, str):
                    strings.update(_IDENTIFIER.findall(const))
        found = Needs(frozenset(names | strings), frozenset(strings),
                      not _DICT_ACCESS.isdisjoint(names), not _DYNAMIC.isdisjoint(names))
        with _cache_lock:
            _needs_cache[code] = found
    return found


def _code_tree(code):
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _code_tree(const)


def deleted_names(code):
    """Names ``code`` (and the code nested in it) may delete with ``del name``."""
    import dis  # only lazy mode needs it, and it is slow to import and to run
    return {ins.argval for each in _code_tree(code) for ins in dis.get_instructions(each)
            if ins.opname in ("DELETE_NAME", "DELETE_GLOBAL")}


# -- an execution's namespace ----------------------------------------------------------------

class LazyBuiltins(dict):
    """The builtins of an execution whose code no scan can see through: a miss
    copies the state's name in.

    It holds its Working weakly: a strong reference would make a cycle through
    the globals, and a failed cell's objects would wait for the garbage
    collector. Threads that outlive their cell see only the names it copied in.
    """

    def __init__(self, working):
        super().__init__(vars(builtins))
        self._working = weakref.ref(working)

    def __missing__(self, name):
        working = self._working()
        if working is None:
            return vars(builtins)[name]
        return working.resolve(name)

    def __getattr__(self, name):  # code that expects __builtins__ to be the module
        return getattr(builtins, name)


class Working:
    """The private namespace of one execution, filled from ``state``."""

    def __init__(self, state, mode=TOUCHED, buffers=None):
        self.state = state
        self.source = state.names
        self.mode = mode
        self.buffers = buffers
        self.namespace = {}
        self.copied = set()    # names copied in: every one is stored again, or found unchanged
        self.origins = {}      # id(working copy) -> the stored object it was copied from
        self._copiers = []     # their memos keep the copies alive, so the ids stay theirs
        self._lock = threading.RLock()

    def open(self, *codes):
        """Copy in what ``codes`` may reach; hook lookups if that cannot be known."""
        codes = [code for code in codes if code is not None]
        needs = [code_needs(code) for code in codes]
        hooked = self.mode == LAZY or any(need.dynamic for need in needs)
        self.namespace["__builtins__"] = LazyBuiltins(self) if hooked else builtins
        self.materialize(_MODULE_DUNDERS)
        if self.mode == WHOLE or any(need.everything for need in needs):
            self.materialize(self.source.entries())
        elif self.mode == LAZY:  # only what lookups cannot copy in: deletions, strings, shadows
            wanted = set().union(*(need.strings for need in needs), *map(deleted_names, codes))
            self.materialize(wanted | (set(self.source.entries()) & set(vars(builtins))))
        else:
            self.materialize(set().union(*(need.names for need in needs)))
            if hooked:  # a name the state binds that shadows a builtin must be there first
                self.materialize(set(self.source.entries()) & set(vars(builtins)))

    def resolve(self, name):
        """The value of ``name`` for a lookup that missed the globals."""
        with self._lock:
            if name not in self.copied and self.source.get(name) is not None:
                self.materialize([name])
                return self.namespace[name]
        return vars(builtins)[name]  # KeyError: a NameError for the cell

    def materialize(self, names):
        """Copy in the groups of ``names`` not copied yet, then what their functions need."""
        # The work is one frame down from the `with`: on CPython 3.13.0 (gh-139622) an
        # interrupt raised on a loop's back-edge skips the handlers of that frame,
        # which would leave the lock held.
        with self._lock:
            self._materialize_locked(names)

    def _materialize_locked(self, names):
        names = list(names)
        while names:
            copier = self._copy_groups_in(names)
            names = [] if copier is None else self._reached_by(copier.codes)

    def _copy_groups_in(self, names):
        """Copy in, with one memo, the groups of ``names`` not copied yet."""
        # A group may still list names that no longer share with it (a child keeps its
        # parent's group for names it did not touch), so take the closure: each member's
        # own group comes along, or the names it does share with would be split.
        todo, queue = {}, [name for name in names if name != "__builtins__"]
        while queue:
            name = queue.pop()
            if name in self.copied or name in todo:
                continue
            entry = self.source.get(name)
            if entry is not None:
                todo[name] = entry.value
                queue.extend(entry.group.names)
        if not todo:
            return None
        self.copied.update(todo)
        copier = self._copy_in(todo)
        self._copiers.append(copier)
        self.origins.update(copier.made)
        return copier

    def _copy_in(self, values):
        fresh = [name for name in values if name not in self.namespace]  # not reassigned
        with reading(self.source):  # stored objects' methods read their own state
            return copy_names(values, fresh, self.namespace, buffers=self.buffers)

    def _reached_by(self, codes):
        """The names that functions just copied in may reach without a lookup (or,
        out of lazy mode, at all)."""
        wanted = set()
        for code in codes:
            need = code_needs(code)
            if need.everything:
                wanted.update(self.source.entries())
            elif self.mode == LAZY:
                wanted.update(need.strings, deleted_names(code))
            else:
                wanted.update(need.names)
        return [name for name in wanted if name not in self.copied]

    def commit(self):
        """``{name: Entry}`` for the names the cell changed, and ``DELETED`` for those
        it deleted. Running code may still hold what it made, so everything stored is
        a copy, or a stored object the copy came out identical to."""
        with self._lock:  # the work is one frame down, as in materialize()
            return self._commit_locked()

    def _commit_locked(self):
        touched = [name for name in list(self.namespace) if name != "__builtins__"]
        stored = {}
        copier = copy_names(self.namespace, touched, stored, (self.namespace,), track=True,
                            replace=[(self.namespace["__builtins__"], builtins)],
                            origins=self.origins, buffers=self.buffers, globals_=STORED_GLOBALS)
        made, groups = {}, {}
        for name, spec in copier.groups(touched).items():
            if spec not in made:
                made[spec] = Group(*spec)
            groups[name] = made[spec]
        changes = {}
        for name in touched:
            group = groups[name]
            if not self._unchanged(group, stored, copier.shared):
                changes[name] = Entry(stored[name], group, copier.shared.get(name))
        for name in self.copied:
            if name not in self.namespace:
                changes[name] = DELETED
        return changes

    def _unchanged(self, group, stored, shared):
        """True if every name of ``group`` holds the stored object, group and sharing
        its parent had: then none of them needs storing again."""
        for member in group.names:
            entry = self.source.get(member)
            if (entry is None or member not in stored or entry.value is not stored[member]
                    or entry.group.names != group.names or entry.shared != shared.get(member)):
                return False
        return True


def sizes(parent, changes):
    """``(new_bytes, total_bytes)`` of the state that ``changes`` make of ``parent``."""
    replaced = {id(entry.group): entry.group for name in changes
                for entry in [parent.names.get(name)] if entry is not None}
    added = {id(entry.group): entry.group for entry in changes.values() if entry is not DELETED}
    new = sum(group.fresh for group in added.values())
    total = (parent.total_bytes - sum(group.weight for group in replaced.values())
             + sum(group.weight for group in added.values()))
    return new, max(total, new)
