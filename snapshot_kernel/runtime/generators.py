"""The global random generators held per cell: ``random``'s and numpy's legacy one.

A library's module functions (``random.random``, ``np.random.rand``) are bound methods
of one generator object. A cell that runs alone uses that object, written with its
state's value when it starts, so its calls cost what they cost in a plain process.
While a cell uses it, a cell that starts beside it gets a generator of its own, made
with its state's value the first time it draws, and the module functions become
*dispatchers* that call the calling thread's generator (a few tens of nanoseconds more
per call), until a cell starts with none running. numpy's ``mtrand._rand``, which
scikit-learn's ``random_state=None`` reaches, is the calling thread's generator too.
Code that kept a bound method from before (``from random import random`` in a library)
calls the shared object.
"""

import ctypes
import functools
import operator
import random
import sys
import threading
import types

from .held import current, imported

_LAZY = object()  # in Held.working: the cell's own generator, not made yet
_NONE = object()  # no generator of a cell: a thread that holds none


class Generators:
    """One library's global generator, held per cell as kind ``name``."""

    def __init__(self, name, library, shared, make, read, write, same, modules, methods,
                 prepare=None):
        self.name, self.library, self.prepare = name, library, prepare
        self.shared, self.make = shared, make  # () -> the shared object; () -> a new one
        self.read, self.write, self.same = read, write, same  # of a generator and a value
        self.modules, self.methods = modules, methods  # () -> modules; {function: method}
        # gen: what the calling thread's calls reach (``adopt``); the class's serves threads
        # that hold no cell: the shared object, looked up at use
        self.local = type(f"_Local_{name}", (threading.local,), {"gen": _SharedObject(self)})()
        self._lock = threading.Lock()
        self._owner = None  # the Held whose cell uses the shared object
        self._users = 0     # cells that hold it now
        self._dispatchers = None
        self._originals = None  # {(module, name): function} while dispatching

    def active(self):
        return imported(self.library)

    def enter(self, held, value):
        """Give the cell its generator, holding the state's ``value`` (None: fresh)."""
        if self.prepare is not None:
            self.prepare()
        with self._lock:
            self._users += 1
            if self._owner is not None:
                held.working[self.name] = _LAZY
                if self._originals is None:
                    self._dispatch()
            else:
                self._owner = held
                held.working[self.name] = None
                if self._originals is not None and self._users == 1:
                    self._stop_dispatching()
                shared = self.shared()
                if value is None or not self.same(shared, value):
                    self.write(shared, value)
        self.adopt(held)

    def leave(self, held, value):
        """The state's new value: ``value`` itself unless the cell drew or seeded."""
        own = held.working.get(self.name, _LAZY)
        if own is None:
            own = self.shared()
        if own is _LAZY or (value is not None and self.same(own, value)):
            return value
        return self.read(own)

    def late(self, held, value):
        """After the cell that first imported the library (or at its checkpoint): it drew
        from the shared object, which it holds from now on; the state's value."""
        with self._lock:
            if self.name not in held.working:
                self._users += 1
                if self._owner is None:
                    self._owner = held
                    held.working[self.name] = None
                else:  # another cell holds the shared object: this one's draws were there
                    held.working[self.name] = _LAZY
        return self.read(self.shared())

    def release(self, held):
        """The cell is over: the shared object is free for the next one."""
        with self._lock:
            if held.working.pop(self.name, _NONE) is not _NONE:
                self._users -= 1
            if self._owner is held:
                self._owner = None
        self.local.__dict__.pop("gen", None)

    def adopt(self, held):
        """The calling thread takes ``held`` on (or none): its calls reach that cell's
        generator."""
        own = _NONE if held is None else held.working.get(self.name, _NONE)
        if own is _NONE:
            self.local.__dict__.pop("gen", None)  # the class's: the shared object
        elif own is None:
            self.local.gen = self.shared()
        elif own is _LAZY:
            self.local.gen = _Maker(self, held)
        else:
            self.local.gen = own

    def current(self):
        """The generator the calling thread's calls reach."""
        found = self.local.gen
        kind = type(found)
        if kind is _Maker:
            return found.made()
        return self.shared() if kind is _SharedObject else found

    def _made(self, held):
        with self._lock:
            own = held.working.get(self.name)
            if own is _LAZY:
                own = held.working[self.name] = self.make()
                self.write(own, held.values.get(self.name))
        return self.shared() if own is None else own

    def _dispatch(self):
        if self._dispatchers is None:
            self._dispatchers = {name: _dispatcher(self, name, method)
                                 for name, method in self.methods().items()}
        self._originals = {}
        for module in self.modules():
            for name, dispatcher in self._dispatchers.items():
                if name in vars(module):
                    self._originals[module, name] = vars(module)[name]
                    setattr(module, name, dispatcher)

    def _stop_dispatching(self):
        for (module, name), original in self._originals.items():
            if vars(module).get(name) is self._dispatchers[name]:  # not patched since
                setattr(module, name, original)
        self._originals = None


class _Maker:
    """Stands in ``_Local.gen`` for a cell's generator not made yet: the first call
    through it makes it."""

    __slots__ = ("generators", "held")

    def __init__(self, generators, held):
        self.generators, self.held = generators, held

    def made(self):
        made = self.generators._made(self.held)
        if current() is self.held:
            self.generators.local.gen = made
        return made

    def __getattr__(self, name):
        return getattr(self.made(), name)


