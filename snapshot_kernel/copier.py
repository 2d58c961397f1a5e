"""Deep-copy a namespace so that the copy behaves like an independent process.

``copy.deepcopy`` treats functions and classes as atomic, so a function copied
with it keeps reading the globals of the namespace that defined it. The copier
here follows deepcopy's protocol (``__deepcopy__``, copyreg, ``__reduce_ex__``)
with one memo for the whole namespace, so aliases stay aliases at any depth,
and in addition

* rebinds functions defined by cells (their ``__globals__`` is a stored state's
  namespace or the running one) to the target namespace, copying their closure
  cells, defaults and ``__dict__``;
* copies classes defined by cells (``__module__ == "__main__"``, metaclass
  ``type`` or ``ABCMeta``), so class attributes are private to the copy and
  copied instances are instances of the copied class;
* records, when asked, which names reach the same objects (co-variables);
* shares by reference what it cannot copy: modules always, and any value whose
  copy fails (locks, generators, open files, threads). A failure is contained
  at the nearest top-level name, class attribute or element of a list, dict or
  tuple; the reason is recorded under the top-level name.

Not handled: objects whose own ``__deepcopy__`` calls ``copy.deepcopy`` copy
their contents the standard way (functions inside keep their old globals);
classes with other metaclasses (``Enum``, most ORMs) are shared.
"""

import abc
import copyreg
import itertools
import threading
import types
import weakref

from .covariables import CoVariables

ATOMIC = frozenset({
    type(None), int, float, bool, complex, str, bytes, range, type(Ellipsis),
    type(NotImplemented), types.BuiltinFunctionType, types.CodeType,
    types.ModuleType, types.MethodWrapperType, types.WrapperDescriptorType,
    types.MethodDescriptorType, types.GetSetDescriptorType,
    types.MemberDescriptorType, weakref.ref,
})
# These deep-copy "successfully" into something that no longer works.
_LIVE_TYPES = (threading.Thread,)
_COPYABLE_METACLASSES = (type, abc.ABCMeta)
# Class attributes that hold functions, which must be rebound even under dunder names.
_CODE_CARRIERS = (types.FunctionType, staticmethod, classmethod, property)
# Made afresh by the metaclass for every class, never carried over.
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "_abc_impl"})


class Uncopyable(Exception):
    """A value could not be deep-copied."""


class StoredNamespace(dict):
    """The namespace of a stored state. Functions whose ``__globals__`` is one
    are the state's own and get rebound when copied; its type says so even for
    functions a state inherited unchanged from an ancestor."""


def copy_names(source, names, target, aliases=(), track=False, replace=()):
    """Deep-copy ``source[name]`` into ``target[name]`` for each of ``names``,
    with one memo, and return the Copier (``shared``, ``codes``, ``groups()``).

    Functions whose globals are a StoredNamespace or one of ``aliases`` are
    rebound to ``target``; references to those namespaces become ``target``;
    ``replace`` pairs ``(original, stand_in)`` name other objects to swap.
    With ``track``, it also records which names share objects and their sizes.
    Runs user code (``__deepcopy__``, ``__reduce_ex__``, ``__setstate__``,
    ``__init_subclass__``), so call it where user exceptions are handled.
    """
    copier = None  # made on the first value that needs one: most cells touch none
    for name in names:
        value = source[name]
        if type(value) in ATOMIC:  # no memo, nothing to track
            target[name] = value
            continue
        if copier is None:
            copier = Copier(target, aliases, track, replace)
        copier.label = name
        target[name] = copier.copy_or_share(value)
    return copier or Copier(target, aliases, track, replace)


