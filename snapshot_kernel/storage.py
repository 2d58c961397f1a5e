"""How states are stored, and how an execution gets its private copy of one.

A stored state maps each name to an object that no running code can reach.
A child state shares the objects of every name its cell did not touch with
its parent, which is safe because neither state is ever exposed or mutated.
Only the names a cell touched are copied on the way out.

On the way in, an execution copies a name only when its code looks the name
up. Its globals are a plain dict (so name lookups run at full speed) holding
the names copied so far. Its ``__builtins__`` is a ``LazyBuiltins``: CPython
looks there after a miss in the globals, for module code, function code and
class bodies alike, and ``__missing__`` copies the name's group in. A group is
the set of names whose values share objects (co-variables). They are copied
together with one memo, so aliases stay aliases.

Dict-level access to the globals, such as ``globals()``, ``vars()``, ``dir()``,
``del name`` and frame inspection, bypasses those lookups. The code of the cell,
and of every function copied in, is scanned for them, and the names they need
(or all names) are copied in first. Identifiers in string constants count as
needed too, for ``eval`` strings and ``df.query("a > @limit")``. A state
lighter than ``EAGER_BUDGET`` is copied whole, which costs nothing noticeable
and keeps the real builtins in place.
"""

import builtins
import dis
import functools
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from .copier import ATOMIC, StoredNamespace, copy_names, is_dunder

EAGER_BUDGET = 1 << 20  # bytes: a state lighter than this is copied whole
# Names whose use can reach the globals dict without a name lookup.
_DICT_ACCESS = frozenset({"globals", "vars", "locals", "dir", "_getframe", "currentframe",
                          "f_globals", "__globals__"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DELETES = frozenset({"DELETE_NAME", "DELETE_GLOBAL"})


@dataclass(frozen=True)
class Group:
    """Names whose values share objects, and the bytes their objects take."""

    names: frozenset
    weight: int


@dataclass(frozen=True)
class State:
    """An immutable snapshot. Its ``namespace`` is never handed to running code."""

    name: str
    namespace: StoredNamespace
    parent: Optional[str]
    code: str
    shared: dict
    groups: dict = field(default_factory=dict)  # name -> Group, for every non-dunder name
    weight: int = 0
    created: float = field(default_factory=time.time)  # seconds since the epoch

    @property
    def timestamp(self):
        """When the state was stored, in ISO 8601 (UTC)."""
        return datetime.fromtimestamp(self.created, timezone.utc).isoformat()


def fresh_namespace():
    return StoredNamespace(__name__="__main__", __doc__=None, __package__=None,
                           __spec__=None, __builtins__=builtins)


@functools.lru_cache(maxsize=4096)
def code_needs(code):
    """``(names, everything)``: the names ``code`` may reach without a name
    lookup, and whether it may reach the whole namespace."""
    names, everything = set(), False
    for each in _code_tree(code):
        everything = everything or not _DICT_ACCESS.isdisjoint(each.co_names)
        names.update(ins.argval for ins in dis.get_instructions(each) if ins.opname in _DELETES)
        for const in each.co_consts:
            if isinstance(const, str):
                names.update(_IDENTIFIER.findall(const))
    return frozenset(names), everything


def _code_tree(code):
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _code_tree(const)


class LazyBuiltins(dict):
    """The builtins of a lazy execution: a miss copies the state's name in.

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
    """The private namespace of one execution, filled from ``state`` on demand."""

    def __init__(self, state, eager_budget=EAGER_BUDGET):
        self.state = state
        self.eager_budget = eager_budget
        self.namespace = {}
        self.pending = set()
        self._lock = threading.RLock()

    def open(self, *codes):
        """Copy in what ``codes`` need up front; leave the rest to lookups."""
        source = self.state.namespace
        if self.state.weight >= self.eager_budget:
            self.pending = {name for name in source if not is_dunder(name)}
        self.namespace["__builtins__"] = LazyBuiltins(self) if self.pending else builtins
        eager = [name for name in source if name != "__builtins__" and name not in self.pending]
        copier = copy_names(source, eager, self.namespace)
        if self.pending:  # what dict-level access and shadowed builtins need, up front
            self._follow(copier.codes)
            self.materialize(name for name in self.pending if name in vars(builtins))
            self._follow(code for code in codes if code is not None)

    def resolve(self, name):
        """The value of ``name`` for a lookup that missed the globals."""
        with self._lock:
            if name in self.pending:
                self.materialize([name])
                return self.namespace[name]
        return vars(builtins)[name]  # KeyError: a NameError for the cell

    def materialize(self, names):
        """Copy in the groups of ``names`` that are still pending."""
        # The work is one frame down from the `with`: on CPython 3.13.0 (gh-139622) an
        # interrupt raised on a loop's back-edge skips the handlers of that frame,
        # which would leave the lock held.
        with self._lock:
            self._materialize_locked(names)

    def _materialize_locked(self, names):
        todo = set()
        for name in names:
            if name in self.pending:
                todo |= self._group(name).names
        todo &= self.pending
        if not todo:
            return
        self.pending -= todo
        fresh = [name for name in todo if name not in self.namespace]  # not reassigned
        copier = copy_names(self.state.namespace, fresh, self.namespace)
        self._follow(copier.codes)

    def _group(self, name):
        return self.state.groups.get(name) or Group(frozenset([name]), 0)

    def _follow(self, codes):
        """Copy in what the given code may reach without a lookup."""
        for code in codes:
            if not self.pending:
                return
            names, everything = code_needs(code)
            self.materialize(list(self.pending) if everything else names)

    def _unchanged(self, touched):
        """True if the cell only read immutable values: its state can be the parent's."""
        source, namespace = self.state.namespace, self.namespace
        return (all(key in source and namespace[key] is source[key]
                    and type(source[key]) in ATOMIC for key in touched)
                and all(key in namespace or key in self.pending for key in source))

    def commit(self):
        """The fields of a new State: the parent's objects for the names the cell
        did not touch, fresh copies of the rest (running code may still hold those)."""
        with self._lock:  # the work is one frame down, as in materialize()
            return self._commit_locked()

    def _commit_locked(self):
        source = self.state
        touched = [key for key in list(self.namespace) if key != "__builtins__"]
        if self._unchanged(touched):
            return {"namespace": source.namespace, "shared": source.shared,
                    "groups": source.groups, "weight": source.weight}
        stored = StoredNamespace(source.namespace)
        stored["__builtins__"] = builtins
        kept = {key for key in source.namespace  # neither copied in nor reassigned
                if key in self.pending and key not in self.namespace}
        for key in list(stored):
            if key not in kept and key != "__builtins__" and key not in self.namespace:
                del stored[key]
        copier = copy_names(self.namespace, touched, stored, (self.namespace,), track=True,
                            replace=[(self.namespace["__builtins__"], builtins)])
        groups = _kept_groups(source.groups, kept)
        new = copier.groups(key for key in touched if not is_dunder(key))
        groups.update({key: Group(*value) for key, value in new.items()})
        shared = {key: why for key, why in source.shared.items() if key in kept}
        shared.update(copier.shared)
        weight = sum(group.weight for group in {id(g): g for g in groups.values()}.values())
        return {"namespace": stored, "shared": shared, "groups": groups, "weight": weight}


def _kept_groups(groups, kept):
    """The parent's groups for untouched names, without members the cell changed."""
    result, pruned = {}, {}
    for key in kept:
        group = groups.get(key)
        if group is None:
            continue
        if id(group) not in pruned:
            pruned[id(group)] = Group(group.names & kept, group.weight)
        result[key] = pruned[id(group)]
    return result
