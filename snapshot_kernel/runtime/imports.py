"""Running code on a module right after its first import, before the importer's next line."""

import importlib.abc
import sys


def spec_then(finder, after, name, path=None, target=None):
    """For ``finder.find_spec``: the spec the finders after ``finder`` on ``sys.meta_path``
    give ``name``, its loader wrapped so that ``after(module)`` runs once the module is
    executed; None if no finder has it or its loader cannot be wrapped."""
    for other in list(sys.meta_path):
        find = getattr(other, "find_spec", None)
        if other is finder or find is None:
            continue
        spec = find(name, path, target)
        if spec is None:
            continue
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # the next finder imports it unwrapped: a namespace package, say
        spec.loader = _Then(spec.loader, after)
        return spec
    return None


class _Then(importlib.abc.Loader):
    """The module's own loader, with ``after`` run once it has executed the module; the
    module keeps its own loader (``__loader__``, ``__spec__.loader``)."""

    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def __getattr__(self, name):  # get_code, get_source, get_resource_reader, ...
        return getattr(self._loader, name)

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._after(module)
