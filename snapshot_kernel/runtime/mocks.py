"""``unittest.mock`` patches started in one cell and stopped in a later one.

``p = mock.patch("json.dumps", f); p.start()`` puts ``p`` in a list of the mock
module, ``_patch._active_patches``, which ``p.stop()`` and ``mock.patch.stopall()``
read. In one process a later cell's ``p`` is that very object; here each cell has
its state's copy of ``p``, which the list does not hold, so Python's ``stop`` found
nothing to stop and did nothing. Two changes make it the state's:

- the list follows the state as a setting (``kinds``: ``unittest.mock``), its
  patches kept as set, so a branch's ``stopall()`` stops what its state started,
  and a sibling's stop leaves it alone;
- ``stop`` of a copy (a patch that is started, by its own attributes, and not in
  the list) stops the copy, and takes from the list the patch it was copied from
  (the one on the same target and attribute), as stopping the original would;
  ``stop`` of a patch in the list stops it and leaves its attributes as they were,
  for the other states that hold it in their lists.

The list is not saved with a state: the patches in it hold what only this process
has (a mock, a function of a cell); after a restart it is empty, and the patched
attributes keep the values the state saved (``monkeypatches``).
"""

import sys
import weakref

from .identity import SameObjects

_LIBRARY = "unittest.mock"
_stopped = weakref.WeakSet()  # shared patches stopped from the list (their attributes kept)


class Started(SameObjects):
    """Immutable: the patches started and not stopped, oldest first."""

    __slots__ = ()

    def __reduce__(self):
        return (Started, ((),))  # what a restarted process has: see the module docstring


NONE = Started(())


def _active():
    """The mock module's list, its ``stop`` made to know copies (once)."""
    patch_class = sys.modules[_LIBRARY]._patch
    if not getattr(patch_class.stop, "_snapshot_kernel", False):
        patch_class.stop = _stopping(patch_class.stop)
    return patch_class._active_patches


def read():
    return Started(_active())


def same(value):
    return value.holds(_active())


def write(target):
    _active()[:] = target.objects


def _stopping(stop):
    def stop_patch(self):
        active = type(self)._active_patches
        if any(each is self for each in active):
            # The object every state that started it shares: stopped for this cell's
            # state, as it was for the others (a sibling may stop it too).
            kept = dict(vars(self))
            try:
                return stop(self)
            finally:
                vars(self).update(kept)
                _stopped.add(self)
        if not hasattr(self, "_exit_stack") or self in _stopped:
            return stop(self)  # never started, or stopped: Python's None
        for each in active:
            if getattr(each, "target", None) is self.target and \
                    getattr(each, "attribute", None) == self.attribute:
                active.remove(each)
                break
        return self.__exit__(None, None, None)

    stop_patch._snapshot_kernel = True
    return stop_patch