class _SharedObject:
    """``_Local.gen`` of threads that hold no cell: the shared object, looked up at use."""

    __slots__ = ("generators",)

    def __init__(self, generators):
        self.generators = generators

    def __getattr__(self, name):
        return getattr(self.generators.shared(), name)


class _Dispatcher:
    """A module function while cells run beside each other: calls the calling thread's
    generator's method. Stateless, so a copy of it is itself."""

    __slots__ = ("local", "name", "library")

    @property
    def __name__(self):
        return self.name

    def __repr__(self):
        return (f"<snapshot-kernel dispatcher {self.library}.{self.name}: the calling "
                "cell's generator's>")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        module = random if self.library == "random" else _mtrand()
        return (getattr, (module, self.name))


def _dispatcher(generators, name, method):
    kind = type(f"dispatch_{name}", (_Dispatcher,),
                {"__slots__": (), "__call__": property(operator.attrgetter(f"local.gen.{method}"))})
    made = kind()
    made.local, made.name, made.library = generators.local, name, generators.library
    return made


# -- random ---------------------------------------------------------------------------------

_RANDOM_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # past the reference count and type
_RANDOM_BYTES = 4 + 624 * 4  # int index; uint32_t state[624]
_words = {}  # id(generator) -> (generator, its words as a ctypes array): reads 0.1 µs


def _random_words(generator):
    """The Mersenne Twister state of a ``random.Random``, read from its C struct (where
    ``getstate()`` takes 10 µs); the layout is checked once (``_random_layout_known``)."""
    found = _words.get(id(generator))
    if found is None or found[0] is not generator:
        if len(_words) > 64:
            _words.clear()
        found = _words[id(generator)] = (generator, (ctypes.c_char * _RANDOM_BYTES)
                                         .from_address(id(generator) + _RANDOM_OFFSET))
    return found[1].raw


def _random_layout_known():
    generator = random.Random(5)
    state = generator.getstate()[1]
    words = _random_words(generator)
    _words.clear()
    return list(state) == [int.from_bytes(words[i + 4:i + 8], sys.byteorder)
                           for i in range(0, 624 * 4, 4)] + \
        [int.from_bytes(words[:4], sys.byteorder, signed=True)]


_FAST_RANDOM = _random_layout_known()


def _read_random(generator):
    return generator.getstate(), (_random_words(generator) if _FAST_RANDOM else None)


def _write_random(generator, value):
    if value is None:
        generator.seed()  # from the OS's entropy, as a fresh process seeds it
    else:
        generator.setstate(value[0])


def _same_random(generator, value):
    if not _FAST_RANDOM:
        return generator.getstate() == value[0]
    found = _words.get(id(generator))  # (what _random_words reads, without its call)
    words = found[1].raw if found is not None and found[0] is generator else \
        _random_words(generator)
    return value[1] == words and generator.gauss_next == value[0][2]


def _random_methods():
    return {name: name for name, function in vars(random).items()
            if getattr(function, "__self__", None) is random._inst}


RANDOM = Generators(
    "random", "random", functools.partial(getattr, random, "_inst"), random.Random, _read_random,
    _write_random, _same_random, lambda: (random,), _random_methods)


# -- numpy's legacy RandomState -----------------------------------------------------------

def _mtrand():
    return sys.modules["numpy"].random.mtrand  # numpy 2 imports numpy.random when asked


def _mt_words(generator):
    """The raw Mersenne Twister words of a RandomState: 1 µs, where ``get_state`` takes 35."""
    return ctypes.string_at(generator._bit_generator.ctypes.state_address, 624 * 4 + 4)


def _read_numpy(generator):
    name, keys, pos, has_gauss, gauss = generator.get_state(legacy=True)
    return name, keys.tobytes(), pos, has_gauss, gauss, _mt_words(generator)


def _write_numpy(generator, value):
    if value is None:
        generator.seed()  # from the OS's entropy, as a fresh import seeds it
        return
    np = sys.modules["numpy"]
    name, keys, pos, has_gauss, gauss, _ = value
    generator.set_state((name, np.frombuffer(keys, dtype=np.uint32), pos, has_gauss, gauss))


def _numpy_methods():
    shared = vars(_mtrand())["_rand"]
    methods = {name: name for name, function in vars(_mtrand()).items()
               if getattr(function, "__self__", None) is shared}
    # module functions of mtrand that call its _rand by its global name
    methods.update(seed="seed", sample="random_sample", ranf="random_sample")
    return methods


NUMPY = Generators(
    "numpy.random", "numpy", lambda: vars(_mtrand())["_rand"],
    lambda: sys.modules["numpy"].random.RandomState(), _read_numpy, _write_numpy,
    lambda generator, value: value[5] == _mt_words(generator),
    lambda: (sys.modules["numpy.random"], _mtrand()), _numpy_methods,
    prepare=lambda: install())


class _HeldMtrand(types.ModuleType):
    """The class of ``numpy.random.mtrand``: its ``_rand`` is the calling thread's."""

    @property
    def _rand(self):
        return NUMPY.current()

    @_rand.setter
    def _rand(self, value):
        vars(self)["_rand"] = value


def install():
    """Let threads reach their cell's generators; numpy's ``_rand`` once numpy is
    imported. Idempotent."""
    mtrand = _mtrand() if "numpy" in sys.modules else None
    if mtrand is not None and type(mtrand) is types.ModuleType:
        mtrand.__class__ = _HeldMtrand


def adopt(held):
    """``held.ADOPTED``: a thread that takes a cell's settings on reaches its generators."""
    for generators in (RANDOM, NUMPY):
        generators.adopt(held)
