"""The settings outside a namespace that follow a state: one small entry per kind.

Each kind reads the process's (or, for ``THREAD`` kinds, the running thread's)
current value as something ``==`` compares and pickle saves, and writes such a
value back. ``same(value)`` answers whether the current value still equals
``value`` more cheaply than ``read`` where a read costs (``rcParams``). A
library's kinds count only once the library is imported; a state saved
before that is given the library's defaults (``fresh``), as a fresh process
that imports it would have them.
"""

import contextlib
import contextvars
import ctypes
import decimal
import os
import random
import socket
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import logs, mocks, monkeypatches

PROCESS, THREAD = "process", "thread"  # process-wide, or the cell thread's own


@dataclass(frozen=True)
class Kind:
    name: str
    read: Callable[[], Any]
    write: Callable[[Any], None]
    scope: str = PROCESS
    library: Optional[str] = None      # counts once sys.modules has it
    fresh: Optional[Callable[[], Any]] = None  # the value a fresh import gives
    same: Optional[Callable[[Any], bool]] = None
    carried: Callable[[], bool] = lambda: False  # kept in a context variable: a state's
    # context carries it from cell to cell, so it is read and written only to save it
    alone: Optional[Callable[[Any], bool]] = None  # true of a value whose cells run alone

    def active(self):
        return self.library is None or self.library in sys.modules

    def unchanged(self, value):
        return self.same(value) if self.same is not None else self.read() == value


KINDS = []
SCOPES = {PROCESS: [], THREAD: []}  # the kinds of each scope, in order


def kind(name, read, write, **options):
    """Register a kind of setting (see ``Kind``)."""
    made = Kind(name, read, write, **options)
    KINDS.append(made)
    SCOPES[made.scope].append(made)


_carried = {}  # kind name -> carried(), once its library is imported (it cannot change)


def carried(each):
    """``each.carried()``, asked once."""
    found = _carried.get(each.name)
    if found is None:
        found = _carried[each.name] = each.carried()
    return found


# -- the standard library ------------------------------------------------------------------

def _read_environ():
    """The environment as os.environ keeps it (encoded): 0.4 µs to compare, where the
    decoded ``dict(os.environ)`` takes 20."""
    return dict(os.environ._data)


def _write_environ(target):
    decode = os.environ.decodevalue
    for key in [key for key in os.environ._data if key not in target]:
        del os.environ[os.environ.decodekey(key)]  # unsetenv too: subprocesses inherit it
    for key, value in target.items():
        if os.environ._data.get(key) != value:
            os.environ[os.environ.decodekey(key)] = decode(value)


def _read_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_path(target):
    sys.path[:] = target


def _write_filters(target):
    warnings.filters[:] = target
    warnings._filters_mutated()  # so cached "once"/"default" decisions are made again


def _read_decimal():
    context = decimal.getcontext()
    return (context.prec, context.rounding, context.Emin, context.Emax, context.capitals,
            context.clamp, tuple(sorted(k.__name__ for k, v in context.flags.items() if v)),
            tuple(sorted(k.__name__ for k, v in context.traps.items() if v)))


def _write_decimal(target):
    prec, rounding, emin, emax, capitals, clamp, flags, traps = target
    signals = {signal.__name__: signal for signal in decimal.getcontext().flags}
    decimal.setcontext(decimal.Context(prec, rounding, emin, emax, capitals, clamp,
                                       [signals[name] for name in flags],
                                       [signals[name] for name in traps]))


kind("cwd", os.getcwd, os.chdir)
kind("environ", _read_environ, _write_environ,
     same=lambda value: os.environ._data == value)
kind("sys.path", lambda: list(sys.path), _write_path, same=lambda value: sys.path == value)
def _random_words():
    """The Mersenne Twister state of ``random``'s generator, read from its C struct
    (``int index; uint32_t state[624]`` after the object header): 0.1 µs, where
    ``getstate()`` takes 10. The layout is checked once (``_random_layout_known``)."""
    generator = random._inst
    if _words[0] is not generator:  # a cell may put another generator there
        _words[:] = generator, (ctypes.c_char * _RANDOM_BYTES).from_address(
            id(generator) + _RANDOM_OFFSET)
    return _words[1].raw  # a copy: no foreign call, which ctypes.string_at would be


_RANDOM_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # past the reference count and type
_RANDOM_BYTES = 4 + 624 * 4
_words = [None, None]  # the generator read, and its words as a ctypes array (holds it alive)


def _random_layout_known():
    state = random.getstate()[1]
    words = _random_words()
    return list(state) == [int.from_bytes(words[i + 4:i + 8], sys.byteorder)
                           for i in range(0, 624 * 4, 4)] + \
        [int.from_bytes(words[:4], sys.byteorder, signed=True)]


def _read_random():
    return random.getstate(), _random_words()


def _same_random(value):
    return value[1] == _random_words() and random._inst.gauss_next == value[0][2]


if _random_layout_known():
    kind("random", _read_random, lambda target: random.setstate(target[0]), same=_same_random)
else:  # another interpreter's layout: the slower comparison
    kind("random", random.getstate, random.setstate)
kind("recursionlimit", sys.getrecursionlimit, sys.setrecursionlimit)
kind("socket.timeout", socket.getdefaulttimeout, socket.setdefaulttimeout)
kind("umask", _read_umask, os.umask)
kind("warnings", lambda: list(warnings.filters), _write_filters)
kind("logging", logs.read_levels, logs.write_levels, same=logs.same_levels)
kind("logging.root handlers", logs.read_root_handlers, logs.write_root_handlers,
     same=logs.same_root_handlers)
