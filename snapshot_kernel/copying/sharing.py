"""What the copier shares instead of copying, and the parts of what it shares whole.

A value that cannot be copied (a generator, a lock) is shared: alone inside a list, dict
or tuple, whole where an object holds it (a half-copied object would be broken). The parts
of a value shared whole stay its own, so a name holding one of them (``alias =
obj.items``) must hold that very part, or ``alias is obj.items`` would be False where a
plain process says True. ``parts_to_share`` finds the parts; ``share_parts`` shares them
in what the copy copies from then on, and ``restart`` begins it again with them shared if
it copied one already. What one copy shared (``shared_values``, ``shared_parts``) a later
copy of the same cell shares too (``share_whole``: ``states/working.py`` passes them from
copying in to copying out), though its names no longer reach the value.
"""

import gc
import itertools
import types

from .dispatch import ChangedWhileCopied, PartShared

# Never shared as a part: a cell's function or class bound to a name keeps its own copy,
# which reads the running state's globals (the shared value's reads those of its state).
_OWN_COPIES = (types.FunctionType, type)
_MISS = object()
_NOT_SEARCHED = (types.ModuleType, type, types.FunctionType)


class Sharing:
    """A mixin of ``Copier``: its ``share`` and what follows from it."""

    def share(self, value, exc, mark):
        """Share ``value`` instead of copying it, forgetting the copies made since ``mark``."""
        self.rollback(mark)
        self.shared_reasons[id(value)] = str(exc)
        self.shared_whole[id(value)] = (value, self.label)
        if self.covariables is not None:  # (the names reaching it group: see ``hit``)
            self.covariables.owned(id(value), self.label)
        self.memo[id(value)] = value
        self.keep_alive.append(value)
        self._note_shared(str(exc))
        return value

    def _note_shared(self, reason):
        self.shared.setdefault(self.label, reason)

    def list_reaching(self, source, names, groups):
        """List under ``shared`` each of ``names`` that reaches a value shared whole, or a
        part of one, through an object another name's copy met first (``e = a = [lock]``:
        the copy met the list for ``e`` alone). ``groups`` is ``groups(names)``: only the
        names grouped with a listed one are searched, through the objects they hold."""
        found = dict(self.shared_reasons)  # id -> reason; for a part, (owner, reason)
        found.update((key, (owner, reason)) for key, (_, owner, reason)
                     in self.shared_parts.items())
        if not found:
            return
        for name in names:
            if name in self.shared or not any(other in self.shared
                                               for other in groups[name][0]):
                continue
            key = _first_reached(source[name], found, id(source))
            if key is None:
                continue
            reason = found[key]
            if type(reason) is tuple:  # a part
                owner, reason = reason
                reason = reason if owner == name else PartShared(
                    f"holds a part of {owner!r}, which is shared: {reason}")
            self.shared[name] = reason

    def hit_part(self, key):
        """A memo hit on a part ``restart`` shared: the name reaching it is listed under
        ``shared`` (unless it is the shared value's), and grouped with that value's."""
        _, owner, reason = self.shared_parts[key]
        self._note_shared(reason if owner == self.label else PartShared(
            f"holds a part of {owner!r}, which is shared: {reason}"))
        if self.covariables is not None:  # (``restart`` made ``owner`` its first name)
            self.covariables.reached(key, self.label)

    def copied_anything(self):
        """True if this copy made a copy of anything (rather than sharing all it met)."""
        return any(id(new) != key for key, new
                   in itertools.islice(self.memo.items(), self.memo_from_arguments, None))

    def parts_to_share(self):
        """``({id: (part, name, reason)}, copied)``: the parts of values shared whole not
        shared yet, and whether this copy copied one of them (for another name: then it
        must start again, ``restart``; else ``share_parts`` shares them from now on, for
        names copied later with this memo). Found by copying the shared values again with
        a copier that shares only what fails (``lenient``), and so reaches every part; that
        copy is dropped. Modules, classes and functions it keeps as they are are left out:
        they are the same in every copy."""
        parts, copied = {}, False
        for value_key, (value, name) in list(self.shared_whole.items()):
            reason = self.shared_reasons.get(value_key, "")
            for key, part in self._reached(value):
                if key in parts or key in self.shared_whole or key in self.shared_parts:
                    self._held_by(key, name, parts)
                    continue
                if isinstance(part, _OWN_COPIES):
                    continue
                parts[key] = (part, name, reason)
                mine = dict.get(self.memo, key, _MISS)
                copied = copied or (mine is not _MISS and mine is not part)
        return parts, copied

    def _reached(self, value):
        """``(id, original)`` of what ``value`` reaches, itself included, that a copy would
        copy, or shares because it failed or was found as it is (not modules and such).
        A copier of its own for each value: a part two values hold is reached by both."""
        target, aliases, _, replace, _, buffers, *_ = self.arguments
        probe = type(self)(target, aliases, False, replace, None, buffers)
        probe.lenient = True
        try:
            probe.copy_or_share(value)
        except ChangedWhileCopied:  # (a thread writes it: its parts stay as they are)
            pass
        originals = {id(original): original for original in probe.made.values()}
        for key in list(itertools.islice(probe.memo, probe.memo_from_arguments, None)):
            part = originals.get(key, _MISS)
            if part is _MISS:  # kept as it is: a part if it failed, or was found as is
                if key not in probe.shared_reasons and key not in probe.as_is:
                    continue
                part = dict.__getitem__(probe.memo, key)
            yield key, part

    def _held_by(self, key, name, parts):
        """The shared value ``name`` holds what ``key`` is, which is shared already (a
        value, or a part of one): their names group (``b = obj.items``, then ``obj2 =
        Holder(gen, items=b)``: a cell naming ``b`` must copy ``obj2`` in with it)."""
        if self.covariables is not None:
            if key in parts:  # found for another shared value in this search
                self.covariables.owned(key, parts[key][1])
            self.covariables.reached(key, name)
        self.held.append((key, name))  # for ``restart``, which forgets the groups

    def share_parts(self, parts):
        """Share ``parts`` (``parts_to_share``) in what this copier copies from now on."""
        for key, (part, name, reason) in parts.items():
            self.memo[key] = part
            self.keep_alive.append(part)
            self.shared_parts[key] = (part, name, reason)
            if self.covariables is not None:
                self.covariables.owned(key, name)

    def restart(self, parts):
        """Forget every copy and begin again, sharing ``parts`` (``parts_to_share``) and
        those an earlier restart shared; the caller copies its names again (``calls``)."""
        calls, whole, parts = self.calls, self.shared_values(), {**self.shared_parts, **parts}
        held = self.held
        type(self).__init__(self, *self.arguments)
        self.calls = calls
        self.share_whole(whole)
        self.share_parts(parts)
        self.held = held
        if self.covariables is not None:  # the names of values holding others group again
            for key, name in held:
                self.covariables.reached(key, name)

    def shared_values(self):
        """``{id: (value, name, reason)}`` of the values this copy shared whole."""
        return {key: (value, name, self.shared_reasons[key])
                for key, (value, name) in self.shared_whole.items()}

    def share_whole(self, whole):
        """Share the values ``whole`` (``shared_values``) as if this copy had failed to
        copy them. With their parts shared, one whose state is its own ``__dict__`` (a
        SimpleNamespace) would copy, the copy holding the very parts."""
        for key, (value, name, reason) in whole.items():
            self.memo[key] = value
            self.keep_alive.append(value)
            self.shared_reasons[key] = reason
            self.shared_whole[key] = (value, name)
            if self.covariables is not None:
                self.covariables.owned(key, name)


def _first_reached(value, keys, namespace_key):
    """The first of ``keys`` (ids) found among the objects ``value`` holds, or None.
    Modules, classes and functions are not looked into (they hold whole namespaces)."""
    seen, todo = {namespace_key}, [value]
    while todo:
        obj = todo.pop()
        key = id(obj)
        if key in keys:
            return key
        if key in seen or isinstance(obj, _NOT_SEARCHED):
            continue
        seen.add(key)
        todo.extend(gc.get_referents(obj))
    return None
