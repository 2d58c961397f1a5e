"""The ``logging`` settings held per cell: loggers' levels and ``logging.disable``
(kind ``logging``), and the root logger's handlers (``logging.basicConfig``).

``Logger.level``, ``Logger._cache``, ``Manager.disable`` and ``RootLogger.handlers``
become properties. In a thread holding a cell's settings they read the cell's: the
levels its state set (and the cell sets) over the process's, with caches of its own
where those differ; the root's handlers as its state has them. Elsewhere, and for a
logger being made, they are the instance's own, as before.

A state's levels are None (the server's) or ``({logger name: level}, disable or
None)``, only what its cells set; its root handlers None (the server's) or a
``RootHandlers``.
"""

import logging
import sys

from .held import current
from .identity import SameObjects

NAME, HANDLERS = "logging", "logging.root handlers"
_CACHES = "logging caches"  # in Held.working: the cell's isEnabledFor caches, by logger


def _writable(held):
    working = held.working.get(NAME)
    if working is None:
        value = held.values.get(NAME)
        working = held.working[NAME] = [dict(value[0]), value[1]] if value else [{}, None]
    return working


def _get_level(logger):
    held = current()
    if held is not None:
        found = held.value_of(NAME)
        if found is not None:
            level = found[0].get(logger.name)
            if level is not None:
                return level
    return vars(logger).get("level", logging.NOTSET)


def _set_level(logger, level):
    held = current()
    if held is None or "level" not in vars(logger):  # no cell, or the logger being made
        vars(logger)["level"] = level
    else:
        _writable(held)[0][logger.name] = level


def _get_cache(logger):
    held = current()
    if held is None or held.value_of(NAME) is None:
        return vars(logger)["_cache"]
    caches = held.working.get(_CACHES)
    if caches is None:
        caches = held.working[_CACHES] = {}
    cache = caches.get(logger)
    if cache is None:
        cache = caches[logger] = {}
    return cache


def _set_cache(logger, cache):
    held = current()
    if held is None or "_cache" not in vars(logger) or held.value_of(NAME) is None:
        vars(logger)["_cache"] = cache
    else:
        held.working.setdefault(_CACHES, {})[logger] = cache


def _get_disable(manager):
    held = current()
    if held is not None:
        found = held.value_of(NAME)
        if found is not None and found[1] is not None:
            return found[1]
    return vars(manager).get("disable", 0)


def _set_disable(manager, level):
    held = current()
    if held is None or "disable" not in vars(manager):
        vars(manager)["disable"] = level
    else:
        _writable(held)[1] = level


def _process_level(name):
    logger = logging.root if name == logging.root.name else \
        logging.root.manager.loggerDict.get(name)
    return vars(logger).get("level", logging.NOTSET) if isinstance(logger, logging.Logger) \
        else logging.NOTSET


def leave_levels(held, value):
    """The state's new levels: ``value`` itself unless the cell changed them."""
    working = held.working.get(NAME)
    if working is None:
        return value
    levels = {name: level for name, level in working[0].items()
              if level != _process_level(name)}
    disable = working[1]
    if disable == vars(logging.root.manager).get("disable", 0):
        disable = None
    now = (levels, disable) if levels or disable is not None else None
    return value if now == value else now


# -- the root logger's handlers ----------------------------------------------------------

def _get_handlers(root):
    held = current()
    if held is None:
        return vars(root)["handlers"]
    working = held.working.get(HANDLERS)
    if working is None:
        value = held.values.get(HANDLERS)
        working = held.working[HANDLERS] = list(
            vars(root)["handlers"] if value is None else value.objects)
    return working


def _set_handlers(root, handlers):
    held = current()
    if held is None or "handlers" not in vars(root):
        vars(root)["handlers"] = handlers
    else:
        held.working[HANDLERS] = handlers


def leave_handlers(held, value):
    """The state's new root handlers: ``value`` itself unless the cell changed them."""
    working = held.working.get(HANDLERS)
    if working is None or (value is not None and value.holds(working)):
        return value
    if SameObjects(vars(logging.root)["handlers"]).holds(working):
        return None
    return RootHandlers(working)


class RootHandlers(SameObjects):
    """Immutable: the root logger's handlers (``logging.basicConfig`` adds one), kept as
    set, not copied. Saved as recipes: a stream handler to ``sys.stdout`` or
    ``sys.stderr`` and a file handler (appending) come back after a restart with their
    level and plain formatter; others do not."""

    __slots__ = ()

    def __reduce__(self):
        recipes = [recipe for recipe in map(_handler_recipe, self.objects) if recipe]
        return (_handlers_made, (tuple(recipes),))


def _handler_recipe(handler):
    """What makes ``handler`` again in another process, or None."""
    formatter = handler.formatter
    if formatter is not None and type(formatter) is not logging.Formatter:
        return None
    style = next((key for key, kind in logging._STYLES.items()
                  if formatter is not None and type(formatter._style) is kind[0]), "%")
    looks = (handler.level, formatter and (formatter._fmt, formatter.datefmt, style))
    if type(handler) is logging.FileHandler:
        return ("file", handler.baseFilename, handler.encoding, *looks)
    if type(handler) is logging.StreamHandler:
        for name in ("stdout", "stderr"):
            if handler.stream is getattr(sys, name) or handler.stream is getattr(sys, f"__{name}__"):
                return ("stream", name, None, *looks)
    return None


def _handlers_made(recipes):
    handlers = []
    for kind_, where, encoding, level, looks in recipes:
        try:
            if kind_ == "file":
                handler = logging.FileHandler(where, "a", encoding=encoding, delay=True)
            else:
                handler = logging.StreamHandler(getattr(sys, where))
        except OSError:  # its file's directory is gone: the state has no such handler now
            continue
        handler.setLevel(level)
        if looks is not None:
            handler.setFormatter(logging.Formatter(*looks))
        handlers.append(handler)
    return RootHandlers(handlers)


def install():
    """Hold the settings per cell (see the module's docstring); idempotent."""
    if isinstance(vars(logging.Logger).get("level"), property):
        return
    logging.Logger.level = property(_get_level, _set_level)
    logging.Logger._cache = property(_get_cache, _set_cache)
    logging.Manager.disable = property(_get_disable, _set_disable)
    logging.RootLogger.handlers = property(_get_handlers, _set_handlers)
