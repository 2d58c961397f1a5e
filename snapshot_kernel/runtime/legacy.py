"""Settings saved before they were held per cell (state directories and archives from
earlier servers), made into what ``settings.Process.loaded`` takes.

Those kept the whole value of each kind: the server's working directory, environment,
``sys.path`` and warnings filters as if a cell had chosen them. What a cell changed
cannot be told apart from what the old server had, so this keeps what differs from
this process and could only have come from a cell: a working directory other than
this one's that still exists, variables and entries this process lacks or has
otherwise, levels other than a new logger's. What an old state removed is not kept.
"""

import logging
import os
import sys
import warnings

from .fs import read_umask
from .limits import RECURSION_LIMIT, SOCKET_TIMEOUT
from .lists import relative

_MOVED_TO_HELD = ("cwd", "umask", "environ", "sys.path", "warnings", "logging",
                  "logging.root handlers", "random", "numpy.random", "pandas.options",
                  "recursionlimit", "socket.timeout", "matplotlib.rcParams")


def converted(saved):
    """``{"held", "shared", "own"}`` from a legacy ``{"shared", "own"}``."""
    old = dict(saved.get("shared") or {})
    held = {}
    for name in _MOVED_TO_HELD:
        if name in old:
            value = _CONVERT.get(name, lambda v: v)(old.pop(name))
            if value is not None:
                held[name] = value
    return {"held": held, "shared": old, "own": dict(saved.get("own") or {})}


def _cwd(path):
    if not isinstance(path, str) or path == os.getcwd() or not os.path.isdir(path):
        return None
    return path


def _umask(mask):
    return None if mask == read_umask() else mask


def _environ(full):
    process = vars(os.environ)["_data"]
    changes = {key: value for key, value in full.items() if process.get(key) != value}
    return changes or None


def _extras(entries, process):
    """``entries`` with only what ``process`` lacks kept around it (see ``lists``)."""
    extras = [entry for entry in entries if entry not in process]
    if not extras:
        return None
    common = next((i for i, entry in enumerate(entries) if entry in process), len(entries))
    before = [entry for entry in entries[:common] if entry not in process]
    after = [entry for entry in entries[common:] if entry not in process]
    return relative([*before, *process, *after], list(process))


def _levels(value):
    levels, root, disabled = value
    kept = {name: level for name, level in levels.items() if level != logging.NOTSET}
    if root != vars(logging.root).get("level", logging.WARNING):
        kept[logging.root.name] = root
    disable = disabled if disabled else None
    return (kept, disable) if kept or disable is not None else None


def _options(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        if type(value) is dict:
            flat.update(_options(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat or None


_CONVERT = {
    "cwd": _cwd,
    "umask": _umask,
    "environ": _environ,
    "sys.path": lambda entries: _extras(list(entries), vars(sys)["path"]),
    "warnings": lambda filters: _extras(list(filters), vars(warnings)["filters"]),
    "logging": _levels,
    "pandas.options": _options,
    "matplotlib.rcParams": lambda params: {key: value for key, value in params.items()
                                           if key != "backend"} or None,
    "recursionlimit": lambda limit: None if limit == RECURSION_LIMIT.server_value() else limit,
    "socket.timeout": lambda timeout: None if timeout == SOCKET_TIMEOUT.server_value()
    else timeout,
}
