"""pandas options held per cell.

pandas reads its options from one tree of dicts: through ``get_option`` (which walks it
in ``pandas._config.config._get_root``) and straight from the tree, which many of its
modules keep (``config["display"]["max_columns"]``). Each section of the tree becomes a
``HeldSection``, a dict whose items, in a thread holding a cell's settings, are the
cell's values over the process's; ``_get_root`` is replaced by one whose writes, in such
a thread, go to the cell's own. The process's tree keeps the registered defaults:
options are registered there, whichever thread imports the module that registers them.

A state's value is None (pandas' defaults) or ``{option: value}``, what its cells set.
"""

import sys

from .held import current

NAME = "pandas.options"


def _config():
    return sys.modules["pandas._config.config"]


def _tree():
    return vars(_config())["_global_config"]


class HeldSection(dict):
    """A section of pandas' option tree (see the module's docstring); ``prefix``: the
    names above it, ending with a dot."""

    __slots__ = ("prefix",)

    def __getitem__(self, key):
        held = current()
        if held is not None:
            overlay = held.value_of(NAME)
            if overlay is not None:
                found = overlay.get(self.prefix + key, _ABSENT)
                if found is not _ABSENT:
                    return found
        value = dict.__getitem__(self, key)
        return _held_section(self, key, value) if type(value) is dict else value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


_ABSENT = object()


def _held_section(parent, key, node, prefix=None):
    """``node``, a plain dict under ``key`` of ``parent``, made a HeldSection there."""
    section = HeldSection(node)
    section.prefix = (parent.prefix if prefix is None else prefix) + key + "."
    dict.__setitem__(parent, key, section)
    return section


class _Section:
    """A section as a cell writes it: ``node[key] = value`` sets the cell's own."""

    __slots__ = ("prefix", "node", "held")

    def __init__(self, prefix, node, held):
        self.prefix, self.node, self.held = prefix, node, held

    def __getitem__(self, key):
        return self.node[key]  # (a HeldSection: the cell's value, else the process's)

    def __setitem__(self, key, value):
        working = self.held.working.get(NAME)
        if working is None:
            working = self.held.working[NAME] = dict(self.held.values.get(NAME) or {})
        working[self.prefix + key] = value


def _get_root(key):
    """``pandas._config.config._get_root``: the section holding option ``key``, as the
    calling cell sees it, and the option's last name."""
    path = key.split(".")
    cursor = _tree()
    for part in path[:-1]:
        cursor = cursor[part]
    held = current()
    if held is None:
        return cursor, path[-1]
    prefix = ".".join(path[:-1])
    return _Section(prefix + "." if prefix else "", cursor, held), path[-1]


def _default(key):
    """The process's value of option ``key``."""
    node = _tree()
    for part in key.split("."):
        node = dict.__getitem__(node, part)
    return node


def leave(held, value):
    """The state's new value: ``value`` itself unless the cell set an option."""
    working = held.working.get(NAME)
    if working is None:
        return value
    now = {}
    for key, option in working.items():
        try:
            if _default(key) != option:
                now[key] = option
        except (KeyError, TypeError):  # an option pandas no longer has
            continue
    return value if now == (value or {}) else (now or None)


def first(held, value):
    """After the cell that first imported pandas (or at its checkpoint): what it set went
    to the process's tree (nothing was in place yet). Those options become the cell's own
    (it goes on seeing them) and its state's, the tree gets its defaults back, and cells
    from now on hold their own."""
    config = _config()
    now = {}
    for key, option in config._registered_options.items():
        try:
            current_value = _default(key)
        except (KeyError, TypeError):
            continue
        if current_value != option.defval:
            now[key] = current_value
            root, name = _process_root(key)
            root[name] = option.defval
    install()
    if now:
        held.working[NAME] = dict(now)
    return now or value


def _process_root(key):
    path = key.split(".")
    cursor = _tree()
    for part in path[:-1]:
        cursor = dict.__getitem__(cursor, part)
    return cursor, path[-1]


def install():
    """Hold pandas' options per cell once pandas is imported; idempotent."""
    config = sys.modules.get("pandas._config.config")
    if config is None or config._get_root is _get_root:
        return
    root = _tree()
    for key, node in list(root.items()):
        if type(node) is dict:
            _held_section(root, key, node, prefix="")
    config._get_root = _get_root
    package = sys.modules.get("pandas._config")
    if package is not None and "_mode_options" in vars(package):  # pandas 1.x kept one
        package._mode_options = root["mode"]


def installed():
    config = sys.modules.get("pandas._config.config")
    return config is not None and config._get_root is _get_root
