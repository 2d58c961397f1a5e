"""Pickling a state's objects to disk so a restarted server has them back.

Pickle protocol 5 with our own reductions for what cells make (``reductions``), so
that a restored state behaves as before the restart:

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
import io
import pickle
import sys
import types
import weakref

from . import cow, object_arrays, reductions
from .object_arrays import PLAIN as _PLAIN  # no reductions
from ..copying.names import collector_off

FORMAT = f"snapshot-kernel-1 cpython-{sys.version_info[0]}.{sys.version_info[1]}"


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
        reducer = reductions.REDUCERS.get(kind)
        if reducer is not None:
            return reducer(self, obj)
        if isinstance(obj, types.ModuleType):  # of a class of its own: a module all the same
            return reductions.reduce_module(self, obj)
        if isinstance(obj, _thread._local):
            return reductions.reduce_local(obj)
        if isinstance(obj, type):
            return reductions.reduce_class(obj) if obj.__module__ == "__main__" else NotImplemented
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


def where(module, name):
    """The module that holds what a pickle names ``module.name`` (it may have moved)."""
    module = _MOVED.get(module, module)
    if module == __name__ and name in reductions.NAMED_IN_PICKLES:
        return reductions.__name__
    return module


class Unpickler(pickle.Unpickler):
    """Loads what ``Pickler`` wrote; blobs are opened in ``directory``."""

    def find_class(self, module, name):
        return super().find_class(where(module, name), name)

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
