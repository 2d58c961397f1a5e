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
trusts its sender as far as running a cell does. Writing one is here; reading
one, ``receiving``.
"""

import io
import json
import linecache
import pickle
import platform
import sys
import types
from importlib import metadata

from . import archive, cow, persist
from .storage import GONE, NOT_EXPORTED
from .. import cell
from ..copying.stored import StoredNamespace, reading

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
