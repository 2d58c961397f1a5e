"""An execution's private copy of a state: what a cell runs on, copied in before it
runs and out when it succeeds (``storage`` holds what it copies from and to).

An execution runs on a plain dict whose ``__builtins__`` is the builtins
module, so name lookups take CPython's fastest path. ``Working.open`` copies
in, before the cell runs, the names its code may touch (``code_needs``: the
names its code objects use, and identifiers in its strings, for ``eval``
strings and ``df.query("a > @limit")``), and then the names the functions it
copied in may touch, and so on. Code that may reach names no scan can see
(``eval`` or ``exec`` of a computed string, ``globals()``, frame inspection)
gets them all. A name comes without the rest of its group (the names sharing
objects with it); a later copy of the rest starts from the memo of what was
copied, so aliases stay aliases.

When the cell succeeds, ``Working.commit`` copies out every name it copied in
or assigned; a copy that comes out identical to the stored object it came from
is that object (``copier.same_contents``, and an instance whose state does), so
a cell that only read a value stores nothing for it, and a name whose group is
unchanged is not stored again. A group copied in part that the cell changed
has its rest copied in then, and out with it.
"""

import builtins

from ..copying.names import copy_more, copy_names
from ..copying.dispatch import ATOMIC, PartShared
from ..copying.stored import STORED_GLOBALS, reading
from ..copying.covariables import sizeof
from ..runtime.places import ABSENT
from .reach import binds_first, code_needs, deleted_only
from .kept import KeptPlain
from .storage import DELETED, GONE, Entry, Group

TOUCHED, WHOLE = "touched", "whole"  # copy modes: see Working.open
_MODULE_DUNDERS = ("__name__", "__doc__", "__package__", "__spec__")  # every __main__ has them


class _Unread:
    """What a name a cell only deletes holds in its namespace (``Working``): never read."""

    __slots__ = ()

    def __repr__(self):
        return "<a value the cell did not read>"


UNREAD = _Unread()


