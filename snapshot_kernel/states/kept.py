"""Plain data a cell only read, kept as its state stored it (``KeptPlain``, a mixin of
``Working``): a name that still holds the copy made of its stored value, in a group of its
own, is not copied out when the value is plain data whose pickle equals the stored value's
(``copying/plain.py``), unless another name came to share a part of it.
"""

from ..copying.names import collector_off
from ..copying.plain import PLAIN_CONTAINERS, held_ids, same_plain

_NOT_COPIED = object()


class KeptPlain:
    """What ``Working`` gives: ``namespace``, ``copied``, ``source``, ``origins``."""

    def _plain_as_read(self, touched):
        """The names of ``touched`` that still hold the copy made of their stored value, in
        a group of their own, where that is plain data (``copying/plain.py``) the cell left
        as it read it: the stored value is kept without a copy out, unless a name copied out
        holds a part of it (``_copied_out``). A list of 100,000 records a cell only read
        took 0.6 s to copy out and find unchanged. (Not a name rebound to an equal value: a
        name still holding the copy would become that value too.)"""
        found = []
        for name in touched:
            origin, entry = self.copied.get(name, _NOT_COPIED), self.source.get(name)
            if (origin is _NOT_COPIED or entry is None or entry.shared is not None
                    or len(entry.group.names) != 1):
                continue
            value = self.namespace[name]
            if (self.origins.get(id(value)) is origin and type(value) in PLAIN_CONTAINERS
                    and len(value) == len(origin)  # (an append is told without a pickle)
                    and same_plain(value, origin)):
                found.append(name)
        return found

    def _reached(self, as_read, copier):
        """The names of ``as_read`` whose stored value would not keep what other names
        share with them: another name holds a dict, list or set they hold (copied by
        ``copier``, or another of them), or what was copied in as a part of one and is held
        by a name ``copier`` copied (its copy would be that part, now not the name's). A
        value the copier shared whole was not walked: any of them may be a part of it."""
        if not as_read:  # (what follows goes through every object the copier copied)
            return []
        if copier.shared or copier.shared_whole or copier.shared_parts:
            return as_read
        copied = len(copier.memo) > copier.memo_from_arguments
        if not (copied or len(as_read) > 1):
            return []
        held = {name: collector_off(held_ids, self.namespace[name]) for name in as_read}
        parts = {id(self.origins[key]) for key in copier.memo if key in self.origins}
        was = {name: collector_off(held_ids, self.copied[name]) for name in as_read} if (
            parts) else {}
        return [name for name in as_read if not held[name].isdisjoint(copier.memo)
                or parts and not was[name].isdisjoint(parts)
                or any(not held[name].isdisjoint(held[other]) for other in as_read
                       if other != name)]
