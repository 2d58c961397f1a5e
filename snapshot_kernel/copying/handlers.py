"""The copier's handlers for Python's own types.

Each handler takes ``(copier, obj)`` and returns the copy, or a generator
that yields the objects it needs copied, is sent their copies, and returns
the new object (see ``Copier._walk`` for what happens when a part fails).
Library handlers live in their own modules (``snapshot_kernel.libraries``).
"""

import abc
import functools
import gc
import itertools
import sys
import types
import weakref

from . import views
from .dispatch import ATOMIC, Pending, Uncopyable, is_dunder, register
from .stored import StoredNamespace

COPYABLE_METACLASSES = (type, abc.ABCMeta)
# Class attributes that hold functions, which must be rebound even under dunder names.
_CODE_CARRIERS = (types.FunctionType, staticmethod, classmethod, property)
# Made afresh by the metaclass for every class, never carried over.
CLASS_SKIP = frozenset({"__dict__", "__weakref__", "_abc_impl"})


# -- containers: each element is copied, or shared alone ----------------------------------
# Each starts from a C-level snapshot (list(obj), dict.copy(obj)): a thread the cell
# started may be changing the container while it is stored, and the copy must be of one
# moment, not a mix (or a "changed size during iteration" error).

def copy_list(copier, obj):
    new = []
    copier.memo[id(obj)] = new
    items = list(obj)
    attempt = copier.attempt
    for index, item in enumerate(items):  # most elements need no generator
        if type(item) not in ATOMIC:
            item = attempt(item)
            if type(item) is Pending:
                return _copy_list_rest(copier, new, items, index, item)
        new.append(item)
    return new


def _copy_list_rest(copier, new, items, start, pending):
    new.append((yield pending))
    attempt = copier.attempt
    for item in itertools.islice(items, start + 1, None):
        if type(item) not in ATOMIC:
            item = attempt(item)
            if type(item) is Pending:
                item = yield item
        new.append(item)
    return new


def copy_dict(copier, obj):
    new = {}
    copier.memo[id(obj)] = new
    items = iter(dict.copy(obj).items())  # PyDict_Copy runs no Python code: one moment
    attempt = copier.attempt
    for key, value in items:
        if type(key) not in ATOMIC:
            key = attempt(key)
            if type(key) is Pending:
                return _copy_dict_rest(copier, new, items, key, value)
        if type(value) not in ATOMIC:
            value = attempt(value)
            if type(value) is Pending:
                return _copy_dict_rest(copier, new, items, key, value)
        new[key] = value
    return new


def _copy_dict_rest(copier, new, items, key, value):
    """Generator: ``copy_dict`` from the item whose key (or else value) is pending on,
    then the rest of ``items``."""
    if type(key) is Pending:
        key = yield key
        if type(value) not in ATOMIC:
            value = copier.attempt(value)
    new[key] = (yield value) if type(value) is Pending else value
    attempt = copier.attempt
    for key, value in items:
        if type(key) not in ATOMIC:
            key = attempt(key)
            if type(key) is Pending:
                key = yield key
        if type(value) not in ATOMIC:
            value = attempt(value)
            if type(value) is Pending:
                value = yield value
        new[key] = value
    return new


def copy_tuple(copier, obj):
    items = []
    attempt = copier.attempt
    for index, item in enumerate(obj):
        if type(item) not in ATOMIC:
            item = attempt(item)
            if type(item) is Pending:
                return _copy_tuple_rest(copier, obj, items, index, item)
        items.append(item)
    return obj if all(a is b for a, b in zip(items, obj)) else tuple(items)


def _copy_tuple_rest(copier, obj, items, start, pending):
    items.append((yield pending))
    attempt = copier.attempt
    for item in itertools.islice(obj, start + 1, None):
        if type(item) not in ATOMIC:
            item = attempt(item)
            if type(item) is Pending:
                item = yield item
        items.append(item)
    if id(obj) in copier.memo:  # a cycle through a mutable item copied it already
        return copier.memo[id(obj)]
    return obj if all(a is b for a, b in zip(items, obj)) else tuple(items)


def copy_namespace(copier, namespace):
    return copier.target


# -- functions and what wraps them ------------------------------------------------------

