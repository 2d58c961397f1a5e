"""Portable states: one state as an archive (``archive``) that another server loads.

    meta.json        the state's name, parent, code, timestamp and meta; the CPython,
                     package and library versions; each name's group and why it is
                     shared; the names left out (``lost``) and why
    buffers/N.npy    each large buffer, in numpy's .npy format (a header, then the bytes)
    state.pickle     the values, pickled together by ``persist``'s Pickler (functions and
                     classes that cells defined by value), buffers as member references

The state's lineage is flattened: the archive holds the values its names have,
not the cells or states that made them. A reader checks the versions as soon as
meta.json has come, writes each buffer where a state's buffers live (a blob:
a memfd, or a file of the state directory; an array where buffers are not
copy-on-write) as it arrives, and unpickles only once every checksum matched.
Unpickling runs the objects' own code, as a cell would: importing an archive
trusts its sender as far as running a cell does.
"""

import dataclasses
import importlib
import io
import json
import linecache
import marshal
import os
import pickle
import platform
import sys
import types
from importlib import metadata

from . import archive, cow, persist
from ..runtime.settings import Process
from .storage import GONE, NOT_EXPORTED, Entry, Group, Namespace, State, fresh_namespace
from .. import cell
from ..copying.stored import STORED_GLOBALS, StoredNamespace, reading
from ..errors import BadArchive, IncompatibleArchive

FORMAT = "snapshot-kernel state archive 1"
PYTHON = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}"
PICKLE = "state.pickle"
SETTINGS = "settings.pickle"  # what the state carries besides its names (settings.Process)
# Settings that named the exporting machine's paths and secrets in archives that kept the whole
# of them (before settings were held per cell): an imported state takes this server's own.
MACHINE_SETTINGS = ("cwd", "environ", "sys.path")
MEMBER_BYTES = cow.THRESHOLD  # an array that owns this many bytes or more is a member
MAX_META = 1 << 30  # bytes of meta.json at most (it holds the code of the state's cell)
_NOT_LIBRARIES = frozenset({"builtins", "__main__", "snapshot_kernel"}) | frozenset(
    getattr(sys, "stdlib_module_names", ()))


# -- export ---------------------------------------------------------------------------------

def export(state, process):
    """``(archive.Writer, lost)`` for ``state``, whose settings are ``process`` (a
    ``settings.Process``); ``lost`` maps the names it leaves out, those whose objects
    cannot be pickled, to why."""
    entries, lost = {}, {}
    for name, entry in state.names.entries().items():
        if not isinstance(name, str):
            lost[repr(name)] = "a name that is not a string cannot be exported"
        elif name != "__builtins__":
            entries[name] = entry
    values = {}
    for name, entry in entries.items():
        value = entry.value
        if value is GONE:
            lost[name] = (entry.lost or "lost at a restart").replace(NOT_EXPORTED, "", 1)
        else:
            values[name] = value
    with reading(state.names):  # the objects' own reductions may read the state's globals
        data, needs, unpicklable = persist.dumps(values, None, ExportPickler)
    lost.update(unpicklable)
    meta = _meta(state, entries, lost, needs)
    members = [archive.Member(archive.META, [json.dumps(meta).encode("utf-8")]),
               *(_npy(member) for member in needs.buffers.values()),
               archive.Member(PICKLE, [data]),
               archive.Member(SETTINGS, [pickle.dumps(process.saved(), protocol=5)])]
    return archive.Writer(members, state.created), lost


