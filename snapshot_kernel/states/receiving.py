"""Reading a portable state (``portable``): the archive checked as it comes, its
buffers written where a state's buffers live, its values unpickled once it is whole.
"""

import dataclasses
import importlib
import io
import json
import marshal
import os
import pickle
import types

from . import archive, cow, persist, reductions
from .portable import FORMAT, MACHINE_SETTINGS, MAX_META, PICKLE, PYTHON, SETTINGS
from .storage import GONE, NOT_EXPORTED, Entry, Group, Namespace, State, fresh_namespace
from .. import cell
from ..copying.stored import STORED_GLOBALS
from ..errors import BadArchive, IncompatibleArchive
from ..runtime.settings import Process


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
        if name == "_make_function" and persist.where(module, name) == reductions.__name__:
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
