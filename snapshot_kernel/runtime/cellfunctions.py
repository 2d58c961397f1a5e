"""Functions a cell puts in a module attribute (``json.dumps = my_dumps``) read the globals
of the cell that runs, as in one process whose ``__main__`` is the state.

A function's globals are fixed when it is made, so a patch made in one cell would go
on reading that cell's namespace: a later cell's ``prefix = "b"`` unseen, and a
sibling branch writing into the same dead namespace. So a state keeps such a patch
as a *twin*: the function with globals of its own, which pin no cell's namespace.
Before a cell runs, each twin in a watched place becomes the cell's own function:
its copy of the name the function was defined as, if its state still holds that
function there (so ``json.dumps is my_dumps``), else a function made from the twin
with the cell's namespace as its globals. Reading the place then gives the twin back
(``twin_of``), so a cell that leaves the patch alone leaves its state's settings
unchanged. After the cell its function stays in the place, reading that finished
cell's namespace, for threads the cell started; the next cell binds its own.

The same holds for a ``functools.partial`` of such a function (its twin is a partial
of the function's twin, with the same arguments) and for a class a cell defines
(``fractions.Fake = Fake``): its twin is a copy whose methods read globals of their
own; each cell gets its copy of the class the name it was defined as holds, if that
is the same class (the same methods), so ``fractions.Fake is Fake`` and instances
made through the module are instances of the cell's class; else a copy of the twin
over its namespace.

One place holds one function for the whole process, so cells on states that hold
twins run alone (``alone``, which the gate asks).
"""

import abc
import builtins
import functools
import marshal
import pickle
import types
import weakref

from ..copying.names import copy_names

_twins = weakref.WeakKeyDictionary()  # a function, partial or class of a cell -> its twin
_twin_classes = weakref.WeakKeyDictionary()  # a class's twin -> the globals of its methods
_live = {}  # id(namespace) of each running cell that binds -> the namespace
_PARTIAL = functools.partial
_CLASS_KINDS = (type, abc.ABCMeta)  # the metaclasses the copier copies a cell's class with


class _TwinGlobals(dict):
    """The globals of a twin: what a twin called outside any cell finds."""


def is_twin(value):
    kind = type(value)
    if kind is types.FunctionType:
        return type(value.__globals__) is _TwinGlobals
    if kind is _PARTIAL:
        return is_twin(value.func)
    return kind in _CLASS_KINDS and value in _twin_classes


def twinnable(value):
    """True of a value ``twin_of`` may give a twin for: a function, a partial, a class
    a cell defined. Cheap: every cell asks it of every watched place."""
    kind = type(value)
    return kind is types.FunctionType or kind is _PARTIAL or (
        kind in _CLASS_KINDS and value.__module__ == "__main__")


def twin_of(value):
    """``value`` as a state keeps it: a function of a cell's namespace, a partial of one,
    or a class a cell defined, as its twin (made now if the cell runs); anything else
    as itself."""
    if not twinnable(value) or is_twin(value):
        return value
    twin = _twins.get(value)
    if twin is not None:
        return twin
    kind = type(value)
    if kind is types.FunctionType:
        if _live_namespace(value.__globals__) is None:
            return value
        twin = _made(value, _TwinGlobals(__builtins__=builtins))
    elif kind is _PARTIAL:
        func = twin_of(value.func)
        if func is value.func:
            return value
        twin = _partial(func, value)
    else:
        twin = _class_twin(value)
        if twin is None:
            return value
    _twins[value] = twin
    return twin


def _live_namespace(namespace):
    """``namespace`` if it is a running cell's, else None."""
    return namespace if _live.get(id(namespace)) is namespace else None


def _partial(func, like):
    made = _PARTIAL(func, *like.args, **like.keywords)
    made.__dict__.update(like.__dict__)
    return made


def _class_twin(cls):
    """A copy of ``cls`` whose methods read globals of their own, or None if its methods
    read the namespace of a cell that no longer runs, or it cannot be copied."""
    namespaces = {id(fn.__globals__): fn.__globals__ for klass in cls.__mro__
                  if klass.__module__ == "__main__" for fn in _methods(klass).values()}
    if any(_live_namespace(namespace) is None for namespace in namespaces.values()):
        return None
    globals_ = _TwinGlobals(__builtins__=builtins)
    made = {}
    copy_names({"class": cls}, ["class"], made, aliases=list(namespaces.values()),
               globals_=globals_)
    twin = made["class"]
    if twin is cls:  # the copier could not copy it (it shares what fails): no twin
        return None
    _twin_classes[twin] = globals_
    return twin


