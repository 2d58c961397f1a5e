"""Places a cell may patch: an attribute of a module or of a class a module defines, or
a name in ``sys.modules``; how a cell's code names them (``patchsites``), how one is
found from such a name, and how its value is read without running descriptors."""

import importlib
import sys
import types


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


def resolve(chain, lookup, module=None):
    """The object ``chain`` (a target's head and attributes, ``patchsites``) names now;
    ABSENT if it names none. A head that is a name of the cell is ``lookup(name)``. With
    ``module`` (one being imported right now), a head naming that import is found from
    it rather than from ``sys.modules``."""
    head = chain[0]
    if head.startswith("import "):  # the module as the cell's import will find it
        value = sys.modules.get(head[7:], ABSENT) if module is None else module
    elif head.startswith("dotted "):
        value = dotted(head[7:], module)
    elif head.startswith("from "):
        package, _, name = head[5:].partition(" import ")
        if module is not None:  # the package, or its submodule ``name``
            value = module if module.__name__ == f"{package}.{name}" else \
                attribute(module, name)
        else:
            value = sys.modules.get(f"{package}.{name}", ABSENT)
            if value is ABSENT and package in sys.modules:
                value = attribute(sys.modules[package], name)
    else:
        value = lookup(head)
        value = ABSENT if value is None else value  # (dict.get)
    for name in chain[1:]:
        if value is ABSENT:
            break
        try:
            value = attribute(value, name)
        except Exception:  # noqa: BLE001 - a property of the user's raised: not a place
            return ABSENT
    return value


def dotted(path, module=None):
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
                found = attribute(found, part) if found is not ABSENT else ABSENT
            return found
    return ABSENT


def attribute(value, name):
    """``value.name`` without running a descriptor where the object is a module or class."""
    if isinstance(value, types.ModuleType):
        return value.__dict__.get(name, ABSENT)
    return getattr(value, name, ABSENT)


def place_of(owner, name):
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
            found = attribute(found, part) if found is not ABSENT else ABSENT
        if found is not owner:  # a class of a cell, or one its module does not name
            return None
        return (f"{module}:{qualname}", name)
    return None


def owner_of(place, importing=False):
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
        module = attribute(module, part) if module is not ABSENT else ABSENT
    return module


def current(place, owner=None):
    owner = owner_of(place) if owner is None else owner
    if owner is ABSENT:
        return ABSENT
    if owner is sys.modules:
        return sys.modules.get(place[1], ABSENT)
    if isinstance(owner, type):
        return owner.__dict__.get(place[1], ABSENT)
    return vars(owner).get(place[1], ABSENT)
