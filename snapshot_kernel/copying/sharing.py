"""What the copier shares instead of copying, and the parts of what it shares whole.

A value that cannot be copied (a generator, a lock) is shared: alone inside a list, dict
or tuple, whole where an object holds it (a half-copied object would be broken). The parts
of a value shared whole stay its own, so a name holding one of them (``alias =
obj.items``) must hold that very part, or ``alias is obj.items`` would be False where a
plain process says True. ``parts_to_share`` finds the parts a copy copied anyway, and
``restart`` begins the copy again with them shared.
"""

import itertools
import types

from .dispatch import ChangedWhileCopied, PartShared

# Never shared as a part: a cell's function or class bound to a name keeps its own copy,
# which reads the running state's globals (the shared value's reads those of its state).
_OWN_COPIES = (types.FunctionType, type)
_MISS = object()


class Sharing:
    """A mixin of ``Copier``: its ``share`` and what follows from it."""

    def share(self, value, exc, mark):
        """Share ``value`` instead of copying it, forgetting the copies made since ``mark``."""
        self._rollback(mark)
        self.shared_reasons[id(value)] = str(exc)
        self.shared_whole[id(value)] = (value, self.label)
        self.memo[id(value)] = value
        self.keep_alive.append(value)
        self._note_shared(str(exc))
        return value

    def _note_shared(self, reason):
        self.shared.setdefault(self.label, reason)

    def hit_part(self, key):
        """A memo hit on a part ``restart`` shared: the name reaching it is listed under
        ``shared`` (unless it is the shared value's), and grouped with that value's."""
        owner, reason = self.shared_parts[key]
        if owner != self.label:
            self._note_shared(PartShared(f"holds a part of {owner!r}, which is shared: "
                                         f"{reason}"))
        if self.covariables is not None:  # (``restart`` made ``owner`` its first name)
            self.covariables.reached(key, self.label)

    def copied_anything(self):
        """True if this copy made a copy of anything (rather than sharing all it met)."""
        return any(id(new) != key for key, new
                   in itertools.islice(self.memo.items(), self.memo_from_arguments, None))

    def parts_to_share(self):
        """``{id: (part, name, reason)}``: the parts of values shared whole that this copy
        also copied for another name. Found by copying the shared values again with a copier
        that shares only what fails (``lenient``), and so reaches every part; that copy is
        dropped."""
        target, aliases, _, replace, _, buffers, _ = self.arguments
        probe = type(self)(target, aliases, False, replace, None, buffers)
        probe.lenient = True
        reached = []  # (the memo's size after each shared value's copy, its name, the reason)
        for key, (value, name) in list(self.shared_whole.items()):
            try:
                probe.copy_or_share(value)
            except ChangedWhileCopied:  # (a thread writes it: its parts stay as they are)
                pass
            reached.append((len(probe.memo), name, self.shared_reasons.get(key, "")))
        originals = {id(original): original for original in probe.made.values()}
        parts, begun = {}, probe.memo_from_arguments
        for end, name, reason in reached:
            for key in list(itertools.islice(probe.memo, begun, end)):
                new = dict.__getitem__(probe.memo, key)
                part = originals.get(key, new if id(new) == key else _MISS)  # (or shared)
                if part is _MISS or key in parts or key in self.shared_whole:
                    continue
                copied = dict.get(self.memo, key, _MISS)
                if copied is not _MISS and copied is not part and not isinstance(
                        part, _OWN_COPIES):
                    parts[key] = (part, name, reason)
            begun = end
        return parts

    def restart(self, parts):
        """Forget every copy and begin again, sharing ``parts`` (``parts_to_share``); the
        caller copies its names again (``calls``)."""
        calls = self.calls
        type(self).__init__(self, *self.arguments)
        self.calls = calls
        for key, (part, name, reason) in parts.items():
            self.memo[key] = part
            self.keep_alive.append(part)
            self.shared_parts[key] = (name, reason)
            if self.covariables is not None:
                self.covariables.copied(key, part, name, False)