def copy_function(copier, fn):
    if type(fn.__globals__) is not StoredNamespace and id(fn.__globals__) not in copier.aliases:
        return fn  # library code: shared, like the module that defines it
    cells = tuple(_empty_cell(copier, cell) for cell in fn.__closure__ or ())
    new = types.FunctionType(fn.__code__, copier.target, fn.__name__, None, cells or None)
    copier.memo[id(fn)] = new  # before the contents: they may refer back to fn
    return _fill_function(copier, fn, new, cells)


def _fill_function(copier, fn, new, cells):
    for cell, twin in zip(fn.__closure__ or (), cells):
        yield from _fill_cell(cell, twin)
    new.__defaults__ = yield fn.__defaults__
    new.__kwdefaults__ = yield fn.__kwdefaults__
    new.__annotations__ = yield fn.__annotations__
    new.__dict__.update((yield fn.__dict__))
    copier.codes.append(fn.__code__)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    if hasattr(fn, "__type_params__"):
        new.__type_params__ = fn.__type_params__
    return new


def _empty_cell(copier, cell):
    twin = copier.memo.get(id(cell))  # a hit groups the closures sharing the cell
    if twin is None:
        twin = copier.memo[id(cell)] = types.CellType()
        copier.keep_alive.append(cell)
        if copier.covariables is not None:  # closures sharing a cell: one group
            copier.covariables.copied(id(cell), cell, copier.label, True)
    return twin


def _fill_cell(cell, twin):
    try:
        contents = cell.cell_contents
    except ValueError:  # an empty cell: the variable is not bound yet
        return
    twin.cell_contents = yield contents


def copy_cell(copier, cell):
    twin = _empty_cell(copier, cell)
    yield from _fill_cell(cell, twin)
    return twin


def copy_wrapper(copier, obj):
    return type(obj)((yield obj.__func__))


def copy_property(copier, obj):
    parts = []
    for part in (obj.fget, obj.fset, obj.fdel):
        parts.append((yield part))
    return type(obj)(*parts, obj.__doc__)


def copy_method(copier, obj):
    return types.MethodType((yield obj.__func__), (yield obj.__self__))


def copy_builtin_method(copier, obj):
    """``results.append``: the same method of the copied object."""
    owner = obj.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        return obj  # a plain builtin function such as len
    return getattr((yield owner), obj.__name__)


def copy_lru_cache(copier, obj):
    """An ``@lru_cache`` function: the copied function behind a cache of its own; a
    library's module-level one is the library's, shared as its module is."""
    if importable(obj):
        return obj
    wrapped = yield obj.__wrapped__
    parameters = obj.cache_parameters()
    new = functools.lru_cache(parameters["maxsize"], parameters["typed"])(wrapped)
    new.__dict__.update((yield obj.__dict__))
    return new


