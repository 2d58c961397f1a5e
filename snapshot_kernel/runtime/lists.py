"""Lists of the interpreter held per cell: ``sys.path`` and ``warnings.filters``; and a
module's dict held the same way (numpy's print options before 2.1).

In a thread holding a cell's settings each is the cell's own list, made on first use
from the process's list and the state's value; elsewhere the process's.

- ``warnings.filters``: the module's class becomes one with a ``filters`` property.
  The C warnings machinery reads the list through that attribute. The functions of
  ``warnings`` that named it as a global (``_add_filter``, ``resetwarnings``) are
  replaced by ones that go through the attribute.
- ``sys.path``: the class of ``sys`` cannot change (``type(sys)`` is how the import
  system makes every module), so ``sys.path`` is a list whose methods act on the
  calling cell's list (``HeldPath``). The import system iterates it through them. C
  code that reads its items directly (``os.pathsep.join(sys.path)``, ``json``) reads
  the process's; a cell that assigns ``sys.path = [...]`` replaces it for every thread
  until the cell ends, when its list becomes the cell's own.

A state's value says how its list differs from the process's: None (it does not),
``("around", before, after)`` (the process's list with entries before and after it:
``sys.path.insert(0, ...)``, ``warnings.simplefilter(...)``), or ``("list", entries)``.
So a state follows the server's own list, which a restart elsewhere may change.
"""

import sys
import warnings

from .held import current


class HeldList:
    """The module attribute ``attribute`` of ``module``, held per cell as kind ``name``."""

    def __init__(self, name, module, attribute):
        self.name, self.module, self.attribute = name, module, attribute

    def process_list(self):
        return vars(self.module)[self.attribute]

    def working(self, held):
        found = held.working.get(self.name)
        if found is None:
            found = held.working[self.name] = made(held.values.get(self.name),
                                                   self.process_list())
        return found

    def leave(self, held, value):
        """The state's new value: ``value`` itself unless the cell changed its list."""
        working = held.working.get(self.name)
        if working is None or working == made(value, self.process_list()):
            return value
        return relative(working, self.process_list())

    def install(self):
        """Make the attribute per cell; idempotent."""
        kind = type(self.module)
        if getattr(kind, "_snapshot_kernel_held", None) is None:
            kind = type(f"Held_{self.module.__name__}", (kind,), {"_snapshot_kernel_held": {}})
            self.module.__class__ = kind
        if self.attribute not in kind._snapshot_kernel_held:
            kind._snapshot_kernel_held[self.attribute] = self
            setattr(kind, self.attribute, property(self._get, self._set))

    def _get(self, module):
        held = current()
        return vars(module)[self.attribute] if held is None else self.working(held)

    def _set(self, module, value):
        held = current()
        if held is None:
            vars(module)[self.attribute] = value
        else:
            held.working[self.name] = value


class _Path(HeldList):
    """``sys.path``, held per cell through a ``HeldPath`` in ``sys``'s dict."""

    def process_list(self):
        found = vars(sys)["path"]
        return list.copy(found) if type(found) is HeldPath else found

    def leave(self, held, value):
        found = vars(sys)["path"]
        if type(found) is not HeldPath:  # the cell assigned sys.path: its list is the cell's
            held.working[self.name] = found
            self.install()
        return super().leave(held, value)

    def install(self):
        """Put a HeldPath in place, holding the process's entries; idempotent (and again
        after anyone assigned ``sys.path``)."""
        found = vars(sys)["path"]
        if type(found) is not HeldPath:
            sys.path = HeldPath(found if type(found) is list else list(found))


def _on_target(name, returns_self=False):
    method = getattr(list, name)

    def on_target(self, *args):
        held = current()
        target = self if held is None else PATH.working(held)
        result = method(target, *args)
        return self if returns_self else result

    on_target.__name__ = name
    return on_target