class Needs:
    """What a pickle needs besides itself: ``buffers`` (id -> ``BufferMember``), and
    ``modules``, the top-level modules of the types and functions it names."""

    def __init__(self):
        self.buffers, self.modules = {}, set()
        self.sources = {}  # cell file name -> the cell's source, for cells' functions

    def member(self, buffer, writeable=None, array=None, order="C"):
        """The persistent id of ``buffer`` (an array, or a stored mapping), or, if
        ``array`` is given, of that array, which holds all of the mapping ``buffer``
        laid out in ``order``; ``writeable`` is the array's flag."""
        found = self.buffers.get(id(buffer))
        if found is None:
            name = f"buffers/{len(self.buffers)}.npy"
            found = self.buffers[id(buffer)] = BufferMember(name, buffer)
        if array is not None and found.array is None:
            found.array, found.order = array, order
        return ("member", id(buffer if array is None else array), found.name, writeable)

    def note(self, obj):
        """Note the library of ``obj``: its module's, or its type's."""
        kind = type(obj)
        if kind is type(sys):
            module = obj.__name__
        elif isinstance(obj, type) or callable(obj) and kind.__module__ == "builtins":
            module = getattr(obj, "__module__", None)  # a class, or a function by name
        else:
            module = kind.__module__
        if isinstance(module, str):
            self.modules.add(module.partition(".")[0])


class BufferMember:
    """A buffer member to write: a stored mapping or an array, and the array that holds
    all of a mapping, if one does (the member then holds its dtype, shape and order)."""

    def __init__(self, name, buffer):
        self.name, self.buffer = name, buffer
        self.array, self.order = (buffer, None) if type(buffer) is not cow.Mapping else (None, "C")


class ExportPickler(persist.Pickler):
    """``persist``'s Pickler, but large buffers become members of the archive and the
    libraries of what it pickles are noted (``blobs`` is a ``Needs``)."""

    def __init__(self, file, buffers):
        super().__init__(file, buffers)
        self.blobs = Needs()

    def reducer_override(self, obj):
        self.blobs.note(obj)
        if type(obj) is types.FunctionType and type(obj.__globals__) is StoredNamespace:
            filename = obj.__code__.co_filename
            if filename.startswith(cell.CELL_FILENAME_PREFIX) and filename in linecache.cache:
                self.blobs.sources[filename] = "".join(linecache.cache[filename][2])
        return super().reducer_override(obj)

    def reference(self, obj):
        if type(obj) is cow.Mapping and obj.stored:
            return self.blobs.member(obj, None)
        numpy = sys.modules.get("numpy")
        if numpy is None or type(obj) is not numpy.ndarray or obj.dtype.hasobject:
            return None
        self.blobs.modules.add("numpy")
        writeable, base = bool(obj.flags.writeable), obj.base
        if (base is None and obj.nbytes >= MEMBER_BYTES
                and (obj.flags.c_contiguous or obj.flags.f_contiguous)):
            return self.blobs.member(obj, writeable)
        if type(base) is cow.Mapping and base.stored:
            order = _holds_all(numpy, obj, base)
            if order is not None:  # a member of this dtype: a reader without mappings owns it
                return self.blobs.member(base, writeable, obj, order)
        return persist._array_id(numpy, obj)


def _holds_all(numpy, arr, mapping):
    """``"C"`` or ``"F"`` if ``arr`` holds all of ``mapping`` from its start, laid out as a
    new array of that order would be; else None."""
    if arr.nbytes != len(mapping) or arr.__array_interface__["data"][0] != mapping.address:
        return None
    for order in "CF":
        if numpy.ndarray(arr.shape, arr.dtype, buffer=mapping, order=order).strides == arr.strides:
            return order
    return None


def _npy(member):
    """``member``'s buffer as a .npy file: its array's, or a mapping's bytes."""
    numpy = sys.modules["numpy"]
    array = member.array
    if array is None:
        array = numpy.frombuffer(member.buffer, numpy.uint8)
    fields = numpy.lib.format.header_data_from_array_1_0(array)
    if member.order is not None:
        fields["fortran_order"] = member.order == "F"
    header = io.BytesIO()
    try:
        numpy.lib.format.write_array_header_1_0(header, fields)
    except ValueError:  # a header over 64 KiB (a dtype of very many fields)
        header = io.BytesIO()
        numpy.lib.format.write_array_header_2_0(header, fields)
    return archive.Member(member.name, [header.getvalue(),
                                        array.ravel(order="K").view(numpy.uint8)])


