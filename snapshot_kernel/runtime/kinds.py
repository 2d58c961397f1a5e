"""The settings outside a namespace that follow a state: one small entry per kind.

Each kind is held one of three ways (``Kind.holding``):

- ``HELD``: per cell. A cell reaches its own value through hooks that make a
  process-wide setting per thread (``environ``, ``lists``, ``logs``, ``options``,
  ``generators``, ``fs``); ``enter`` gives the cell its state's value, ``leave``
  returns the state's new one (the very same object where the cell changed nothing).
  A state's value is what its cells changed, absent where they changed nothing, so a
  state follows the server it runs on.
- ``THREAD``: the library keeps it per thread or in the ``contextvars`` context
  (``decimal``, numpy's print and error options, scikit-learn's config): written in
  the cell's thread (unless the context carries it) and read back.
- ``PROCESS``: one per process and no hook can make it per cell (module attributes,
  the recursion limit, torch's generator ...): the ``Gate`` lets two cells run at once
  only if their values can share the process (``apart``).

A library's kinds count once the library is imported (``library``).
"""

import contextlib
import contextvars
import decimal
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import (environ, fs, generators, held, limits, lists, logs, mocks, monkeypatches, options,
               rcparams)
from .held import imported

HELD, THREAD, PROCESS = "held", "thread", "process"


class _Nothing:
    """The claim of a state on a library's process-wide kind it never imported."""

    def __repr__(self):
        return "NOTHING"


NOTHING = _Nothing()


def _differ(a, b):
    return a is not b and a != b


@dataclass(frozen=True)
class Kind:
    name: str
    holding: str = PROCESS
    library: Optional[str] = None  # counts once sys.modules has it
    # THREAD and PROCESS kinds: the current value, and writing one back
    read: Optional[Callable[[], Any]] = None
    write: Optional[Callable[[Any], None]] = None
    same: Optional[Callable[[Any], bool]] = None  # read() == value, where reading costs
    fresh: Optional[Callable[[], Any]] = None  # the value a fresh import gives
    carried: Callable[[], bool] = lambda: False  # a THREAD kind kept in a context variable
    # PROCESS kinds: the value of a state whose cells never changed it (NOTHING: it
    # claims nothing), and why two cells' values cannot share the process (None: they can)
    baseline: Callable[[], Any] = lambda: NOTHING
    apart: Optional[Callable[[Any, Any], Optional[str]]] = None
    # HELD kinds: the cell's thread takes its state's value; the state's new value after
    # (a THREAD kind's enter prepares its library for a cell, given nothing)
    enter: Optional[Callable[[Any, Any], None]] = None
    leave: Optional[Callable[[Any, Any], Any]] = None
    first: Optional[Callable[[Any, Any], Any]] = None  # after the cell that imported it
    release: Optional[Callable[[Any], None]] = None  # the cell is over (after leave)
    lazy: Optional[bool] = None  # leave returns the value unless the cell made a working
    # copy (Held.working has the kind's name); by default, for kinds with no enter
    per_thread: Optional[Callable[[], bool]] = None  # False: the gate keeps cells apart
    resolved: Callable[[Any, Any], Any] = lambda value, server: value  # for the gate

    def __post_init__(self):
        if self.lazy is None:
            object.__setattr__(self, "lazy", self.enter is None)

    def active(self):
        return self.library is None or imported(self.library)

    def unchanged(self, value):
        return self.same(value) if self.same is not None else self.read() == value

    def why_apart(self, a, b):
        """Why cells holding values ``a`` and ``b`` cannot run at once, or None."""
        if self.apart is not None:
            return self.apart(a, b)
        if a is NOTHING or b is NOTHING or not _differ(a, b):
            return None
        return self.name




KINDS = []
KINDS_BY_NAME = {}
SCOPES = {HELD: [], THREAD: [], PROCESS: []}  # the kinds of each holding, in order


def kind(name, **options_):
    """Register a kind of setting (see ``Kind``)."""
    made = Kind(name, **options_)
    KINDS.append(made)
    KINDS_BY_NAME[name] = made
    SCOPES[made.holding].append(made)


_carried = {}  # kind name -> carried(), once its library is imported (it cannot change)


def carried(each):
    """``each.carried()``, asked once."""
    found = _carried.get(each.name)
    if found is None:
        found = _carried[each.name] = each.carried()
    return found


# -- held per cell -------------------------------------------------------------------------

kind("cwd", holding=HELD, enter=fs.enter_cwd, leave=fs.leave_cwd, release=fs.release_cwd,
     per_thread=fs.available, resolved=fs.path_of)
kind("umask", holding=HELD, enter=fs.enter_umask, leave=fs.leave_umask,
     release=fs.release_umask, per_thread=fs.available,
     resolved=lambda value, server: server.umask if value is None else value)
kind(environ.NAME, holding=HELD, leave=environ.leave)
kind(lists.PATH.name, holding=HELD, leave=lists.PATH.leave)
kind(lists.FILTERS.name, holding=HELD, leave=lists.FILTERS.leave)
kind(logs.NAME, holding=HELD, leave=logs.leave_levels)
kind(logs.HANDLERS, holding=HELD, leave=logs.leave_handlers)
for _generators in (generators.RANDOM, generators.NUMPY):
    kind(_generators.name, holding=HELD, library=_generators.library,
         enter=_generators.enter, leave=_generators.leave, release=_generators.release,
         first=_generators.late)
