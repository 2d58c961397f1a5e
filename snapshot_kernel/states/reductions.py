"""The state pickler's reductions: what pickle refuses or would get wrong, as ``persist``
saves it (``REDUCERS``, by exact type, and the few ``persist.Pickler`` finds otherwise).

* functions defined by cells (globals a StoredNamespace) by value: code (``marshal``),
  defaults, closure (its cells pickled empty and filled once their functions exist, so a
  function whose closure holds itself comes back), ``__dict__``;
* classes defined by cells (metaclass ``type`` or ``ABCMeta``) by value, without running
  a cell's ``__init_subclass__`` again;
* modules by name; weak references, weak dicts and sets, ``lru_cache`` functions, static
  and class methods, properties, mapping proxies, memoryviews (as views of their
  exporter), iterators of Python's containers (with their type and place), thread-locals.

The ``_make_*`` and ``_set_*`` functions are named in pickles on disk and in archives:
keep their names. Pickles written before this module existed name them in ``persist``
(``NAMED_IN_PICKLES``, which ``persist.Unpickler`` looks here for).
"""

import functools
import gc
import importlib
import marshal
import pickle
import sys
import types
import weakref

from ..copying import iterators, views
from ..copying.handlers import CLASS_SKIP, COPYABLE_METACLASSES, importable
from ..copying.stored import STORED_GLOBALS, StoredNamespace
from ..libraries import _thread as thread_locals


def _reduce_function(pickler, fn):
    if type(fn.__globals__) is not StoredNamespace:
        return NotImplemented  # a library's: by reference, as pickle does
    cells = fn.__closure__  # pickled empty (_reduce_cell): shared cells stay shared
    contents = [_cell_contents(cell) for cell in cells or ()]
    state = {"defaults": fn.__defaults__, "kwdefaults": fn.__kwdefaults__,
             "annotations": fn.__annotations__, "dict": fn.__dict__, "closure": contents,
             "qualname": fn.__qualname__, "module": fn.__module__, "doc": fn.__doc__,
             "type_params": getattr(fn, "__type_params__", None)}
    args = (marshal.dumps(fn.__code__), fn.__name__, cells)
    return _make_function, args, state, None, None, _set_function_state


def _reduce_cell(pickler, cell):
    """A closure cell, empty: its functions' states fill it, after they exist, so a
    function whose closure holds itself can be rebuilt."""
    return _make_cell, ()


def _make_cell():
    return types.CellType()


class _Empty:
    """What an empty closure cell holds in a pickle; pickled by name, so it stays one object."""

    def __reduce__(self):
        return "_EMPTY"


_EMPTY = _Empty()


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: the variable is not bound yet
        return _EMPTY


def _make_function(code, name, cells):
    return types.FunctionType(marshal.loads(code), STORED_GLOBALS, name, None, cells)


def _set_function_state(fn, state):
    for cell, value in zip(fn.__closure__ or (), state["closure"]):
        if value is not _EMPTY:
            cell.cell_contents = value
    fn.__defaults__, fn.__kwdefaults__ = state["defaults"], state["kwdefaults"]
    fn.__annotations__ = state["annotations"]
    fn.__dict__.update(state["dict"])
    fn.__qualname__, fn.__module__, fn.__doc__ = state["qualname"], state["module"], state["doc"]
    if state["type_params"] is not None:
        fn.__type_params__ = state["type_params"]
    return fn


def reduce_class(cls):
    if type(cls) not in COPYABLE_METACLASSES:
        raise pickle.PicklingError(f"class {cls.__qualname__} has metaclass "
                                   f"{type(cls).__name__}, which cannot be saved")
    body = cls.__dict__
    init = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": body.get("__doc__")}
    if "__slots__" in body:
        init["__slots__"] = body["__slots__"]
    attributes = {name: value for name, value in body.items()
                  if name not in init and name not in CLASS_SKIP
                  and not (isinstance(value, types.MemberDescriptorType)
                           and value.__objclass__ is cls)}
    abstract = tuple(getattr(cls, "__abstractmethods__", ()))
    return (_make_class, (type(cls), cls.__name__, cls.__bases__, init),
            (attributes, abstract), None, None, _set_class_state)


def _make_class(meta, name, bases, init):
    """The class, without running again an ``__init_subclass__`` a cell defined: it ran
    when the class was first made (a library's runs, as in a fresh process)."""
    from ..copying.handlers import _quiet_class
    cells_classes = {id(klass) for base in bases for klass in base.__mro__
                     if klass.__module__ == "__main__"}
    return _quiet_class(meta, name, bases, init, cells_classes)


