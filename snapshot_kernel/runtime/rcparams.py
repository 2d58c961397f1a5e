"""matplotlib's ``rcParams`` held per cell.

From matplotlib 3.10 on, every read and write of ``rcParams`` goes through its ``_get``,
``_set`` and ``_update_raw`` (``rc_context`` and ``style.use`` included). The object's
class becomes one whose three methods, in a thread holding a cell's settings, read the
cell's values over the process's and write the cell's own. Earlier versions write the
dict directly in places, so there ``rcParams`` stays one per process: a cell takes its
state's values into it, and cells whose values differ take turns (``per_thread``).

``backend`` is the server's: a cell may switch it, a state does not carry it. A state's
value is ``{key: value}``, what its cells set (None: matplotlib's defaults).
"""

import sys

from .held import current

NAME = "matplotlib.rcParams"
NOT_FOLLOWED = ("backend",)


def _matplotlib():
    return sys.modules["matplotlib"]


def per_thread():
    """True if this matplotlib reads and writes rcParams only through its methods (and
    while it is not imported yet: there is nothing to hold)."""
    kind = getattr(sys.modules.get("matplotlib"), "RcParams", None)
    return kind is None or hasattr(kind, "_update_raw")


def _writable(held):
    working = held.working.get(NAME)
    if working is None:
        working = held.working[NAME] = dict(held.values.get(NAME) or {})
    return working


class _Held:
    """Mixed into the class of the process's ``rcParams`` (see the module's docstring)."""

    def _get(self, key):
        held = current()
        if held is not None and self is _matplotlib().rcParams:
            overlay = held.value_of(NAME)
            if overlay is not None and key in overlay:
                return overlay[key]
        return dict.__getitem__(self, key)

    def _set(self, key, val):
        held = current()
        if held is None or key in NOT_FOLLOWED or self is not _matplotlib().rcParams:
            dict.__setitem__(self, key, val)
        else:
            _writable(held)[key] = val

    def _update_raw(self, other_params):
        if isinstance(other_params, dict):  # an RcParams too: its own items, as the original
            other_params = dict.items(other_params)
        for key, val in other_params:
            self._set(key, val)

    def copy(self):
        """A plain RcParams of the values the calling cell sees."""
        made = type(self).__bases__[1]()
        for key in self:
            dict.__setitem__(made, key, self._get(key))
        return made

    def __reduce_ex__(self, protocol):
        return type(self.copy()).__reduce_ex__(self.copy(), protocol)


def install():
    """Hold rcParams per cell once matplotlib (3.10 or later) is imported; idempotent."""
    params = getattr(sys.modules.get("matplotlib"), "rcParams", None)
    if params is None or not per_thread():
        return
    if not isinstance(params, _Held):
        params.__class__ = type("HeldRcParams", (_Held, type(params)), {})


def _differences(values):
    """``values``' entries that differ from the process's rcParams."""
    params = _matplotlib().rcParams
    return {key: value for key, value in values.items()
            if key not in NOT_FOLLOWED and key in params and dict.__getitem__(params, key) != value}


def enter(held, value):
    if per_thread():
        install()
        return
    params, original = _matplotlib().rcParams, _matplotlib().rcParamsOrig  # one per process
    wanted = {key: dict.__getitem__(original, key) for key in original if key not in NOT_FOLLOWED}
    wanted.update(value or {})
    changed = _differences(wanted)
    if changed:
        dict.update(params, changed)  # validated when they were set


def leave(held, value):
    """The state's new value: ``value`` itself unless the cell set rcParams."""
    if per_thread():
        working = held.working.get(NAME)
        if working is None:
            return value
        now = _differences(working)
    else:
        now = _from_defaults()
    return value if now == (value or {}) else (now or None)


def _from_defaults():
    params, original = _matplotlib().rcParams, _matplotlib().rcParamsOrig
    return {key: dict.__getitem__(params, key) for key in params
            if key not in NOT_FOLLOWED and key in original
            and dict.__getitem__(params, key) != dict.__getitem__(original, key)}


def first(held, value):
    """After the cell that first imported matplotlib (or at its checkpoint): what it set
    went to the process's rcParams (nothing was in place yet). That becomes the cell's own
    (it goes on seeing it) and its state's, and the process's get matplotlib's own back
    where cells hold them per thread."""
    now = _from_defaults()
    if per_thread():
        original = _matplotlib().rcParamsOrig
        dict.update(_matplotlib().rcParams, {key: dict.__getitem__(original, key) for key in now})
        install()
        if now:
            held.working[NAME] = dict(now)
    return now or value


def resolved(value, server):
    """What a cell claims of the process where rcParams are one per process."""
    return value or {}
