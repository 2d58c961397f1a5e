"""Module attributes a cell sets (monkeypatches) and modules it puts in ``sys.modules``.

Both are process-wide, so they are a kind of setting (``kinds``): a state keeps
the patches its cells made, its children start with them, and a sibling's
cell runs with the originals put back. Watching every attribute of every
module after each cell would cost far more than a cell; the places a cell can
patch are found in its code instead (``patchsites.targets``: ``json.dumps = f``,
``pd.DataFrame.total = f``, ``setattr(mod, "name", v)``, ``del mod.name``,
``sys.modules["name"] = m``, ``mock.patch("mod.name")``, in the cell or in
functions it defines), and each
becomes a watched place once its object is known to be a module, or a class of
a module, the moment before the cell runs. Its value then is the original
every state without a patch there gets back.
"""

import contextlib
import io
import pickle
import sys
import threading
import types

from . import cellfunctions, imports, places
from .places import ABSENT, MODULES


_watched = {}  # place (owner, name) -> its value before any cell changed it
_lock = threading.Lock()


def watch(found, lookup, expecting=True):
    """Before a cell runs: watch the places among ``found`` whose objects are modules or
    modules' classes, noting their values now as the originals. ``lookup(name)`` is
    the value a name of the cell's state has (ABSENT if none). Returns the targets
    whose objects are not known yet (a module the cell imports for the first time in
    this process), for ``watch`` again after the cell: their values then are taken as
    the originals, so a function defined for later cells patches them exactly, but what
    the cell itself did to them stays (see docs/promises.md)."""
    unknown = []
    for chain, name in found:
        if chain[-1] == "[]":
            _note((MODULES, name))
            continue
        try:
            owner = places.resolve(chain, lookup)
            if owner is not ABSENT:
                _note(places.place_of(owner, name))
                continue
        except Exception:  # noqa: BLE001 - a metaclass's __module__ raised: not a place
            continue
        unknown.append((chain, name))
        if expecting:
            _FIRST_IMPORTS.expect(chain, name)
    return unknown


def _note(place):
    if place is not None and place not in _watched:
        with _lock:
            if place not in _watched:
                _watched[place] = places.current(place)


def done(unknown, lookup):
    """After a cell: watch the targets ``watch`` could not resolve before it."""
    _FIRST_IMPORTS.forget(unknown)
    watch(unknown, lookup, expecting=False)


class _FirstImports:
    """A finder first on ``sys.meta_path`` while a cell may patch a module it imports for
    the first time in this process: the module's loader is wrapped for that one import,
    so the places the cell may patch are noted as the import left them, before the
    cell's next statement runs."""

    def __init__(self):
        self._expected = {}  # module name -> {(chain, name): count of cells expecting it}

    def expect(self, chain, name):
        head = chain[0]
        if head.startswith("import "):
            modules = (head[7:],)
        elif head.startswith("dotted "):  # each prefix may be the module
            parts = head[7:].split(".")
            modules = tuple(".".join(parts[:end]) for end in range(1, len(parts) + 1))
        elif head.startswith("from "):
            module, _, attribute = head[5:].partition(" import ")
            modules = (module, f"{module}.{attribute}")  # (which may be a submodule)
        else:
            return
        with _lock:
            for module in modules:
                targets = self._expected.setdefault(module, {})
                targets[(chain, name)] = targets.get((chain, name), 0) + 1
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def forget(self, unknown):
        with _lock:
            for chain, name in unknown:
                for module, targets in list(self._expected.items()):
                    count = targets.pop((chain, name), 0) - 1
                    if count > 0:
                        targets[(chain, name)] = count
                    if not targets:
                        del self._expected[module]
            if not self._expected and self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self._expected:
            return None
        return imports.spec_then(self, self.imported, fullname, path, target)

    def imported(self, module):
        """Note the places the waiting cells may patch in ``module``, as its import left
        them. Never raises: the cell's import goes on whatever happens here."""
        with contextlib.suppress(Exception):  # a module's own __getattr__, say
            for chain, attr in list(self._expected.get(module.__name__, {})):
                owner = places.resolve(chain, None, module)
                if owner is not ABSENT:
                    _note(places.place_of(owner, attr))