def _meta(state, entries, lost, needs):
    groups, names = {}, {}
    for name, entry in entries.items():
        if name not in lost:
            index = groups.setdefault(id(entry.group), (len(groups), entry.group))[0]
            names[name] = {"group": index, "shared": entry.shared}
    return {
        "format": FORMAT, "name": state.name, "parent": state.parent, "code": state.code,
        "timestamp": state.timestamp, "created": state.created, "meta": state.meta,
        "python": PYTHON, "python_version": platform.python_version(),
        "snapshot_kernel": package_version(), "libraries": _versions(needs.modules),
        "names": names, "lost": lost, "sources": needs.sources,
        "groups": [{"names": sorted(name for name in group.names if isinstance(name, str)),
                    "weight": group.weight, "fresh": group.fresh}
                   for _, group in groups.values()],
    }


def package_version():
    try:
        return metadata.version("snapshot-kernel")
    except metadata.PackageNotFoundError:  # run from a source tree
        return "0+unknown"


def _versions(modules):
    """``{module: version}`` of the libraries among ``modules`` that say their version."""
    found = {}
    for name in sorted(modules - _NOT_LIBRARIES):
        version = getattr(sys.modules.get(name), "__version__", None)
        if isinstance(version, str) and not name.startswith("_"):
            found[name] = version
    return found


# -- import ---------------------------------------------------------------------------------

def receive(stream, buffers):
    """The archive read from ``stream`` (``read(n)``), checked whole, as a ``Received``;
    its buffers are made copy-on-write if ``buffers`` (a ``cow.Buffers``) is given.
    Raises BadArchive or IncompatibleArchive, and then keeps nothing."""
    received, whole = Received(buffers), False
    try:
        for member in archive.Reader(stream):
            received.take(member)
        if received.data is None:
            raise BadArchive(f"the archive is damaged: it has no {PICKLE}")
        whole = True
    finally:
        if not whole:  # whatever stopped it (a 408 too): no blob file may stay behind
            received.discard()
    return received


class Received:
    """An archive read whole: ``meta``, the pickle (``data``) and the buffers it refers to."""

    def __init__(self, buffers):
        self.cow = buffers
        self.meta = self.data = self.settings = None
        self.buffers = {}  # member name -> Buffer

    def take(self, member):
        if member.name == archive.META:
            if member.size > MAX_META:
                raise BadArchive(f"the archive is damaged: its meta.json is {member.size} bytes")
            try:
                self.meta = json.loads(member.read())
            except ValueError:  # not JSON, or not UTF-8
                raise BadArchive("the archive is damaged: its meta.json is not JSON") from None
            check_compatible(self.meta)
        elif member.name == PICKLE:
            self.data = member.read()
        elif member.name == SETTINGS:
            self.settings = member.read()
        elif member.name.startswith("buffers/") and member.name.endswith(".npy"):
            self.buffers[member.name] = _receive_buffer(member, self.cow)
        else:
            raise BadArchive(f"the archive holds {member.name!r}, which a state archive "
                             "does not")

    def state(self, name):
        """``(State, lost)``: the state, as the root state ``name``, and the names the
        archive left out. Its settings are what its cells changed (an archive of an
        earlier server's: but for its working directory, environment and import path,
        which were that machine's). Raises IncompatibleArchive if its objects cannot be
        rebuilt."""
        values = self._values()
        try:
            state = _state(name, self.meta, values)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError):
            raise BadArchive("the archive is damaged: its meta.json does not describe "
                             "its state") from None
        return dataclasses.replace(state, process=self._process()), dict(self.meta["lost"])

    def _process(self):
        if self.settings is None:  # an archive from before settings travelled: this server's
            return None
        saved, exc = cell.call_user(pickle.loads, self.settings)
        if exc is not None or not isinstance(saved, dict) or not isinstance(
                saved.get("shared"), dict) or not isinstance(saved.get("own"), dict):
            cell.drop_tracebacks(exc)
            raise BadArchive(f"the archive is damaged: its {SETTINGS} is not settings")
        if "version" not in saved:  # the exporting machine's paths and secrets stay there
            saved = {**saved, "shared": {kind: value for kind, value in saved["shared"].items()
                                         if kind not in MACHINE_SETTINGS}}
        return Process.loaded(saved)

    def _values(self):
        sources = self.meta.get("sources")
        unpickler = ImportUnpickler(io.BytesIO(self.data), self.buffers,
                                    sources if isinstance(sources, dict) else {})
        values, exc = cell.call_user(unpickler.load)  # the objects' own code runs
        if exc is not None:
            why = cell.safe_repr(exc, 500)
            cell.drop_tracebacks(exc)
            raise IncompatibleArchive(f"the state's objects cannot be rebuilt on this server: "
                                      f"{why}")
        if not isinstance(values, dict):
            raise BadArchive(f"the archive is damaged: its {PICKLE} is not a namespace")
        return values

    def discard(self):
        """Delete the files written for the buffers (memory goes with the objects)."""
        for buffer in self.buffers.values():
            buffer.discard()
        self.buffers.clear()


