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

One place holds one function for the whole process, so cells on states that hold
twins run alone (``alone``, which the gate asks).
"""

import builtins
import marshal
import pickle
import types
import weakref

_twins = weakref.WeakKeyDictionary()  # a function of some cell's namespace -> its twin
_live = {}  # id(namespace) of each running cell that binds -> the namespace


class _TwinGlobals(dict):
    """The globals of a twin: what a twin called outside any cell finds."""


def is_twin(value):
    return type(value) is types.FunctionType and type(value.__globals__) is _TwinGlobals


def twin_of(value):
    """``value`` as a state keeps it: a function of a cell's namespace as its twin (made
    now if the cell runs), anything else as itself."""
    if type(value) is not types.FunctionType:
        return value
    twin = _twins.get(value)
    if twin is not None:
        return twin
    if id(value.__globals__) in _live and value.__globals__ is _live[id(value.__globals__)]:
        twin = _twins[value] = _made(value, _TwinGlobals(__builtins__=builtins))
        return twin
    return value


def alone(values):
    """True if any of ``values`` is a twin: a cell starting from them runs alone."""
    return any(is_twin(value) for value in values)


def begin(namespace):
    """A cell whose namespace is ``namespace`` starts: its functions get twins when read."""
    _live[id(namespace)] = namespace


def end(namespace):
    _live.pop(id(namespace), None)


def bound(twin, working):
    """The function of the running cell (whose ``Working`` is ``working``) for ``twin``:
    its copy of the name the function was defined as if its state holds that function
    there, else a new function over its namespace; names its code reads are copied in."""
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