_FIRST_IMPORTS = _FirstImports()


# -- the kind ------------------------------------------------------------------------------

class Patches:
    """Immutable: the watched places whose values differ from their originals, and those
    values (kept as set, not copied). Equal when they hold the same objects."""

    __slots__ = ("values", "_alone")

    def __init__(self, values):
        self.values = values
        self._alone = None

    def alone(self):
        """True if a value is a cell's function (``cellfunctions``): its cells run alone."""
        if self._alone is None:
            self._alone = cellfunctions.alone(self.values.values())
        return self._alone

    def __eq__(self, other):
        if not isinstance(other, Patches):
            return NotImplemented
        mine, theirs = self.values, other.values
        return mine.keys() == theirs.keys() and all(
            value is theirs[place] for place, value in mine.items())

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def __repr__(self):
        return f"Patches({sorted(self.values)})"

    def __reduce__(self):
        """Each value alone, by plain pickle; one that cannot be pickled so that another
        process finds it (a class defined in a cell) is left out."""
        kept = []
        for place, value in self.values.items():
            data = _pickled(value)
            if data is not None:
                kept.append((place, data))
        return (_unpickled, (tuple(kept),))


def place_name(place):
    """How a user writes ``place``: ``json.dumps``, ``pandas.DataFrame.total``,
    ``sys.modules['name']``."""
    owner, name = place
    if owner == MODULES:
        return f"sys.modules[{name!r}]"
    return f"{owner.replace(':', '.')}.{name}"


def describe(patches, cells_only=False):
    """The names of the places ``patches`` holds (those holding a cell's function)."""
    return [place_name(place) for place, value in patches.values.items()
            if not cells_only or cellfunctions.alone((value,))]


def may_patch(found, lookup):
    """The names of the places among ``found`` (a cell's ``patchsites.targets``) that are,
    or on a first import will be, attributes of modules or of their classes, ``lookup``
    giving the cell's state's names (``watch``'s): a cell that may patch them runs alone."""
    names = set()
    for chain, name in found:
        if chain[-1] == "[]":
            names.add(f"sys.modules[{name!r}]")
            continue
        try:
            owner = places.resolve(chain, lookup)
        except Exception:  # noqa: BLE001 - a metaclass's __module__ raised: not a place
            continue
        if owner is ABSENT:
            if chain[0].partition(" ")[0] in ("import", "from", "dotted"):
                names.add(".".join((_head_name(chain[0]),) + chain[1:] + (name,)))
            continue
        place = places.place_of(owner, name)
        if place is not None:
            names.add(place_name(place))
    return sorted(names)


def _head_name(head):
    kind, _, rest = head.partition(" ")
    if kind == "from":
        package, _, name = rest.partition(" import ")
        return f"{package}.{name}"
    return rest


def differing(a, b):
    """The names of the places where ``a`` and ``b`` (Patches, or None) hold other values."""
    mine, theirs = (a.values if a else {}), (b.values if b else {})
    return [place_name(place) for place in set(mine) | set(theirs)
            if mine.get(place, ABSENT) is not theirs.get(place, ABSENT)]


class _ByName(pickle.Pickler):
    """Refuses what only this process's cells can name."""

    def reducer_override(self, obj):
        if type(obj) is types.FunctionType and cellfunctions.is_twin(obj):
            return cellfunctions.reduce_twin(obj)  # a function of a cell, as its state keeps it
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
            module = getattr(obj, "__module__", None)
            if module == "__main__":
                raise pickle.PicklingError("defined in a cell")
            for place, original in list(_watched.items()):
                if original is obj:  # patched over (functools.partial(json.dumps)):
                    return _original, (place,)  # pickle would find the patch by its name
        return NotImplemented


def _original(place):
    """The value a place has before any cell of this process patches it."""
    if place in _watched:
        return _watched[place]
    return places.current(place, places.owner_of(place, importing=True))


def _pickled(value):
    buffer = io.BytesIO()
    try:
        _ByName(buffer, protocol=5).dump(value)
    except Exception:  # noqa: BLE001 - whatever a value's reduction raises: not saved
        return None
    return buffer.getvalue()