def check_compatible(meta):
    """Raise unless this server can load a state that ``meta`` describes."""
    if not isinstance(meta, dict) or not str(meta.get("format", "")).startswith(
            "snapshot-kernel state archive"):
        raise BadArchive("the archive is damaged: its meta.json is not a state's")
    if meta["format"] != FORMAT:
        raise IncompatibleArchive(f"the archive is in the format {meta['format']!r}; this "
                                  f"server reads {FORMAT!r}")
    if meta.get("python") != PYTHON:
        raise IncompatibleArchive(
            f"the archive was written by {meta.get('python')!r} and this server runs "
            f"{PYTHON!r}: cells' code is kept compiled, so a state moves only between "
            "servers of one CPython minor version")
    libraries = meta.get("libraries")
    if not isinstance(libraries, dict):
        raise BadArchive("the archive is damaged: its meta.json lists no libraries")
    for library, version in libraries.items():
        _check_library(str(library), str(version))


def _check_library(name, version):
    module, exc = cell.call_user(importlib.import_module, name)  # runs the library's code
    if exc is not None:
        cell.drop_tracebacks(exc)
        raise IncompatibleArchive(f"the state holds objects of {name} {version}, which this "
                                  f"server cannot import ({type(exc).__name__}); install it")
    here = getattr(module, "__version__", None)
    if not isinstance(here, str) or _series(here) != _series(version):
        raise IncompatibleArchive(f"the state holds objects of {name} {version}, and this "
                                  f"server has {name} {here}: their major versions differ")


def _series(version):
    """What must match in two versions of a library: the major one (and the minor one
    below 1.0, where minor versions break things)."""
    parts = (version.split("+")[0].split(".") + ["0"])[:2]
    digits = ["".join(c for c in part if c.isdigit()) or "0" for part in parts]
    return (digits[0],) if digits[0] != "0" else tuple(digits)


class Buffer:
    """A buffer read from a member: ``base`` is what a view of its bytes refers to (a
    stored mapping, or the array), ``array`` the array the member held."""

    def __init__(self, base, array, blob=None):
        self.base, self.array, self._blob = base, array, blob

    def discard(self):
        blob = self._blob
        if blob is not None and blob.path is not None:
            try:
                os.unlink(blob.path)  # the mapping stays valid while objects refer to it
            except FileNotFoundError:  # gone already
                pass


