"""pyplot in cells, as Jupyter's inline backend has it.

* Each execution has its own pyplot registry (``Gcf.figs``): two cells plotting
  at once each get their own figures, and threads a cell starts share its one.
  Threads that run no cell see the registry pyplot would have without us.
* At the end of a cell, and at ``plt.show()``, every figure in the cell's
  registry is shown as a ``display_data`` output (PNG) and closed in pyplot.
  The Figure objects stay usable; a last expression that is a Figure shows it.
* A Figure's mime bundle is its PNG (``bbox_inches="tight"``, as the inline
  backend draws it), with its size in the metadata.

``install()`` patches matplotlib only once it is imported (a post-import hook
waits for it), so matplotlib stays optional. It draws with Agg unless the environment
names a backend (``MPLBACKEND``), chosen as matplotlib is imported: the process's
environment is not changed (the server's host may be a test run that goes on).
"""

import collections
import importlib.abc
import io
import os
import struct
import sys
import threading
import weakref

from . import capture as _capture
from . import display, imports

_registries = weakref.WeakKeyDictionary()  # Capture -> OrderedDict of figure managers
_install_lock = threading.Lock()
_patched = set()


class ExecutionFigures:
    """Stands in for ``Gcf.figs``: the calling execution's OrderedDict of managers."""

    def __init__(self, outside):
        self._outside = outside

    def current(self):
        capture = _capture.current_capture()
        if capture is None:
            return self._outside
        figures = _registries.get(capture)
        if figures is None:
            figures = _registries[capture] = collections.OrderedDict()
        return figures

    def __getattr__(self, name):  # get, pop, values, keys, items, clear, move_to_end, ...
        return getattr(self.current(), name)

    def __len__(self):
        return len(self.current())

    def __iter__(self):
        return iter(self.current())

    def __reversed__(self):
        return reversed(self.current())

    def __contains__(self, key):
        return key in self.current()

    def __getitem__(self, key):
        return self.current()[key]

    def __setitem__(self, key, value):
        self.current()[key] = value

    def __delitem__(self, key):
        del self.current()[key]

    def __bool__(self):
        return bool(self.current())

    def __repr__(self):
        return repr(self.current())


def flush(capture):
    """Show every figure of ``capture``'s execution and close it in pyplot."""
    figures = _registries.get(capture)
    if not figures:
        return
    managers = list(figures.values())
    figures.clear()
    for manager in managers:
        figure = manager.canvas.figure
        capture.add(display.display_data(figure, capture.limit, capture.image_limit))
        if hasattr(manager, "_cidgcf"):  # what Gcf.destroy does
            manager.canvas.mpl_disconnect(manager._cidgcf)
        manager.destroy()


def figure_bundle(figure):
    """``(data, metadata)`` of a Figure: its PNG, unless it has nothing drawn."""
    if not figure.axes and not figure.lines and not figure.texts and not figure.images:
        return {}, {}  # as IPython: an empty figure shows as text only
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    png = buffer.getvalue()
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    return {"image/png": png}, {"image/png": {"width": width, "height": height}}


def _patch_gcf(module):
    gcf = module.Gcf
    if not isinstance(gcf.figs, ExecutionFigures):
        gcf.figs = ExecutionFigures(gcf.figs)


def _patch_pyplot(module):
    original = module.show

    def show(*args, **kwargs):
        capture = _capture.current_capture()
        if capture is None:
            return original(*args, **kwargs)
        flush(capture)
        return None

    show.__doc__ = original.__doc__
    show.__wrapped__ = original
    module.show = show


def _register_figure(module):
    display.register_formatter(module.Figure, figure_bundle)


def _choose_agg(module):
    """What ``MPLBACKEND=Agg`` would do, unless the environment names a backend."""
    if "MPLBACKEND" not in os.environ:
        module.rcParams["backend"] = "agg"


_HOOKS = {"matplotlib": _choose_agg, "matplotlib._pylab_helpers": _patch_gcf,
          "matplotlib.pyplot": _patch_pyplot, "matplotlib.figure": _register_figure}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module of ``_HOOKS`` right after it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in _HOOKS or name in _patched:
            return None
        return imports.spec_then(self, lambda module: _run_hook(name, module), name, path,
                                 target)


def _run_hook(name, module):
    with _install_lock:
        if name not in _patched:
            _patched.add(name)
            _HOOKS[name](module)


def install():
    """Patch matplotlib now if it is imported, else when it is; idempotent."""
    with _install_lock:
        if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
            sys.meta_path.insert(0, _AfterImport())
    for name in _HOOKS:
        module = sys.modules.get(name)
        if module is not None:
            _run_hook(name, module)