def _set_class_state(cls, state):
    attributes, abstract = state
    for name, value in attributes.items():
        setattr(cls, name, value)
    if abstract:
        cls.__abstractmethods__ = frozenset(abstract)
    return cls


def reduce_module(pickler, module):
    if sys.modules.get(module.__name__) is not module:
        raise pickle.PicklingError(f"module {module.__name__} cannot be imported by name")
    return importlib.import_module, (module.__name__,)


def _reduce_weakref(pickler, ref):
    return _make_weakref, (ref(), ref.__callback__)


def _make_weakref(referent, callback):
    class Gone:
        pass

    return weakref.ref(referent if referent is not None else Gone(), callback)


def _reduce_weak_container(pickler, obj):
    items = list(obj.items()) if hasattr(obj, "items") else list(obj)
    return _make_weak_container, (type(obj), items)


def _make_weak_container(kind, items):
    made = kind()
    if isinstance(made, weakref.WeakSet):
        for item in items:
            made.add(item)
    else:
        made.update(items)
    return made


def _reduce_lru_cache(pickler, obj):
    if importable(obj):  # a library's module-level cached function: by reference, as
        return NotImplemented  # pickle does (its __wrapped__ is not what its name finds)
    parameters = obj.cache_parameters()
    attributes = {name: value for name, value in obj.__dict__.items()  # lru_cache sets these
                  if name not in ("__wrapped__", "cache_parameters")}
    return _make_lru_cache, (obj.__wrapped__, parameters["maxsize"], parameters["typed"],
                             attributes)


def _make_lru_cache(wrapped, maxsize, typed, attributes):
    made = functools.lru_cache(maxsize, typed)(wrapped)
    made.__dict__.update(attributes)
    return made


def reduce_local(obj):
    """A thread-local: its lineage's values (``libraries/_thread.py``)."""
    return _make_local, (type(obj), thread_locals.lineage_values(obj))


def _make_local(cls, values):
    return thread_locals.stored_local(cls, values)


def _reduce_wrapper(pickler, obj):
    return type(obj), (obj.__func__,)


def _reduce_property(pickler, obj):
    return property, (obj.fget, obj.fset, obj.fdel, obj.__doc__)


def _reduce_mappingproxy(pickler, obj):
    return types.MappingProxyType, (gc.get_referents(obj)[0],)  # the dict it shows


def _reduce_memoryview(pickler, view):
    try:
        return _make_memoryview, (view.obj, *views.layout(view))
    except (ValueError, views.Unrebuildable) as exc:  # released, or laid out past rebuilding
        raise pickle.PicklingError(f"memoryview: {exc}") from None


def _make_memoryview(exporter, *layout):
    return views.rebuild(exporter, views.Layout(*layout))


def _reduce_iterator(pickler, it):
    try:
        found = iterators.reduction(it)
    except ValueError as exc:
        raise pickle.PicklingError(str(exc)) from None
    return NotImplemented if found is None else found


def _reduce_namespace(pickler, obj):
    return _stored_globals, ()


def _stored_globals():
    return STORED_GLOBALS


REDUCERS = {
    types.FunctionType: _reduce_function, types.ModuleType: reduce_module,
    types.CellType: _reduce_cell,
    weakref.ref: _reduce_weakref, weakref.WeakValueDictionary: _reduce_weak_container,
    weakref.WeakKeyDictionary: _reduce_weak_container, weakref.WeakSet: _reduce_weak_container,
    functools._lru_cache_wrapper: _reduce_lru_cache, staticmethod: _reduce_wrapper,
    classmethod: _reduce_wrapper, property: _reduce_property,
    types.MappingProxyType: _reduce_mappingproxy, StoredNamespace: _reduce_namespace,
    memoryview: _reduce_memoryview, **dict.fromkeys(iterators.TYPES, _reduce_iterator),
}

# What pickles name in this module; written before it existed, they named ``persist``.
NAMED_IN_PICKLES = frozenset({
    "_make_function", "_set_function_state", "_make_cell", "_EMPTY", "_make_class",
    "_set_class_state", "_make_weakref", "_make_weak_container", "_make_lru_cache",
    "_make_local", "_make_memoryview", "_stored_globals"})