def importable(obj):
    """True if ``obj`` is what the attribute of its qualified name in its module holds, in
    a library's module (a cell's ``__main__`` is the state itself)."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or module == "__main__":
        return False
    found = sys.modules.get(module)
    for part in getattr(obj, "__qualname__", "<locals>").split("."):
        found = getattr(found, part, None) if part != "<locals>" else None
    return found is obj


def copy_mappingproxy(copier, obj):
    """A read-only view of a dict: a view of the copied dict."""
    return types.MappingProxyType((yield gc.get_referents(obj)[0]))


def copy_memoryview(copier, view):
    """A view of the copied exporter, laid out as ``view`` is over its own (``views``)."""
    try:
        exporter = view.obj
    except ValueError:  # released: it shows nothing any more
        return view
    try:
        place = views.layout(view)
    except views.Unrebuildable as exc:
        raise Uncopyable(f"a memoryview that cannot be made again: {exc}") from None
    return views.rebuild((yield exporter), place)


# -- weak references ----------------------------------------------------------------------

class _Gone:
    """A referent for dead weak references: one made and dropped."""


def _dead_ref():
    return weakref.ref(_Gone())


def copy_weakref(copier, ref):
    """A weak reference to the copied referent, with the copied callback."""
    referent = ref()
    if referent is None:
        return _dead_ref()
    callback = ref.__callback__
    target = yield referent
    return weakref.ref(target, (yield callback) if callback is not None else None)


def copy_weak_method(copier, ref):
    method = ref()
    return _dead_ref() if method is None else weakref.WeakMethod((yield method))


def copy_weak_value_dict(copier, obj):
    new = type(obj)()
    copier.memo[id(obj)] = new
    for key, value in list(obj.items()):
        new[(yield key)] = yield value
    return new


def copy_weak_key_dict(copier, obj):
    new = type(obj)()
    copier.memo[id(obj)] = new
    for key, value in list(obj.items()):
        new[(yield key)] = yield value
    return new


def copy_weak_set(copier, obj):
    new = type(obj)()
    copier.memo[id(obj)] = new
    for item in list(obj):
        new.add((yield item))
    return new


# -- classes ----------------------------------------------------------------------------------

def copy_cell_class(copier, cls):
    """A class defined by a cell: a new class with copied attributes."""
    outer, copier.inside_object = copier.inside_object, 0  # a class is a unit of its own
    try:
        return (yield from _copy_own_class(copier, cls))
    finally:
        copier.inside_object = outer


def _copy_own_class(copier, cls):
    if type(cls) not in COPYABLE_METACLASSES:
        raise Uncopyable(f"class {cls.__qualname__} has metaclass "
                         f"{type(cls).__name__}, which is not copied")
    bases = []
    copier.inside_object += 1  # a base that fails is the class's failure, not shared alone
    try:
        for base in cls.__bases__:
            bases.append((yield base))
    finally:
        copier.inside_object -= 1
    if id(cls) in copier.memo:  # a base's attribute led back here and copied it
        return copier.memo[id(cls)]
    body = cls.__dict__
    init = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": body.get("__doc__")}
    if "__slots__" in body:
        init["__slots__"] = body["__slots__"]
    new = _quiet_class(type(cls), cls.__name__, tuple(bases), init, copier.made_classes)
    copier.made_classes.add(id(new))
    copier.memo[id(cls)] = new  # before the attributes: methods refer back to it
    for name, value in list(body.items()):  # copyreg caches __slotnames__ on cls
        if name in init or name in CLASS_SKIP or _is_slot_of(value, cls):
            continue
        if is_dunder(name) and not isinstance(value, _CODE_CARRIERS):
            setattr(new, name, value)  # Python's or a library's metadata (__dataclass_fields__)
        else:
            setattr(new, name, (yield value))
    if getattr(cls, "__abstractmethods__", None):
        new.__abstractmethods__ = cls.__abstractmethods__
    return new


def _quiet_class(meta, name, bases, init, made_classes):
    """``meta(name, bases, init)`` without re-running a cell's ``__init_subclass__``.

    The hook ran when the original class was made; running it again for the copy
    would register it twice, or fail for want of the class keywords it got then.
    Only a hook on a class this copy made (``made_classes``, by id) is silenced,
    and only for this call: nothing stored or shared is ever touched.
    """
    definer = next((klass for base in bases for klass in base.__mro__
                    if "__init_subclass__" in vars(klass) and klass is not object), None)
    if definer is None or id(definer) not in made_classes:
        return meta(name, bases, init)
    hook = vars(definer)["__init_subclass__"]
    definer.__init_subclass__ = classmethod(_ignore)
    try:
        return meta(name, bases, init)
    finally:
        definer.__init_subclass__ = hook


def _ignore(*args, **kwargs):
    return None


def _is_slot_of(value, cls):
    return isinstance(value, types.MemberDescriptorType) and value.__objclass__ is cls


for _cls, _handler in [
        (StoredNamespace, copy_namespace), (list, copy_list), (dict, copy_dict),
        (tuple, copy_tuple), (types.FunctionType, copy_function), (types.CellType, copy_cell),
        (staticmethod, copy_wrapper), (classmethod, copy_wrapper), (property, copy_property),
        (types.MethodType, copy_method), (types.BuiltinMethodType, copy_builtin_method),
        (types.MethodWrapperType, copy_builtin_method), (weakref.ref, copy_weakref),
        (weakref.WeakMethod, copy_weak_method), (types.MappingProxyType, copy_mappingproxy),
        (weakref.WeakValueDictionary, copy_weak_value_dict),
        (weakref.WeakKeyDictionary, copy_weak_key_dict), (weakref.WeakSet, copy_weak_set),
        (functools._lru_cache_wrapper, copy_lru_cache), (memoryview, copy_memoryview)]:
    register(_cls, _handler)
# A module of a class of its own (a lazy module, or one whose attribute is held per cell)
# is a module all the same: shared by design, as ATOMIC has plain ones.
register(types.ModuleType, lambda copier, module: module, subclasses=True)
