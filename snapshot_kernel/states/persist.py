"""Pickling a state's objects to disk so a restarted server has them back.

Pickle protocol 5 with our own reductions for what cells make, so that a
restored state behaves as before the restart:

* functions defined by cells (globals a StoredNamespace) are saved by value —
  code (``marshal``), defaults, closure, ``__dict__`` — and come back reading
  the globals of the state they run in, as stored functions do;
* classes defined by cells (metaclass ``type`` or ``ABCMeta``) are saved by
  value; instances refer to them. Other metaclasses (``Enum``) cannot be;
* modules are saved by name and imported again;
* memoryviews, as views of their exporter (``copying.views``);
* iterators and dict views of Python's containers, with their type and place
  (``copying.iterators``);
* weak references, weak dicts and sets, ``lru_cache`` functions, static and
  class methods, properties and mapping proxies, which pickle refuses;
* numpy arrays on copy-on-write mappings are saved as references to blob
  files in the state directory plus the pages they differ in, and views as
  views of their base, so nothing large is written twice.

What still cannot be pickled (a lock, a generator, an open file, a thread) is
reported by ``dumps`` and ends up ``lost``. Code objects are marshalled, so a
state directory is bound to one Python version (``FORMAT``).
"""

import _thread
import abc
import functools
import gc
import importlib
import io
import marshal
import pickle
import sys
import types
import weakref

from . import cow, object_arrays
from .object_arrays import PLAIN as _PLAIN  # no reductions
from ..copying import iterators, views
from ..copying.names import collector_off
from ..copying.handlers import importable
from ..copying.stored import STORED_GLOBALS, StoredNamespace
from ..libraries import _thread as thread_locals

FORMAT = f"snapshot-kernel-1 cpython-{sys.version_info[0]}.{sys.version_info[1]}"
_COPYABLE_METACLASSES = (type, abc.ABCMeta)
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "_abc_impl"})


class Pickler(pickle.Pickler):
    """Pickles stored objects; big buffers become references to blobs (``blobs`` maps the
    paths of the blob files used to their ``cow.Blob``, so the store knows what a record
    needs)."""

    def __init__(self, file, buffers):
        super().__init__(file, protocol=5)
        self.buffers = buffers
        self.blobs = {}
        self._references = {}  # id(obj) -> (obj, its persistent id): see persistent_id
        # Pickle calls both hooks below for every object (persistent_id even for ints), so
        # each first rules out, by type, what it has nothing to do with: most objects.
        numpy = sys.modules.get("numpy")  # (no array can exist before numpy is imported)
        self._referable = frozenset({cow.Mapping} | ({numpy.ndarray} if numpy else set()))
        self._ordinary = set()  # types reducer_override leaves to pickle

    def reducer_override(self, obj):
        kind = type(obj)
        if kind in self._ordinary:
            return NotImplemented
        reducer = _REDUCERS.get(kind)
        if reducer is not None:
            return reducer(self, obj)
        if isinstance(obj, types.ModuleType):  # of a class of its own: a module all the same
            return _reduce_module(self, obj)
        if isinstance(obj, _thread._local):  # its lineage's values (libraries/_thread.py)
            return _make_local, (kind, thread_locals.lineage_values(obj))
        if isinstance(obj, type):
            return _reduce_class(obj) if obj.__module__ == "__main__" else NotImplemented
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(obj, numpy.ndarray):  # (exact ones: persistent_id)
            if kind is numpy.ndarray and obj.dtype == object:
                if obj.base is not None:
                    return object_arrays.reduce_view(obj)
                return object_arrays.reduce_array(obj)
            return _reduce_subclass_view(numpy, obj)
        self._ordinary.add(kind)
        return NotImplemented

    def persistent_id(self, obj):
        """``reference(obj)``, the same tuple at every occurrence of ``obj`` in this pickle."""
        if type(obj) not in self._referable:
            return None
        # Pickle asks at every occurrence and never memoizes an object that has a persistent
        # id, but it memoizes the id, a tuple: the same tuple writes a buffer once, however
        # many views refer to it (each view's id held its base's bytes again: quadratic).
        found = self._references.get(id(obj))
        if found is not None:
            return found[1]
        reference = self.reference(obj)
        if reference is not None:
            self._references[id(obj)] = (obj, reference)  # obj kept: its id stays its own
        return reference

    def reference(self, obj):
        """The persistent id of ``obj``: a stored mapping, or an array (see ``_array_id``)."""
        if type(obj) is cow.Mapping and obj.stored:
            if obj.blob is None or obj.blob.path is None:
                self.buffers.freeze(obj)  # to a file of the state directory
            self.blobs[obj.blob.path] = obj.blob
            pages = {page: obj[page * cow.PAGE:(page + 1) * cow.PAGE] for page in obj.overlay}
            return ("mapping", id(obj), obj.blob.path.rsplit("/", 1)[-1], pages)
        numpy = sys.modules.get("numpy")
        if numpy is not None and type(obj) is numpy.ndarray and not obj.dtype.hasobject:
            return _array_id(numpy, obj)
        return None


