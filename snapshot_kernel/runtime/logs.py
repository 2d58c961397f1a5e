"""The ``logging`` settings that follow a state (``kinds``): the loggers' levels and
``logging.disable``, and the root logger's handlers (``logging.basicConfig``)."""

import logging
import sys

from .identity import SameObjects


def read_levels():
    manager = logging.root.manager
    levels = {name: each.level for name, each in list(manager.loggerDict.items())
              if isinstance(each, logging.Logger)}
    return levels, logging.root.level, manager.disable


def _same_levels(value):
    """Loggers made since ``value`` was read count as unchanged at a fresh logger's level.
    Levels change through ``Manager._clear_cache``: while it was not called, nothing did."""
    if (_logging_changes[0], value) == _logging_checked.get(id(value), (None, None)):
        return True
    levels, root, disabled = value
    manager = logging.root.manager
    return root == logging.root.level and disabled == manager.disable and all(
        each.level == levels.get(name, logging.NOTSET)
        for name, each in list(manager.loggerDict.items()) if isinstance(each, logging.Logger))


_logging_changes = [0]  # calls of Manager._clear_cache: setLevel, disable, new loggers
_logging_checked = {}   # id(a value found unchanged) -> the count it was found at


def _counting(clear_cache):
    def clear_cache_counted(self):
        _logging_changes[0] += 1
        return clear_cache(self)
    clear_cache_counted._snapshot_kernel = True
    return clear_cache_counted


if not getattr(logging.Manager._clear_cache, "_snapshot_kernel", False):
    logging.Manager._clear_cache = _counting(logging.Manager._clear_cache)


def same_levels(value):
    count = _logging_changes[0]
    same = _same_levels(value)
    if same:
        if len(_logging_checked) > 64:
            _logging_checked.clear()
        _logging_checked[id(value)] = (count, value)  # kept: its id is not reused
    return same


def write_levels(target):
    levels, root, disabled = target
    manager = logging.root.manager
    for name, each in list(manager.loggerDict.items()):
        wanted = levels.get(name, logging.NOTSET)  # made later: a fresh logger's level
        if isinstance(each, logging.Logger) and each.level != wanted:
            each.setLevel(wanted)  # setLevel clears every logger's cache: only if needed
    if logging.root.level != root:
        logging.root.setLevel(root)
    if manager.disable != disabled:
        logging.disable(disabled)


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


def read_root_handlers():
    return RootHandlers(logging.root.handlers)


def same_root_handlers(value):
    return value.holds(logging.root.handlers)


def write_root_handlers(target):
    logging.root.handlers[:] = target.objects