class Copier:
    def __init__(self, target, aliases=(), track=False, replace=()):
        self.target = target
        self.aliases = {id(namespace) for namespace in aliases}
        self.memo = {key: target for key in self.aliases}
        self.keep_alive = list(aliases)
        for original, stand_in in replace:
            self.memo[id(original)] = stand_in
            self.keep_alive.append(original)
        self.shared = {}
        self.shared_reasons = {}
        self.codes = []  # code of every function rebound: it may need more names
        self.label = None
        self.inside_object = 0  # > 0 while copying an object's reduce args and state
        self.made_classes = set()  # ids of the classes this copy made
        self.covariables = CoVariables() if track else None

    def copy_or_share(self, value):
        """Copy ``value``; if that fails, forget the partial copy and share it.

        Inside an object's state a failure is the whole object's: an object
        copied with some of its parts shared (a Barrier with its Condition
        shared but its count copied) would be neither the original nor a copy.
        """
        if self.inside_object:
            return self.copy(value)
        mark = len(self.memo)
        try:
            return self.copy(value)
        except Uncopyable as exc:
            self._rollback(mark)
            self.shared_reasons[id(value)] = str(exc)
            self.memo[id(value)] = value
            self.keep_alive.append(value)
            self._note_shared(str(exc))
            return value

    def _note_shared(self, reason):
        self.shared.setdefault(self.label, reason)

    def _rollback(self, mark):
        """Forget every copy made since the memo had ``mark`` entries."""
        for key in list(itertools.islice(reversed(self.memo), len(self.memo) - mark)):
            del self.memo[key]

    def copy(self, obj):
        """Return the copy of ``obj``, raising Uncopyable if it has none."""
        key = id(obj)
        if key in self.memo:
            if key in self.shared_reasons:
                self._note_shared(self.shared_reasons[key])
            elif self.covariables is not None:
                self.covariables.reached(key, self.label)
            return self.memo[key]
        cls = type(obj)
        if cls in ATOMIC:
            return obj
        try:
            new = self._copy_new(obj, cls)
        except Uncopyable:
            raise
        except RecursionError:
            raise Uncopyable("too deeply nested to copy") from None
        except Exception as exc:  # user __reduce_ex__/__setstate__/...: any failure means "cannot be copied"
            raise Uncopyable(f"cannot be deep-copied: {type(exc).__name__}: {exc}") from None
        new = self.memo.get(key, new)  # a cycle back to obj may have copied it already
        if new is not obj:
            self.keep_alive.append(obj)
            if self.covariables is not None:
                self.covariables.copied(key, obj, self.label)
        self.memo[key] = new
        return new

    def groups(self, names):
        """``{name: (names sharing objects with it, their bytes)}``; needs ``track``."""
        return self.covariables.groups(names)

    def _copy_new(self, obj, cls):
        handler = self._dispatch.get(cls)
        if handler is not None:
            return handler(self, obj)
        if isinstance(obj, type):
            return self._copy_class(obj)
        if isinstance(obj, _LIVE_TYPES):
            raise Uncopyable(f"a {cls.__name__} is a live resource")
        return self._copy_object(obj)

    # -- containers: each element is copied, or shared alone --------------------

    def _copy_list(self, obj):
        new = []
        self.memo[id(obj)] = new
        new.extend(self.copy_or_share(item) for item in obj)
        return new

    def _copy_dict(self, obj):
        new = {}
        self.memo[id(obj)] = new
        for key, value in obj.items():
            new[self.copy_or_share(key)] = self.copy_or_share(value)
        return new

    def _copy_tuple(self, obj):
        items = [self.copy_or_share(item) for item in obj]
        if id(obj) in self.memo:  # a cycle through a mutable item copied it already
            return self.memo[id(obj)]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return tuple(items)

    # -- functions and what wraps them ----------------------------------------

    def _copy_function(self, fn):
        if type(fn.__globals__) is not StoredNamespace and id(fn.__globals__) not in self.aliases:
            return fn  # library code: shared, like the module that defines it
        cells = tuple(self._empty_cell(cell) for cell in fn.__closure__ or ())
        new = types.FunctionType(fn.__code__, self.target, fn.__name__, None,
                                 cells or None)
        self.memo[id(fn)] = new  # before the contents: they may refer back to fn
        for cell, twin in zip(fn.__closure__ or (), cells):
            self._fill_cell(cell, twin)
        new.__defaults__ = self.copy(fn.__defaults__)
        new.__kwdefaults__ = self.copy(fn.__kwdefaults__)
        new.__annotations__ = self.copy(fn.__annotations__)
        new.__dict__.update(self.copy(fn.__dict__))
        self.codes.append(fn.__code__)
        new.__qualname__ = fn.__qualname__
        new.__module__ = fn.__module__
        new.__doc__ = fn.__doc__
        if hasattr(fn, "__type_params__"):
            new.__type_params__ = fn.__type_params__
        return new

    def _empty_cell(self, cell):
        twin = self.memo.get(id(cell))
        if twin is None:
            twin = self.memo[id(cell)] = types.CellType()
            self.keep_alive.append(cell)
            if self.covariables is not None:  # closures sharing a cell: one group
                self.covariables.copied(id(cell), cell, self.label)
        elif self.covariables is not None:
            self.covariables.reached(id(cell), self.label)
        return twin

    def _fill_cell(self, cell, twin):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell: the variable is not bound yet
            return
        twin.cell_contents = self.copy(contents)

    def _copy_cell(self, cell):
        twin = self._empty_cell(cell)
        self._fill_cell(cell, twin)
        return twin

    def _copy_wrapper(self, obj):
        return type(obj)(self.copy(obj.__func__))

    def _copy_property(self, obj):
        return type(obj)(self.copy(obj.fget), self.copy(obj.fset),
                         self.copy(obj.fdel), obj.__doc__)

    def _copy_method(self, obj):
        return types.MethodType(self.copy(obj.__func__), self.copy(obj.__self__))

    def _copy_namespace(self, namespace):
        return self.target

    _dispatch = {
        StoredNamespace: _copy_namespace,
        list: _copy_list,
        dict: _copy_dict,
        tuple: _copy_tuple,
        types.FunctionType: _copy_function,
        types.CellType: _copy_cell,
        staticmethod: _copy_wrapper,
        classmethod: _copy_wrapper,
        property: _copy_property,
        types.MethodType: _copy_method,
    }

    # -- classes ----------------------------------------------------------------

    def _copy_class(self, cls):
        if cls.__module__ != "__main__":
            return cls  # defined by a module: shared with it
        outer, self.inside_object = self.inside_object, 0  # a class is a unit of its own
        try:
            return self._copy_own_class(cls)
        finally:
            self.inside_object = outer

    def _copy_own_class(self, cls):
        if type(cls) not in _COPYABLE_METACLASSES:
            raise Uncopyable(f"class {cls.__qualname__} has metaclass "
                             f"{type(cls).__name__}, which is not copied")
        bases = tuple(self.copy(base) for base in cls.__bases__)
        if id(cls) in self.memo:  # a base's attribute led back here and copied it
            return self.memo[id(cls)]
        body = cls.__dict__
        init = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                "__doc__": body.get("__doc__")}
        if "__slots__" in body:
            init["__slots__"] = body["__slots__"]
        new = _quiet_class(type(cls), cls.__name__, bases, init, self.made_classes)
        self.made_classes.add(id(new))
        self.memo[id(cls)] = new  # before the attributes: methods refer back to it
        for name, value in list(body.items()):  # copyreg caches __slotnames__ on cls
            if name in init or name in _CLASS_SKIP or _is_slot_of(value, cls):
                continue
            if is_dunder(name) and not isinstance(value, _CODE_CARRIERS):
                setattr(new, name, value)  # Python's or a library's metadata (__dataclass_fields__)
            else:
                setattr(new, name, self.copy_or_share(value))
        if getattr(cls, "__abstractmethods__", None):
            new.__abstractmethods__ = cls.__abstractmethods__
        return new

    # -- everything else: copyreg and __reduce_ex__, as copy.deepcopy does -------

    def _copy_object(self, obj):
        deep = getattr(obj, "__deepcopy__", None)
        if deep is not None:
            return self._recast(deep(self.memo))
        reducer = copyreg.dispatch_table.get(type(obj))
        rv = reducer(obj) if reducer is not None else obj.__reduce_ex__(4)
        if isinstance(rv, str):
            return obj  # a global looked up by name: the same object
        return self._reconstruct(obj, *rv)

    def _recast(self, new):
        """Move a result of a custom ``__deepcopy__`` onto the copied class."""
        twin = self.memo.get(id(type(new)))
        if isinstance(twin, type) and twin is not type(new):
            new.__class__ = twin
        return new

    def _reconstruct(self, obj, *reduced):
        self.inside_object += 1
        try:
            return self._rebuild(obj, *reduced)
        finally:
            self.inside_object -= 1

    def _rebuild(self, obj, func, args, state=None, listiter=None, dictiter=None, *_):
        args = self.copy(args)
        if id(obj) in self.memo:  # the args (a copied class) led back here and copied it
            return self.memo[id(obj)]
        new = func(*args)
        self.memo[id(obj)] = new
        if state is not None:
            _set_state(new, self.copy(state))
        for item in listiter or ():
            new.append(self.copy_or_share(item))
        for key, value in dictiter or ():
            new[self.copy_or_share(key)] = self.copy_or_share(value)
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


def _set_state(new, state):
    """Apply a reduce ``state`` the way ``copy._reconstruct`` does."""
    if hasattr(new, "__setstate__"):
        new.__setstate__(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        new.__dict__.update(state)
    for key, value in (slots or {}).items():
        setattr(new, key, value)


def is_dunder(name):
    """True for names like ``__name__``: Python's and libraries' own."""
    return isinstance(name, str) and name.startswith("__") and name.endswith("__")


def _is_slot_of(value, cls):
    return isinstance(value, types.MemberDescriptorType) and value.__objclass__ is cls