def _reduce_subclass_view(numpy, arr):
    """A view of another array made by an ndarray subclass (a masked array over its data,
    a row of a matrix): made again over that array, then given its attributes (after
    it is made: they may refer back to it); NotImplemented for the subclass's own
    pickle (not a view, or one that cannot be made again)."""
    base = arr.base
    if not isinstance(base, numpy.ndarray) or base.dtype.hasobject or arr.dtype.hasobject:
        return NotImplemented
    offset = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    try:  # as _make_subclass_view will: a base that is no buffer (not contiguous) cannot be
        numpy.ndarray.__new__(type(arr), arr.shape, arr.dtype, buffer=base, offset=offset,
                              strides=arr.strides)
    except (ValueError, TypeError, BufferError):
        return NotImplemented
    return (_make_subclass_view, (type(arr), base, offset, arr.shape, arr.dtype, arr.strides,
                                  arr.flags.writeable),
            dict(getattr(arr, "__dict__", {})), None, None, _set_attributes)


def _make_subclass_view(cls, base, offset, shape, dtype, strides, writeable):
    import numpy
    arr = numpy.ndarray.__new__(cls, shape, dtype, buffer=base, offset=offset, strides=strides)
    if not writeable:
        arr.flags.writeable = False
    return arr


def _set_attributes(arr, attributes):
    arr.__dict__.update(attributes)


def _array_id(numpy, arr):
    """A reference for arrays on a mapping, views of another array, and arrays that own
    their memory (numpy's own pickle would bring those back as views of a buffer)."""
    base = arr.base
    if base is None:
        if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
            return None
        order = "C" if arr.flags.c_contiguous else "F"
        return ("owned", id(arr), arr.tobytes(order), arr.shape, arr.dtype, order,
                arr.flags.writeable)
    from ..libraries.numpy_memory import address  # (numpy is imported: an array is here)
    start = address(arr)
    layout = (arr.shape, arr.dtype, arr.strides, arr.flags.writeable)
    if isinstance(base, cow.Mapping) and base.stored:
        return ("array", id(arr), base, start - base.address, *layout)
    if isinstance(base, numpy.ndarray) and not base.dtype.hasobject:
        offset = start - address(base)
        if type(base) is not numpy.ndarray:  # a subclass's memory: check it is a buffer
            try:
                numpy.ndarray(arr.shape, arr.dtype, buffer=base, offset=offset,
                              strides=arr.strides)
            except (ValueError, TypeError, BufferError):
                return None
        return ("view", id(arr), base, offset, *layout)
    return None


# Where modules a state directory's pickles may name lived before the package had folders.
_MOVED = {"snapshot_kernel.persist": __name__,
          "snapshot_kernel.cow": "snapshot_kernel.states.cow",
          "snapshot_kernel.stored": "snapshot_kernel.copying.stored",
          "snapshot_kernel.handlers": "snapshot_kernel.copying.handlers"}