def _unpickled(kept):
    values = {}
    for place, data in kept:
        try:
            values[place] = pickle.loads(data)
        except Exception:  # noqa: BLE001 - its library changed since the save
            continue
    return Patches(values)


NONE = Patches({})


def _reading():
    """``[(place, mapping, key, original)]`` for the watched places: ``mapping.get(key,
    ABSENT)`` is the place's value (its module's or class's ``__dict__``, or
    ``sys.modules``), or None where the owner is not known yet. Made again only when
    a place is added or a module in it is replaced in ``sys.modules``: reading a place
    costs a dict lookup, which every cell pays for every watched place."""
    global _read_plan
    plan, modules = _read_plan  # one tuple, replaced whole: cells read it at once
    if len(plan) == len(_watched) and all(
            sys.modules.get(name, ABSENT) is module for name, module in modules.items()):
        return plan
    plan, modules = [], {}
    for place, original in list(_watched.items()):
        owner = places.owner_of(place)
        mapping = None
        if owner is sys.modules:
            mapping = sys.modules
        elif isinstance(owner, (type, types.ModuleType)):
            mapping = owner.__dict__
            module = place[0].partition(":")[0]
            modules[module] = sys.modules.get(module, ABSENT)
        plan.append((place, mapping, place[1], original))
    _read_plan = (plan, modules)
    return plan


_read_plan = ([], {})  # (the plan, {module name: the module it read it as})


def _unplanned(place, original):
    """The value of a place whose owner the plan did not find: its original while the
    owner is not there (not imported yet, or taken out of sys.modules), for nothing can
    be compared or put back then."""
    owner = places.owner_of(place)
    return original if owner is ABSENT else places.current(place, owner)


def _current(place, mapping, key, original):
    value = _unplanned(place, original) if mapping is None else mapping.get(key, ABSENT)
    return cellfunctions.twin_of(value) if cellfunctions.twinnable(value) else value


def read():
    if not _watched:
        return NONE
    values = {}
    for place, mapping, key, original in _reading():
        value = _current(place, mapping, key, original)
        if value is not original:
            values[place] = value
    return Patches(values) if values else NONE


def same(value):
    """``read() == value``, without making a Patches: every cell asks it."""
    if not _watched:
        return not value.values
    wanted = value.values
    for place, mapping, key, original in _reading():
        if _current(place, mapping, key, original) is not wanted.get(place, original):
            return False
    return len(wanted) <= len(_watched) and all(place in _watched for place in wanted)


def bind(working):
    """Before a cell, once its namespace is open: each watched place holding a function of
    a cell gets this cell's (``cellfunctions.bound``)."""
    cellfunctions.begin(working.namespace)
    if not _watched:
        return
    for place, mapping, key, original in _reading():
        value = _current(place, mapping, key, original)
        if cellfunctions.is_twin(value):
            owner = places.owner_of(place)
            if owner is not ABSENT:
                setattr(owner, place[1], cellfunctions.bound(value, working))


def unbind(working):
    """After a cell: the functions of its namespace in watched places get their twins now,
    while it counts as running, for its settings to be read as."""
    try:
        if _watched:
            for entry in _reading():
                _current(*entry)
    finally:
        cellfunctions.end(working.namespace)


def write(target):
    for place in target.values:
        if place not in _watched:  # a state saved by an earlier server: its original is
            owner = places.owner_of(place, importing=True)  # what this process has
            with _lock:
                _watched.setdefault(place, places.current(place, owner))
    for place, original in list(_watched.items()):
        wanted = target.values.get(place, original)
        owner = places.owner_of(place, importing=wanted is not original)
        if owner is ABSENT or places.current(place, owner) is wanted:
            continue
        if owner is sys.modules:
            if wanted is ABSENT:
                sys.modules.pop(place[1], None)
            else:
                sys.modules[place[1]] = wanted
        elif wanted is ABSENT:
            if place[1] in vars(owner):
                delattr(owner, place[1])
        else:
            setattr(owner, place[1], wanted)