class Working(KeptPlain):
    """The private namespace of one execution, filled from ``state``."""

    def __init__(self, state, mode=TOUCHED, buffers=None, provided=None):
        """``provided`` names objects the cell needs in its namespace (notebook
        syntax's ``get_ipython``); they are not stored unless the cell rebinds them."""
        self.state = state
        self.provided = provided or {}
        self.source = state.names
        self.mode = mode
        self.buffers = buffers
        self.namespace = {}
        # Names copied in -> the stored object read for each. Every one is stored again, or
        # found unchanged: compared with that object, not with a later read of the state,
        # which may be a new one (a group that a memory budget dropped, then loaded again).
        self.copied = {}
        self.gone = {}         # names the state lost at a restart -> why
        self.held = set()      # names holding UNREAD for a del (``_hold_for_deletion``)
        self.pinned = {}       # names not copied in -> the stored object their group read
        self._made_in_part = {}  # the memos of copies of groups in part: ``_copy_groups_in``
        self._in_part = False  # True once a group was copied in part
        self._parts_held = {}  # id(group) -> True if a name of it holds a part: ``_holds_part``
        self.origins = {}      # id(working copy) -> the stored object it was copied from
        self._copiers = []     # their memos keep the copies alive, so the ids stay theirs;
        # but not unpinned ones (arrays): if code drops one and a new object takes its id,
        # that object is stored as the origin only if it holds the same contents, and no
        # name of the new state reaches the origin otherwise (its whole group was copied in).

    def open(self, *codes):
        """Copy in what ``codes`` may touch (everything, in WHOLE mode)."""
        self.namespace["__builtins__"] = builtins
        needs, bound, deleted = [], frozenset(), set()
        for code in codes:  # the cell's body, then its last expression, which runs after it
            if code is not None:
                names, everything = code_needs(code)
                bound |= binds_first(code)
                needs.append((names - bound, everything))
                deleted.update(deleted_only(code))
        for name in _MODULE_DUNDERS:  # immutable and alone: no copy, no group to follow
            entry = self.source.get(name)
            value = entry.value if entry is not None else self  # self: not atomic
            if type(value) in ATOMIC:
                self.namespace[name] = self.copied[name] = value
        if self.mode == WHOLE or any(everything for _, everything in needs):
            self.materialize(self.source.entries())
        else:
            needed = set().union(*(names for names, _ in needs))
            self.materialize(needed)
            self._hold_for_deletion(deleted - needed)
        for name, value in self.provided.items():
            self.namespace.setdefault(name, value)

    def _hold_for_deletion(self, names):
        """Put ``UNREAD`` under each of ``names`` the state has and nothing copied in:
        the cell only deletes (or rebinds) them, so ``del big`` finds the name without a
        copy of its value. No code of the cell reads it (``deleted_only``); ``commit``
        counts one still held as unchanged, and one gone as deleted."""
        for name in names:
            entry = self.source.get(name)
            if name in self.namespace or entry is None or entry.value is GONE:
                continue
            self.namespace[name] = UNREAD
            self.held.add(name)

    def peek(self, name):
        """The value ``name`` has in the namespace, else the stored object (not a copy:
        only for telling what it is); ``places.ABSENT`` if neither has one."""
        value = self.namespace.get(name, ABSENT)
        if value is ABSENT or value is UNREAD:
            value = ABSENT
            entry = self.source.get(name)
            if entry is not None and entry.value is not GONE:
                value = entry.value
        return value

    def materialize(self, names):
        """Copy in ``names`` not copied yet, then what their functions need."""
        names = list(names)
        while names:
            copier, _ = self._copy_groups_in(names)
            names = [] if copier is None else self._reached_by(copier.codes)

    def materialize_code(self, code):
        """Copy in what ``code`` (a function's, made over this namespace) may touch."""
        self.materialize(self._reached_by([code]))

    def _copy_groups_in(self, names, closure=False):
        """Copy in ``names`` not copied yet (with ``closure``, their groups' names too,
        and theirs), as one copy with what earlier copies made: ``(copier, names)``.

        A name is copied in without the rest of its group (the names it shares objects
        with): ``commit`` copies the rest in only if the cell changed what the group holds
        (``_rest_of_changed_groups``). A print of a model that shares an array with a
        figure's display object copied the figure too: 12-145 ms in the gallery."""
        # A group may still list names that no longer share with it (a child keeps its
        # parent's group for names it did not touch), so a closure takes each member's
        # own group too, or the names it does share with would be split.
        todo, queue = {}, [name for name in names if name != "__builtins__"]
        while queue:
            name = queue.pop()
            if name in self.copied or name in todo:
                continue
            if name in self.held and name not in self.namespace:  # the cell deleted it
                continue
            entry = self.source.get(name)
            if entry is None:
                continue
            value = self.pinned[name] if name in self.pinned else entry.value
            if value is GONE:  # lost at a restart: a lookup fails, saying why (see ``gone``)
                self.gone[name] = entry.lost
                continue
            todo[name] = value
            self._pin_rest(name, entry.group, todo)
            # A name holding a part of a value shared whole (``alias = obj.items``) is that
            # part only if copied with the value: its group goes in whole, and so does it
            # for a name sharing an object with it (``d = alias``: only ``alias`` is marked).
            if closure or self._holds_part(entry.group):
                queue.extend(entry.group.names)
        if not todo:
            return None, ()
        self.copied.update(todo)
        copier = self._copy_in(todo)
        if any(self._partial(name) for name in todo):  # later copies of the rest share these
            self._made_in_part.update(copier.memo)
            self._in_part = True
        else:  # code may resize an array it holds the only reference to
            copier.unpin()
        self._copiers.append(copier)
        self.origins.update(copier.made)
        return copier, tuple(todo)

    def _pin_rest(self, name, group, todo):
        """Read the stored objects of ``name``'s ``group`` with its own, and keep them: a
        group a memory budget drops is loaded again as new objects, which the copies of
        ``name`` would no longer share with when ``commit`` copies the rest in."""
        for member in group.names:
            if member not in todo and member not in self.pinned and self._uncopied(member):
                self.pinned[member] = self.source.get(member).value

    def _partial(self, name):
        """True if a name of ``name``'s group still holds its stored value uncopied."""
        entry = self.source.get(name)
        return entry is not None and any(self._uncopied(member)
                                         for member in entry.group.names)

    def _uncopied(self, name):
        """True if ``name`` holds its stored value and nothing copied it in."""
        if name in self.copied:
            return False
        value = self.namespace.get(name, ABSENT)
        if value is ABSENT and name in self.held:  # the cell deleted it
            return False
        if value is not ABSENT and value is not UNREAD:  # the cell rebound it
            return False
        entry = self.source.get(name)  # (a lost value is held, not in a record to load)
        return entry is not None and (entry.record is not None or entry.value is not GONE)

    def _copy_in(self, values):
        fresh = [name for name in values  # not reassigned
                 if self.namespace.get(name, UNREAD) is UNREAD]
        # The parts of values shared whole are looked for only if a name may hold one
        # (``_holds_part``, ``copying/sharing.py``): an object holding a lock and a big dict
        # that no other name shares with costs nothing more.
        parts_held = any(self._holds_part(entry.group) for entry in map(self.source.get, fresh)
                         if entry is not None)
        with reading(self.source):  # stored objects' methods read their own state
            return copy_names(values, fresh, self.namespace, buffers=self.buffers,
                              seed=self._made_in_part, find_parts=parts_held)

    def _holds_part(self, group):
        """True if a name of ``group`` may hold a part of a value shared whole: one is
        listed so, or the group has a shared value and another name. (A name is listed by
        the first shared thing it reached: ``e = a = [x]``, ``x`` holding a part of ``c``
        and another shared value, lists ``e`` as shared and ``a`` not at all.)"""
        found = self._parts_held.get(id(group))
        if found is None:
            reasons = [self._shared_reason(member) for member in group.names]
            found = self._parts_held[id(group)] = any(
                isinstance(reason, PartShared) for reason in reasons) or (
                len(reasons) > 1 and any(reason is not None for reason in reasons))
        return found

    def _shared_reason(self, name):
        entry = self.source.get(name)
        return None if entry is None else entry.shared

    def _reached_by(self, codes):
        """The names that functions just copied in may touch."""
        wanted = set()
        for code in codes:
            names, everything = code_needs(code)
            wanted.update(self.source.entries() if everything else names)
        return [name for name in wanted if name not in self.copied]

    def commit(self):
        """``{name: Entry}`` for the names the cell changed, and ``DELETED`` for those
        it deleted. Running code may still hold what it made, so everything stored is
        a copy, or a stored object the copy came out identical to."""
        touched = [name for name in list(self.namespace) if name != "__builtins__"
                   and self.namespace[name] is not self.provided.get(name, self)
                   and self.namespace[name] is not UNREAD
                   and not self._kept_atomic(name)]
        # An immutable value needs no copy, shares nothing, and is a group of its own.
        changes = {name: _atomic_entry(name, self.namespace[name]) for name in touched
                   if type(self.namespace[name]) in ATOMIC}
        touched = [name for name in touched if name not in changes]
        if touched or self._in_part:  # (a rebound name may leave its rest changed)
            changes.update(self._copied_out(touched))
        for name in (*self.copied, *self.held):
            if name not in self.namespace:
                changes[name] = DELETED
        return changes

    def _copied_out(self, touched):
        """The entries of ``touched`` names whose groups changed, copied out with one memo."""
        stored = {}
        # What copying in shared whole, and their parts, are shared still, though out of
        # reach of the names copied out (``a = obj.items`` rebinds ``a`` to the part):
        # another name of the state, or of another state, holds the value.
        whole, parts = {}, {}
        for copier in self._copiers:
            whole.update(copier.shared_values())
            parts.update(copier.shared_parts)
        as_read = self._plain_as_read(touched)
        copier = copy_names(self.namespace, [name for name in touched if name not in as_read],
                            stored, (self.namespace,), track=True,
                            replace=[(self.namespace["__builtins__"], builtins)],
                            origins=self.origins, buffers=self.buffers, globals_=STORED_GLOBALS,
                            shared=(whole, parts), find_parts=bool(parts))
        reached = self._reached(as_read, copier)
        if reached:  # another name holds a part of it now: copied with the memo, as any
            copy_more(copier, self.namespace, reached, stored)
        stored.update((name, self.copied[name]) for name in as_read if name not in reached)
        specs = copier.groups(touched)
        rest = self._rest_of_changed_groups(specs, stored, copier.shared)
        if rest:  # copied in now, its changed objects from the cell's copies, and out
            added = self._copy_rest_in(rest)
            touched = [*touched, *added]
            copy_more(copier, self.namespace, added, stored)
            specs = copier.groups(touched)
        copier.list_reaching(self.namespace, touched, specs)
        kept = self._kept_in_part()
        made, groups, changes = {}, {}, {}
        for name, spec in specs.items():
            if spec not in made:
                made[spec] = Group(*spec)
            groups[name] = made[spec]
        for name in touched:
            group = groups[name]
            if name not in kept and not self._unchanged(group, stored, copier.shared):
                changes[name] = Entry(name, stored[name], group, copier.shared.get(name))
        return changes

    def _copy_rest_in(self, names):
        """Copy in ``names``, their groups whole, and what their functions need (their
        ``__deepcopy__`` runs as they are copied out); the names copied, in order."""
        added = []
        while names:
            copier, copied = self._copy_groups_in(names, closure=True)
            added.extend(copied)
            names = [] if copier is None else self._reached_by(copier.codes)
        return added

    def _groups_in_part(self):
        """``{id(group): (group, names of it copied in)}`` for the state's groups of
        which some names were copied in and some still hold their stored values."""
        found = {}
        for name in self.copied if self._in_part else ():
            entry = self.source.get(name)
            if entry is not None and self._partial(name):
                found.setdefault(id(entry.group), (entry.group, []))[1].append(name)
        return found.values()

    def _rest_of_changed_groups(self, specs, stored, shared):
        """The uncopied names of groups copied in part that the cell changed: a name
        copied in stores another object or sharing, is gone, or now shares objects with
        a name not copied in with it. Objects a group's names share are reached from each
        name, so a group whose copied names all come out as stored is as it was."""
        rest = []
        for group, names in self._groups_in_part():
            copied = frozenset(names)
            if not all(self._came_out_as_stored(name, copied, specs, stored, shared)
                       for name in names):
                rest.extend(member for member in group.names if self._uncopied(member))
        return rest

    def _kept_in_part(self):
        """The names copied in from groups still copied in part: they came out as
        stored (``_rest_of_changed_groups``), and their entries stay the parent's."""
        return {name for _, names in self._groups_in_part() for name in names}

    def _came_out_as_stored(self, name, copied, specs, stored, shared):
        """True if ``name`` stores the object and sharing it had, and shares objects only
        with names in ``copied`` (its group's names copied in): a name the cell bound to
        something reaching them joins the group, which is then stored again whole."""
        entry = self.source.get(name)
        return (name in stored and stored[name] is self.copied[name]
                and shared.get(name) == entry.shared and specs[name][0] <= copied)

    def _kept_atomic(self, name):
        """True if ``name`` still holds the immutable object its state holds (``__name__``,
        a number it only read): nothing to copy out, and it shares nothing."""
        entry = self.source.get(name)
        if entry is None:
            return False
        value = self._stored_value(name, entry)
        return type(value) in ATOMIC and self.namespace[name] is value

    def _unchanged(self, group, stored, shared):
        """True if every name of ``group`` holds the stored object, group and sharing
        its parent had: then none of them needs storing again."""
        for member in group.names:
            entry = self.source.get(member)
            if (entry is None or member not in stored
                    or self._stored_value(member, entry) is not stored[member]
                    or entry.group.names != group.names or entry.shared != shared.get(member)):
                return False
        return True

    def _stored_value(self, name, entry):
        """The object the state holds for ``name``: the one copied in, if it was."""
        return self.copied[name] if name in self.copied else entry.value


def _atomic_entry(name, value):
    size = sizeof(value)
    return Entry(name, value, Group(frozenset([name]), size, size))