def _receive_buffer(member, buffers):
    numpy, exc = cell.call_user(importlib.import_module, "numpy")
    if exc is not None:
        cell.drop_tracebacks(exc)
        raise IncompatibleArchive("the state holds numpy arrays, and this server cannot "
                                  "import numpy")
    fmt = numpy.lib.format
    try:
        major, minor = fmt.read_magic(member)
        read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, fortran, dtype = read_header(member)
    except (ValueError, TypeError) as exc:  # what numpy raises for a header it cannot read
        raise BadArchive(f"the archive is damaged: {member.name!r} is not a .npy array "
                         f"({exc})") from None
    size = dtype.itemsize * _count(shape)
    if dtype.hasobject or size != member.size - member.done:
        raise BadArchive(f"the archive is damaged: {member.name!r} does not hold the array "
                         "its header describes")
    order = "F" if fortran else "C"
    if buffers is None or not size:
        array = numpy.empty(shape, dtype, order=order)
        flat, done = array.ravel(order="K").view(numpy.uint8), 0
        for chunk in member.chunks(size):
            flat[done:done + len(chunk)] = numpy.frombuffer(chunk, numpy.uint8)
            done += len(chunk)
        return Buffer(array.ravel(order="K").view(numpy.uint8), array)
    blob = cow.Blob.fill(size, member.chunks(size), buffers.directory)
    mapping = blob.map(stored=True)
    return Buffer(mapping, numpy.ndarray(shape, dtype, buffer=mapping, order=order), blob)


def _count(shape):
    count = 1
    for length in shape:
        count *= length
    return count


class ImportUnpickler(persist.Unpickler):
    """Loads what ``ExportPickler`` wrote; members are the received ``buffers``.

    Cells' functions get file names of this process's cells (``<cell-N>`` names of
    the exporting process may be this one's other cells): tracebacks through them
    quote their lines from ``sources``, the cells' code by their old file names."""

    def __init__(self, file, buffers, sources):
        super().__init__(file, None)
        self.buffers, self.sources = buffers, sources
        self._filenames = {}  # old cell file name -> this process's

    def find_class(self, module, name):
        if name == "_make_function" and persist._MOVED.get(module, module) == persist.__name__:
            return self._make_function
        return super().find_class(module, name)

    def _make_function(self, code, name, cells):
        code = marshal.loads(code)
        old = code.co_filename
        if old.startswith(cell.CELL_FILENAME_PREFIX):
            new = self._filenames.get(old)
            if new is None:
                new = self._filenames[old] = cell.cell_filename()
            code = _renamed(code, new)
            if isinstance(self.sources.get(old), str):
                cell.Source.keep_while(new, self.sources[old], code)
        return types.FunctionType(code, STORED_GLOBALS, name, None, cells)

    def _make(self, kind, key, *rest):
        if kind == "member":
            name, writeable = rest
            buffer = self.buffers.get(name)
            if buffer is None:
                raise pickle.UnpicklingError(f"the archive has no member {name!r}")
            if writeable is None:
                return buffer.base
            if not writeable:
                buffer.array.flags.writeable = False
            return buffer.array
        if kind not in ("owned", "array", "view"):
            raise pickle.UnpicklingError(f"a reference of kind {kind!r} cannot be imported")
        return super()._make(kind, key, *rest)


def _renamed(code, filename):
    """``code`` and the code objects nested in it, as compiled from file ``filename``."""
    consts = tuple(_renamed(const, filename) if isinstance(const, types.CodeType) else const
                   for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _state(name, meta, values):
    """The root state ``name`` holding ``values`` as ``meta`` says."""
    groups = [Group(frozenset(group["names"]), int(group["weight"]), int(group["fresh"]))
              for group in meta["groups"]]
    changes = fresh_namespace().own_entries()
    for key, value in values.items():
        spec = meta["names"].get(key) if isinstance(key, str) else None
        group = groups[spec["group"]] if spec is not None else Group(frozenset([key]))
        changes[key] = Entry(key, value, group, None if spec is None else spec["shared"])
    for key, why in meta["lost"].items():
        why = str(why) if str(why).startswith(NOT_EXPORTED) else NOT_EXPORTED + str(why)
        changes[key] = Entry(key, GONE, Group(frozenset([key])), None, why)
    total = sum(group.weight for group in groups)
    return State(name, Namespace(None, changes), None, str(meta["code"]), total, total,
                 dict(meta["meta"]), float(meta["created"]))
