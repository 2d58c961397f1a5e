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
import importlib
import io
import pickle
import sys
import threading
import types

from . import imports


class _Absent:
    """The value of a place that has none (a deleted attribute, a module not in
    ``sys.modules``); pickled by name, so it stays itself after a restart."""

    def __repr__(self):
        return "ABSENT"

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()
MODULES = "sys.modules"  # the owner of a place in sys.modules; else a module's name,
# or "module:Qual.Name" for a class

# Attributes the kernel itself keeps in place (its streams) or another kind follows.
_NOT_FOLLOWED = {"sys": frozenset({"stdout", "stderr", "stdin", "displayhook", "excepthook",
                                   "path", "modules", "__stdout__", "__stderr__"})}

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
            owner = _resolve(chain, lookup)
            if owner is not ABSENT:
                _note(_place(owner, name))
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
                _watched[place] = _current(place)


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
                head = chain[0]
                if head.startswith("dotted "):
                    owner = _dotted(head[7:], module)
                elif head.startswith("import ") or module.__name__ == head[5:].replace(
                        " import ", "."):  # `import m`, or `from m import sub` of a submodule
                    owner = module
                else:
                    owner = _attribute(module, head[5:].partition(" import ")[2])
                for part in chain[1:]:
                    owner = _attribute(owner, part) if owner is not ABSENT else ABSENT
                if owner is not ABSENT:
                    _note(_place(owner, attr))


_FIRST_IMPORTS = _FirstImports()


def _resolve(chain, lookup):
    head = chain[0]
    if head.startswith("import "):  # the module as the cell's import will find it
        value = sys.modules.get(head[7:], ABSENT)
    elif head.startswith("dotted "):
        value = _dotted(head[7:])
    elif head.startswith("from "):
        module, _, name = head[5:].partition(" import ")
        value = sys.modules.get(f"{module}.{name}", ABSENT)
        if value is ABSENT and module in sys.modules:
            value = _attribute(sys.modules[module], name)
    else:
        value = lookup(head)
        value = ABSENT if value is None else value  # (dict.get)
    for name in chain[1:]:
        if value is ABSENT:
            break
        try:
            value = _attribute(value, name)
        except Exception:  # noqa: BLE001 - a property of the user's raised: not a place
            return ABSENT
    return value


def _dotted(path, module=None):
    """What ``"mod.sub.Class"`` names, as ``mock.patch`` finds it: its longest prefix that
    is an imported module (or ``module``, if given, whose name is a prefix), then
    attributes; ABSENT if no prefix is imported."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        found = sys.modules.get(name, ABSENT) if module is None else \
            module if module.__name__ == name else ABSENT
        if found is not ABSENT:
            for part in parts[end:]:
                found = _attribute(found, part) if found is not ABSENT else ABSENT
            return found
    return ABSENT


def _attribute(value, name):
    """``value.name`` without running a descriptor where the object is a module or class."""
    if isinstance(value, types.ModuleType):
        return value.__dict__.get(name, ABSENT)
    return getattr(value, name, ABSENT)


def _place(owner, name):
    """The place ``owner.name`` if ``owner`` is shared by every state (a module, or a
    class a module defines), else None."""
    if isinstance(owner, types.ModuleType):
        module = owner.__name__
        if not isinstance(module, str) or sys.modules.get(module) is not owner \
                or module == "__main__" or module.split(".")[0] == "snapshot_kernel" \
                or name in _NOT_FOLLOWED.get(module, ()):
            return None
        return (module, name)
    if isinstance(owner, type):
        module, qualname = getattr(owner, "__module__", None), getattr(owner, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or \
                module == "__main__" or "<locals>" in qualname:
            return None
        found = sys.modules.get(module, ABSENT)
        for part in qualname.split("."):
            found = _attribute(found, part) if found is not ABSENT else ABSENT
        if found is not owner:  # a class of a cell, or one its module does not name
            return None
        return (f"{module}:{qualname}", name)
    return None


def _owner(place, importing=False):
    """The object a place belongs to; ABSENT if its module is not imported."""
    owner, _, qualname = place[0].partition(":")
    if owner == MODULES:
        return sys.modules
    module = sys.modules.get(owner, ABSENT)
    if module is ABSENT and importing:
        try:
            module = importlib.import_module(owner)
        except Exception:  # noqa: BLE001 - gone since the state was saved
            return ABSENT
    for part in qualname.split(".") if qualname else ():
        module = _attribute(module, part) if module is not ABSENT else ABSENT
    return module


def _current(place, owner=None):
    owner = _owner(place) if owner is None else owner
    if owner is ABSENT:
        return ABSENT
    if owner is sys.modules:
        return sys.modules.get(place[1], ABSENT)
    if isinstance(owner, type):
        return owner.__dict__.get(place[1], ABSENT)
    return vars(owner).get(place[1], ABSENT)


# -- the kind ------------------------------------------------------------------------------

class Patches:
    """Immutable: the watched places whose values differ from their originals, and those
    values (kept as set, not copied). Equal when they hold the same objects."""

    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values

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
        process finds it (a function defined in a cell) is left out."""
        kept = []
        for place, value in self.values.items():
            data = _pickled(value)
            if data is not None:
                kept.append((place, data))
        return (_unpickled, (tuple(kept),))


class _ByName(pickle.Pickler):
    """Refuses what only this process's cells can name."""

    def reducer_override(self, obj):
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
    return _watched[place] if place in _watched else _current(place, _owner(place, True))


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
        owner = _owner(place)
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
    owner = _owner(place)
    return original if owner is ABSENT else _current(place, owner)


def read():
    if not _watched:
        return NONE
    values = {}
    for place, mapping, key, original in _reading():
        value = _unplanned(place, original) if mapping is None else mapping.get(key, ABSENT)
        if value is not original:
            values[place] = value
    return Patches(values) if values else NONE


def same(value):
    """``read() == value``, without making a Patches: every cell asks it."""
    if not _watched:
        return not value.values
    wanted = value.values
    for place, mapping, key, original in _reading():
        current = _unplanned(place, original) if mapping is None else \
            mapping.get(key, ABSENT)
        if current is not wanted.get(place, original):
            return False
    return len(wanted) <= len(_watched) and all(place in _watched for place in wanted)


def write(target):
    for place in target.values:
        if place not in _watched:  # a state saved by an earlier server: its original is
            owner = _owner(place, importing=True)  # what this process has
            with _lock:
                _watched.setdefault(place, _current(place, owner))
    for place, original in list(_watched.items()):
        wanted = target.values.get(place, original)
        owner = _owner(place, importing=wanted is not original)
        if owner is ABSENT or _current(place, owner) is wanted:
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