class Unpickler(pickle.Unpickler):
    """Loads what ``Pickler`` wrote; blobs are opened in ``directory``."""

    def find_class(self, module, name):
        return super().find_class(_MOVED.get(module, module), name)

    def __init__(self, file, directory):
        super().__init__(file)
        self.directory = directory
        self._made = {}

    def persistent_load(self, pid):
        # Pickle calls this for every reference, not once per object: the id the object
        # had when pickled makes each one object again.
        made = self._made.get(pid[:2])
        if made is None:
            made = self._made[pid[:2]] = self._make(*pid)
        return made

    def _make(self, kind, key, *rest):
        if kind == "mapping":
            name, pages = rest
            stored = _open_blob(f"{self.directory}/{name}").map(stored=True)
            for page, data in pages.items():
                stored[page * cow.PAGE:page * cow.PAGE + len(data)] = data
            stored.overlay = frozenset(pages)
            return stored
        import numpy
        if kind == "owned":
            data, shape, dtype, order, writeable = rest
            arr = numpy.empty(shape, dtype, order=order)
            arr.reshape(-1, order=order)[...] = numpy.frombuffer(data, dtype)
            arr.flags.writeable = writeable
            return arr
        base, offset, shape, dtype, strides, writeable = rest
        arr = numpy.ndarray(shape, dtype, buffer=base, offset=offset, strides=strides)
        if not writeable:
            arr.flags.writeable = False
        return arr


_open_blobs = weakref.WeakValueDictionary()  # path -> Blob: one open file per blob


def _open_blob(path):
    blob = _open_blobs.get(path)
    if blob is None:
        blob = _open_blobs[path] = cow.Blob.open(path)
    return blob


def dumps(values, buffers, pickler=Pickler):
    """``(data, blobs, lost)``: the pickle of the dict ``values`` (together, so shared
    objects stay shared), leaving out the names whose objects cannot be pickled, which
    ``lost`` maps to why; ``blobs`` is what the pickle refers to outside itself (the
    ``blobs`` of a ``pickler``, a Pickler class)."""
    lost = {}
    if pickler is Pickler and all(type(value) in _PLAIN for value in values.values()):
        return pickle.dumps(values, protocol=5), {}, lost  # what Pickler would write
    try:
        return (*_dump(values, buffers, pickler), lost)
    except MemoryError:
        raise
    except Exception:  # find which names: they are lost, the others are saved
        pass
    for name, value in values.items():
        try:
            _dump(value, buffers, pickler)
        except MemoryError:
            raise
        except Exception as exc:  # any: a __reduce__ or __getstate__ may raise what it likes
            lost[name] = f"{type(exc).__name__}: {exc}"
    return (*_dump({name: value for name, value in values.items() if name not in lost},
                   buffers, pickler), lost)


def _dump(value, buffers, pickler_class):
    file = io.BytesIO()
    pickler = pickler_class(file, buffers)
    collector_off(pickler.dump, value)  # its memo keeps what __getstate__ methods make
    return file.getvalue(), pickler.blobs


def loads(data, directory):
    return collector_off(Unpickler(io.BytesIO(data), directory).load)


# -- reductions ----------------------------------------------------------------------------

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


def _reduce_class(cls):
    if type(cls) not in _COPYABLE_METACLASSES:
        raise pickle.PicklingError(f"class {cls.__qualname__} has metaclass "
                                   f"{type(cls).__name__}, which cannot be saved")
    body = cls.__dict__
    init = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": body.get("__doc__")}
    if "__slots__" in body:
        init["__slots__"] = body["__slots__"]
    attributes = {name: value for name, value in body.items()
                  if name not in init and name not in _CLASS_SKIP
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


def _reduce_module(pickler, module):
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


_REDUCERS = {
    types.FunctionType: _reduce_function, types.ModuleType: _reduce_module,
    types.CellType: _reduce_cell,
    weakref.ref: _reduce_weakref, weakref.WeakValueDictionary: _reduce_weak_container,
    weakref.WeakKeyDictionary: _reduce_weak_container, weakref.WeakSet: _reduce_weak_container,
    functools._lru_cache_wrapper: _reduce_lru_cache, staticmethod: _reduce_wrapper,
    classmethod: _reduce_wrapper, property: _reduce_property,
    types.MappingProxyType: _reduce_mappingproxy, StoredNamespace: _reduce_namespace,
    memoryview: _reduce_memoryview, **dict.fromkeys(iterators.TYPES, _reduce_iterator),
}