def _methods(cls):
    """``{name: function}`` of the functions ``cls`` defines: methods, class and static
    methods, and property accessors."""
    found = {}
    for name, attribute in vars(cls).items():
        if isinstance(attribute, (classmethod, staticmethod)):
            attribute = attribute.__func__
        if isinstance(attribute, property):
            for part, accessor in (("get", attribute.fget), ("set", attribute.fset),
                                   ("del", attribute.fdel)):
                if type(accessor) is types.FunctionType:
                    found[f"{name}.{part}"] = accessor
        elif type(attribute) is types.FunctionType:
            found[name] = attribute
    return found


def _same_class(held, twin):
    """True if class ``held`` is a copy of the class ``twin`` was made from: the same
    kind, name and methods."""
    if type(held) is not type(twin) or held.__qualname__ != twin.__qualname__:
        return False
    mine, theirs = _methods(held), _methods(twin)
    return mine.keys() == theirs.keys() and all(
        fn.__code__ == theirs[name].__code__ for name, fn in mine.items())


def alone(values):
    """True if any of ``values`` is a twin: a cell starting from them runs alone."""
    return any(is_twin(value) for value in values)


def begin(namespace):
    """A cell whose namespace is ``namespace`` starts: its functions get twins when read."""
    _live[id(namespace)] = namespace


def end(namespace):
    _live.pop(id(namespace), None)


def bound(twin, working):
    """The function, partial or class of the running cell (whose ``Working`` is
    ``working``) for ``twin``: its copy of the name the function or class was defined
    as if its state holds that one there, else one made over its namespace; names
    their code reads are copied in."""
    kind = type(twin)
    if kind is _PARTIAL:
        mine = _partial(bound(twin.func, working), twin)
        _twins[mine] = twin
        return mine
    if kind is not types.FunctionType:
        return _bound_class(twin, working)
    namespace = working.namespace
    name = twin.__name__
    held = working.peek(name)
    if type(held) is types.FunctionType and held.__code__ == twin.__code__:
        working.materialize([name])  # (equal code, not the same: one may be loaded)
        mine = namespace.get(name)
        if type(mine) is types.FunctionType and mine.__globals__ is namespace \
                and mine.__code__ == twin.__code__:
            _twins[mine] = twin
            return mine
    mine = _made(twin, namespace)
    working.materialize_code(twin.__code__)
    _twins[mine] = twin
    return mine


def _bound_class(twin, working):
    mine = _held_class(twin, working)
    if mine is not None:
        _twins[mine] = twin
        return mine
    # Its name holds another value now: a copy over the namespace, whose cell classes
    # among its bases are the namespace's where their names still hold them.
    replace = [(base, held) for base in twin.__mro__[1:] if base.__module__ == "__main__"
               for held in [_held_class(base, working)] if held is not None]
    made = {}
    copier = copy_names({"class": twin}, ["class"], made, aliases=[_twin_classes[twin]],
                        replace=replace, globals_=working.namespace)
    for code in copier.codes:
        working.materialize_code(code)
    mine = made["class"]
    _twins[mine] = twin
    return mine


def _held_class(cls, working):
    """The running cell's copy of ``cls`` at the name it was defined as, or None if that
    name holds something else."""
    namespace, name = working.namespace, cls.__name__
    if not _same_class(working.peek(name), cls):
        return None
    working.materialize([name])
    mine = namespace.get(name)
    if _same_class(mine, cls) and all(fn.__globals__ is namespace
                                      for fn in _methods(mine).values()):
        return mine
    return None


def _made(fn, globals_):
    """``fn`` again, over ``globals_``; its defaults, closure and attributes the same objects."""
    new = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = fn.__annotations__
    new.__dict__.update(fn.__dict__)
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    if hasattr(fn, "__type_params__"):
        new.__type_params__ = fn.__type_params__
    return new


def reduce_twin(twin):
    """Pickle's reduction of a twin: its code by ``marshal`` (as the state pickler saves
    functions: a state directory and an archive are bound to one Python version), the
    rest by value. PicklingError for a closure, whose cells are a cell's objects."""
    if twin.__closure__:
        raise pickle.PicklingError("a closure")
    return _remade, (marshal.dumps(twin.__code__), twin.__name__, twin.__qualname__,
                     twin.__module__, twin.__doc__, twin.__defaults__, twin.__kwdefaults__,
                     twin.__annotations__, dict(twin.__dict__))


def _remade(code, name, qualname, module, doc, defaults, kwdefaults, annotations, attributes):
    twin = types.FunctionType(marshal.loads(code), _TwinGlobals(__builtins__=builtins), name,
                              defaults)
    twin.__kwdefaults__, twin.__annotations__ = kwdefaults, annotations
    twin.__dict__.update(attributes)
    twin.__qualname__, twin.__module__, twin.__doc__ = qualname, module, doc
    return twin
