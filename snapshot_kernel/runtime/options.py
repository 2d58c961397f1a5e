"""pandas options held per cell.

pandas walks its option tree in ``pandas._config.config._get_root``, and reads a few
options straight from the tree in ``pandas._config``. Both are replaced: in a thread
holding a cell's settings, an option reads the cell's value (what its state and the
cell set, over the process's tree) and a write goes to the cell's own. The process's
tree keeps the registered defaults: options are registered there, whichever thread
imports the module that registers them.

A state's value is None (pandas' defaults) or ``{option: value}``, what its cells set.
"""

import sys

from .held import current

NAME = "pandas.options"


def _config():
    return sys.modules["pandas._config.config"]


def _tree():
    return vars(_config())["_global_config"]


class _Section:
    """A section of the option tree as a cell sees it (``prefix`` ends with a dot);
    ``held`` None: as the calling thread's cell sees it, if any."""

    __slots__ = ("prefix", "node", "held")

    def __init__(self, prefix, node, held):
        self.prefix, self.node, self.held = prefix, node, held

    def _held(self):
        return self.held if self.held is not None else current()

    def __getitem__(self, key):
        full = self.prefix + key
        held = self._held()
        overlay = None if held is None else held.value_of(NAME)
        if overlay is not None and full in overlay:
            return overlay[full]
        value = self.node[key]
        return _Section(full + ".", value, self.held) if type(value) is dict else value

    def __setitem__(self, key, value):
        held = self._held()
        if held is None:
            self.node[key] = value
            return
        working = held.working.get(NAME)
        if working is None:
            working = held.working[NAME] = dict(held.values.get(NAME) or {})
        working[self.prefix + key] = value

    def __contains__(self, key):
        return key in self.node

    def get(self, key, default=None):
        return self[key] if key in self.node else default

    def keys(self):
        return self.node.keys()

    def __iter__(self):
        return iter(self.node)


class _Root:
    """``pandas._config._global_config``: the process's tree, or a cell's view of it."""

    __slots__ = ()

    def __getitem__(self, key):
        value = _tree()[key]
        held = current()
        if held is None or held.value_of(NAME) is None or type(value) is not dict:
            return value
        return _Section(key + ".", value, held)

    def __contains__(self, key):
        return key in _tree()

    def keys(self):
        return _tree().keys()

    def __iter__(self):
        return iter(_tree())


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
    node = _tree()
    for part in key.split("."):
        node = node[part]
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
        cursor = cursor[part]
    return cursor, path[-1]


def install():
    """Hold pandas' options per cell once pandas is imported; idempotent."""
    config = sys.modules.get("pandas._config.config")
    package = sys.modules.get("pandas._config")
    if config is None or package is None or config._get_root is _get_root:
        return
    config._get_root = _get_root
    if "_global_config" in vars(package):
        package._global_config = _Root()
    if "_mode_options" in vars(package):  # pandas 1.x kept this section as a global
        package._mode_options = _Section("mode.", _tree()["mode"], None)


def installed():
    config = sys.modules.get("pandas._config.config")
    return config is not None and config._get_root is _get_root