class HeldPath(list):
    """``sys.path``: every method acts on the calling cell's list (``PATH.working``), or
    on this list's own items, the process's, where no cell is held."""

    __slots__ = ()
    __hash__ = None

    def __reduce_ex__(self, protocol):
        return (list, (list(iter(self)),))

    def __copy__(self):
        return list(iter(self))

    def __deepcopy__(self, memo):
        return list(iter(self))


for _name in ("__getitem__", "__setitem__", "__delitem__", "__len__", "__iter__",
              "__reversed__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
              "__ge__", "__add__", "__mul__", "__rmul__", "__repr__", "append", "extend",
              "insert", "remove", "pop", "clear", "index", "count", "copy", "reverse", "sort"):
    setattr(HeldPath, _name, _on_target(_name))
# ``sys.path += [...]`` assigns its result to sys.path: the HeldPath itself
HeldPath.__iadd__ = _on_target("__iadd__", returns_self=True)
HeldPath.__imul__ = _on_target("__imul__", returns_self=True)


class HeldDict(dict):
    """A module's global dict that its module reads through methods (numpy's
    ``_format_options`` before numpy 2.1): in a thread holding a cell's settings every
    method acts on the cell's copy (kind ``name``), made from this dict's own items,
    the process's, on first use."""

    __slots__ = ("name",)
    __hash__ = None

    def _target(self):
        held = current()
        if held is None:
            return self
        found = held.working.get(self.name)
        if found is None:
            found = held.working[self.name] = dict(dict.items(self))  # (not copy: it would
            # read this dict through its keys method, which would end up here)
        return found


def _on_dict(name):
    method = getattr(dict, name)

    def on_target(self, *args, **kwargs):
        return method(self._target(), *args, **kwargs)

    on_target.__name__ = name
    return on_target


for _name in ("__getitem__", "__setitem__", "__delitem__", "__len__", "__iter__", "__contains__",
              "__eq__", "__ne__", "__repr__", "get", "keys", "values", "items", "copy", "update",
              "pop", "setdefault", "clear"):
    setattr(HeldDict, _name, _on_dict(_name))


def hold_dict(module, attribute, name):
    """Make ``module.attribute`` (a dict the module reads by its global name) a HeldDict
    for kind ``name``; idempotent."""
    found = vars(module).get(attribute)
    if type(found) is dict:
        held_dict = HeldDict(found)
        held_dict.name = name
        setattr(module, attribute, held_dict)


def made(value, process):
    """The list a state's ``value`` makes of the process's list."""
    if value is None:
        return list(process)
    if value[0] == "around":
        return [*value[1], *process, *value[2]]
    return list(value[1])


def relative(entries, process):
    """``entries`` as a value (see the module's docstring) against ``process``."""
    entries, size = list(entries), len(process)
    if entries == process:
        return None
    if size == 0:
        return ("around", tuple(entries), ())
    for start in range(len(entries) - size + 1):
        if entries[start] == process[0] and entries[start:start + size] == process:
            return ("around", tuple(entries[:start]), tuple(entries[start + size:]))
    return ("list", tuple(entries))


PATH = _Path("sys.path", sys, "path")
FILTERS = HeldList("warnings", warnings, "filters")


def _add_filter(*item, append):
    """``warnings._add_filter``, through the attribute (the list of the calling cell)."""
    filters = warnings.filters
    if not append:
        try:
            filters.remove(item)
        except ValueError:
            pass
        filters.insert(0, item)
    elif item not in filters:
        filters.append(item)
    warnings._filters_mutated()


def _resetwarnings():
    """Clear the list of warning filters, so that no filters are active."""
    warnings.filters[:] = []
    warnings._filters_mutated()


def install():
    """Hold ``sys.path`` and ``warnings.filters`` per cell; idempotent."""
    PATH.install()
    FILTERS.install()
    if warnings._add_filter is not _add_filter:
        warnings._add_filter, warnings.resetwarnings = _add_filter, _resetwarnings