kind(options.NAME, holding=HELD, library="pandas", leave=options.leave, first=options.first)
kind(rcparams.NAME, holding=HELD, library="matplotlib", enter=rcparams.enter,
     leave=rcparams.leave, first=rcparams.first, per_thread=rcparams.per_thread,
     resolved=rcparams.resolved)
for _number in (limits.RECURSION_LIMIT, limits.SOCKET_TIMEOUT):
    kind(_number.name, holding=HELD, enter=getattr(_number, "enter", None), leave=_number.leave,
         release=getattr(_number, "release", None), lazy=True)


# -- per thread or context, by the library --------------------------------------------------

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


def _numpy():
    return sys.modules["numpy"]


def _in_context_variable(module, name):
    """True if numpy keeps a setting in a context variable (print options from 2.1 on)."""
    return isinstance(getattr(sys.modules.get(module), name, None), contextvars.ContextVar)


kind("decimal", holding=THREAD, read=_read_decimal, write=_write_decimal, carried=lambda: True)
def _hold_print_options(held, value):
    """numpy before 2.1 keeps its print options in a module dict: held per cell."""
    if not carried(KINDS_BY_NAME["numpy.printoptions"]):
        for name in ("numpy._core.arrayprint", "numpy.core.arrayprint"):
            module = sys.modules.get(name)
            if module is not None:
                lists.hold_dict(module, "_format_options", "numpy.printoptions")


kind("numpy.printoptions", holding=THREAD, library="numpy",
     read=lambda: _numpy().get_printoptions(),
     write=lambda target: _numpy().set_printoptions(**target),
     carried=lambda: _in_context_variable("numpy._core.printoptions", "format_options"),
     enter=_hold_print_options)
kind("numpy.errstate", holding=THREAD, library="numpy", read=lambda: _numpy().geterr(),
     write=lambda target: _numpy().seterr(**target),
     carried=lambda: _in_context_variable("numpy._core._ufunc_config", "_extobj_contextvar"))
# scikit-learn keeps it in a threading.local, which a new thread fills from the module's
# defaults: a state whose cells never set it gets those, not what the thread's last cell left.
kind("sklearn.config", holding=THREAD, library="sklearn",
     read=lambda: sys.modules["sklearn"].get_config(),
     write=lambda target: sys.modules["sklearn"].set_config(**target),
     fresh=lambda: dict(sys.modules["sklearn._config"]._global_config))


# -- one per process: cells whose values differ take turns ----------------------------------

def _apart_patches(a, b):
    """Module attributes: apart where they differ, or where either holds a function of a
    cell (which reads the globals of one cell at a time)."""
    places = set()
    for value in (a, b):
        if value is not NOTHING and value.alone():
            places.update(monkeypatches.describe(value, cells_only=True))
    if a is not b and a != b:
        places.update(monkeypatches.differing(a, b))
    return f"module attributes: {', '.join(sorted(places))}" if places else None


kind("module attributes", read=monkeypatches.read, write=monkeypatches.write,
     same=monkeypatches.same, fresh=lambda: monkeypatches.NONE,
     baseline=lambda: monkeypatches.NONE, apart=_apart_patches)
kind("unittest.mock", library="unittest.mock", read=mocks.read, write=mocks.write,
     same=mocks.same, fresh=lambda: mocks.NONE, baseline=lambda: mocks.NONE,
     apart=lambda a, b: None if not _differ(a, b) else "unittest.mock: the patches started")


def _torch_state():
    return bytes(sys.modules["torch"].random.get_rng_state().numpy())


def _write_torch(target):
    torch = sys.modules["torch"]
    torch.random.set_rng_state(torch.frombuffer(bytearray(target), dtype=torch.uint8))


def _fresh_torch():
    sys.modules["torch"].random.seed()
    return _torch_state()


kind("torch.random", library="torch", read=_torch_state, write=_write_torch, fresh=_fresh_torch,
     apart=lambda a, b: None if a is NOTHING or b is NOTHING else
     "torch.random: both draw from torch's one global generator")

def active(holding):
    """The kinds of ``holding`` whose libraries are imported: made again once a module was
    imported since (every cell asks, and imports are rare)."""
    size = len(sys.modules)
    found = _ACTIVE.get(holding)
    if found is not None and found[0] == size:
        return found[1]
    kinds = [each for each in SCOPES[holding] if each.active()]
    if not any(each.library in sys.modules and not imported(each.library)
               for each in SCOPES[holding] if each.library is not None):
        _ACTIVE[holding] = (size, kinds)  # (not while one is half imported by a thread)
    return kinds


_ACTIVE = {}  # holding -> (len(sys.modules) then, its active kinds)


_LIBRARY_FAILURES = (AttributeError, TypeError, ValueError, KeyError, ImportError)


def read_all(holding):
    """``{name: value}`` of the active kinds of ``holding`` (THREAD or PROCESS), each read
    as it is now."""
    values = {}
    for each in SCOPES[holding]:
        if each.active():
            with contextlib.suppress(*_LIBRARY_FAILURES):  # a library half torn down
                values[each.name] = each.read()
    return values


def install(inherited):
    """Put every hook that holds settings per cell in place; idempotent."""
    held.install(inherited)
    if generators.adopt not in held.ADOPTED:
        held.ADOPTED.append(generators.adopt)
    environ.install()
    fs.install()
    lists.install()
    limits.install()
    logs.install()
    generators.install()
    options.install()
    rcparams.install()