kind("decimal", _read_decimal, _write_decimal, scope=THREAD, carried=lambda: True)
kind("module attributes", monkeypatches.read, monkeypatches.write, same=monkeypatches.same,
     fresh=lambda: monkeypatches.NONE, alone=monkeypatches.Patches.alone)
kind("unittest.mock", mocks.read, mocks.write, library="unittest.mock", same=mocks.same,
     fresh=lambda: mocks.NONE)


# -- numpy -------------------------------------------------------------------------------

def _numpy():
    return sys.modules["numpy"]


def _legacy_generator():
    return _numpy().random.mtrand._rand


def _mt_words():
    """The raw Mersenne Twister words of numpy's global RandomState: 1 µs to read,
    where ``get_state`` takes 35."""
    state = _legacy_generator()._bit_generator.ctypes.state_address
    return ctypes.string_at(state, 624 * 4 + 4)


def _read_numpy_random():
    name, keys, pos, has_gauss, gauss = _legacy_generator().get_state(legacy=True)
    return name, keys.tobytes(), pos, has_gauss, gauss, _mt_words()


def _write_numpy_random(target):
    name, keys, pos, has_gauss, gauss, _ = target
    np = _numpy()
    _legacy_generator().set_state((name, np.frombuffer(keys, dtype=np.uint32), pos,
                                   has_gauss, gauss))


def _fresh_numpy_random():
    _legacy_generator().seed()  # from the OS's entropy, as a fresh import seeds it
    return _read_numpy_random()


kind("numpy.random", _read_numpy_random, _write_numpy_random, library="numpy",
     fresh=_fresh_numpy_random, same=lambda value: value[5] == _mt_words())
def _in_context_variable(module, name):
    """True if numpy keeps a setting in a context variable (print options from 2.1 on)."""
    return isinstance(getattr(sys.modules.get(module), name, None), contextvars.ContextVar)


kind("numpy.printoptions", lambda: _numpy().get_printoptions(),
     lambda target: _numpy().set_printoptions(**target), scope=THREAD, library="numpy",
     carried=lambda: _in_context_variable("numpy._core.printoptions", "format_options"))
kind("numpy.errstate", lambda: _numpy().geterr(), lambda target: _numpy().seterr(**target),
     scope=THREAD, library="numpy",
     carried=lambda: _in_context_variable("numpy._core._ufunc_config", "_extobj_contextvar"))


# -- pandas, matplotlib, scikit-learn, torch ---------------------------------------------------

def _pandas_config():
    return sys.modules["pandas"]._config.config


def _flat(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        if type(value) is dict:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _write_pandas(target):
    config = _pandas_config()
    current = _flat(config._global_config)
    for key, value in _flat(target).items():
        if key in current and current[key] != value:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated options still take a value
                config.set_option(key, value)


def _fresh_pandas():
    config = _pandas_config()
    return _unflat({key: option.defval for key, option in config._registered_options.items()})


def _unflat(flat):
    tree = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _copy_tree(tree):
    return {key: _copy_tree(value) if type(value) is dict else value
            for key, value in tree.items()}


kind("pandas.options", lambda: _copy_tree(_pandas_config()._global_config), _write_pandas,
     library="pandas", fresh=_fresh_pandas,
     same=lambda value: _pandas_config()._global_config == value)

_NOT_FOLLOWED_RC = ("backend",)  # the server chose it: cells may switch, states don't carry it


def _rc():
    return sys.modules["matplotlib"].rcParams


def _read_rc():
    return dict.copy(_rc())


def _same_rc(value):
    params = _rc()
    if dict.__eq__(params, value):  # 3 µs; the same but for the backend, 30 µs
        return True
    return len(params) - len(value) <= len(_NOT_FOLLOWED_RC) and all(
        dict.__getitem__(params, key) == wanted for key, wanted in value.items()
        if key not in _NOT_FOLLOWED_RC)


def _write_rc(target):
    params = _rc()
    for key in _NOT_FOLLOWED_RC:
        target = {**target, key: dict.__getitem__(params, key)}
    dict.update(params, target)  # validated when they were set


def _fresh_rc():
    params = dict(sys.modules["matplotlib"].rcParamsOrig)
    for key in _NOT_FOLLOWED_RC:
        params.pop(key, None)
    return params


kind("matplotlib.rcParams", _read_rc, _write_rc, library="matplotlib", fresh=_fresh_rc,
     same=_same_rc)
kind("sklearn.config", lambda: sys.modules["sklearn"].get_config(),
     lambda target: sys.modules["sklearn"].set_config(**target), scope=THREAD,
     library="sklearn")


def _torch_state():
    return bytes(sys.modules["torch"].random.get_rng_state().numpy())


def _write_torch(target):
    torch = sys.modules["torch"]
    torch.random.set_rng_state(torch.frombuffer(bytearray(target), dtype=torch.uint8))


def _fresh_torch():
    sys.modules["torch"].random.seed()
    return _torch_state()


kind("torch.random", _torch_state, _write_torch, library="torch", fresh=_fresh_torch)


_LIBRARY_FAILURES = (AttributeError, TypeError, ValueError, KeyError, ImportError)


def read_all(scope):
    """``{name: value}`` of the active kinds of ``scope``, each read as it is now."""
    values = {}
    for each in KINDS:
        if each.scope == scope and each.active():
            with contextlib.suppress(*_LIBRARY_FAILURES):  # a library half torn down
                values[each.name] = each.read()
    return values
