"""Differential test: every state equals a fresh replay of the cells on its path.

Random trees of cells (aliasing, nesting, mutation, closures, ``global``,
classes) run through the kernel. The oracle replays the cells from ``initial``
to a state in one plain dict, as a single ``python`` process would; it needs no
knowledge of how states are stored. A probe cell renders every name, with
object identities numbered in first-visit order, and calls the generated
functions and methods; the kernel and the replay must print the same text.

Each seed is a reproducible tree: ``pytest -k 'replay and 17'`` reruns one.
"""

import contextlib
import difflib
import io
import random
import types
from dataclasses import dataclass
from typing import Optional

import pytest

from helpers import printed, stdout

SEEDS = range(40)
DATA_SEEDS = range(1000, 1040)  # trees that also hold numpy arrays and pandas objects
# Chains with values shared whole; the seeds past the first hundred that once failed run by
# default, the rest with the slow tests (they found parts held through other shared values).
FOUND_SEEDS = (2132, 2153, 2261, 2289, 2468, 3251)
SHARING_SEEDS = [*range(2000, 2100), *FOUND_SEEDS, *(
    pytest.param(seed, marks=pytest.mark.slow) for seed in range(2100, 3600)
    if seed not in FOUND_SEEDS)]
DATA = ("a", "b", "c", "d", "e")
FUNCTIONS = ("f", "g", "h")
CLASSES = ("K", "L")
NAMES = DATA + FUNCTIONS + ("n",) + CLASSES  # the only names the probe looks at
INTS = range(10)
FAILURE_RATE = 0.12  # share of cells made to end in an exception


# -- the probe ----------------------------------------------------------------------------

PROBE_SOURCE = '''\
def __probe():
    ids = {}
    keep = []  # every numbered object stays alive, so no id is reused while probing

    def lookup():
        values = {}
LOOKUPS        return values

    def is_value(obj):
        """Immutable constants: the compiler may or may not share them, so they get no number."""
        return obj is None or type(obj) in (bool, int, float, str) or (
            type(obj) is tuple and all(is_value(item) for item in obj))

    def render(obj):
        if is_value(obj):
            return repr(obj)
        if isinstance(obj, type) and obj.__module__ != "__main__":
            return obj.__name__
        if id(obj) in ids:
            return "@" + str(ids[id(obj)])
        ids[id(obj)] = len(ids)
        keep.append(obj)
        return "#" + str(ids[id(obj)]) + " " + body(obj)

    def joined(values):
        return ", ".join(render(value) for value in values)

    def body(obj):
        kind = type(obj)
        if kind in (list, tuple):
            return kind.__name__ + "[" + joined(obj) + "]"
        if kind is dict:
            return "{" + ", ".join(render(k) + ": " + render(v) for k, v in obj.items()) + "}"
        if isinstance(obj, type):
            attrs = [k + "=" + render(v) for k, v in vars(obj).items() if not k.startswith("__")]
            return ("class " + obj.__qualname__ + "(" + joined(obj.__bases__) + ") "
                    + ", ".join(attrs))
        if kind.__name__ == "function":
            return ("function " + obj.__qualname__
                    + " defaults=(" + joined(obj.__defaults__ or ()) + ")"
                    + " kwdefaults=" + render(obj.__kwdefaults__)
                    + " closure=(" + joined(obj.__closure__ or ()) + ")"
                    + " dict=" + render(obj.__dict__))
        if kind.__name__ == "cell":
            try:
                return "cell " + render(obj.cell_contents)
            except ValueError:
                return "empty cell"
        if kind.__name__ == "method":
            return "method " + render(obj.__func__) + " of " + render(obj.__self__)
        if kind in (staticmethod, classmethod):
            return kind.__name__ + " " + render(obj.__func__)
        if kind is property:
            return "property " + render(obj.fget)
        if kind.__name__ == "ndarray":
            base = render(obj.base) if type(obj.base).__name__ == "ndarray" else "-"
            items = list(obj.ravel()) if obj.dtype == object else obj.ravel().tolist()
            return ("ndarray " + str(obj.dtype) + " " + str(obj.shape) + " base=" + base
                    + " writeable=" + str(obj.flags.writeable) + " [" + joined(items) + "]")
        if kind.__name__ in ("DataFrame", "Series"):
            columns = obj.items() if kind.__name__ == "DataFrame" else [(obj.name, obj)]
            extra = (" columns=" + render(obj.columns)) if kind.__name__ == "DataFrame" else ""
            return (kind.__name__ + " index=" + render(obj.index) + extra
                    + " attrs=" + str(obj.attrs)
                    + " duplicates=" + str(obj.flags.allows_duplicate_labels) + " " + ", ".join(
                str(name) + ":" + str(column.dtype) + "[" + joined(column.tolist()) + "]"
                for name, column in columns))
        if kind.__module__.startswith("pandas") and kind.__name__.endswith("Index"):
            return (kind.__name__ + " " + str(obj.dtype) + " " + str(obj.tolist())
                    + " names=" + str(list(obj.names)))
        if hasattr(obj, "__dict__"):
            return "instance of " + render(kind) + " " + render(vars(obj))
        return "<" + kind.__name__ + ">"

    def call(fn):
        try:
            return render(fn())
        except Exception as exc:
            return "raises " + type(exc).__name__

    def call_twice(label, fn):
        print(label, "->", call(fn), "then", call(fn))

    def exercise(name, value):
        if type(value).__name__ in ("function", "method"):
            call_twice(name + "()", value)
        elif isinstance(value, type):
            for attr in ("make", "tally"):
                if hasattr(value, attr):
                    call_twice(name + "." + attr + "()", getattr(value, attr))
        elif type(value).__module__ == "__main__":
            for attr in ("get", "bump"):
                if hasattr(value, attr):
                    call_twice(name + "." + attr + "()", getattr(value, attr))
            if isinstance(getattr(type(value), "size", None), property):
                call_twice(name + ".size", lambda: value.size)

    def show(values):
        for name, value in values.items():
            print(name, "=", render(value))

    show(lookup())
    for name, value in lookup().items():
        exercise(name, value)
    print("-- after the calls")
    show(lookup())

__probe()
del __probe
'''


def probe_source(names):
    """The probe cell; it finds each name with try/except NameError, never via globals()."""
    lookups = "".join(f"        try:\n            values[{name!r}] = {name}\n"
                      f"        except NameError:\n            pass\n" for name in names)
    return PROBE_SOURCE.replace("LOOKUPS", lookups)


PROBE = probe_source(NAMES)


# -- the oracle ----------------------------------------------------------------------------

@dataclass
class Replay:
    namespace: dict
    stdout: str             # what the last cell printed
    error: Optional[str]    # the type name of the last cell's exception


def run_cell(code, namespace):
    """Run one cell in ``namespace``; return what it printed and its exception, if any."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, "<replay>", "exec"), namespace)
        except Exception as exc:  # the generated cell's own error, compared with the kernel's
            return out.getvalue(), exc
    return out.getvalue(), None


def replay(cells):
    """Run ``cells`` in one fresh plain namespace; every cell but the last must succeed."""
    namespace = {"__name__": "__main__"}
    printed_text, error = "", None
    for number, code in enumerate(cells, 1):
        assert error is None, f"replayed cell {number - 1} raised {error!r}"
        printed_text, error = run_cell(code, namespace)
    return Replay(namespace, printed_text, type(error).__name__ if error else None)


# -- the generator ---------------------------------------------------------------------------

def is_user_class(value):
    return isinstance(value, type) and value.__module__ == "__main__"


def is_user_instance(value):
    return (not isinstance(value, (type, types.FunctionType))
            and type(value).__module__ == "__main__")


def children(expr, value):
    """``(expression, value)`` for what ``value`` holds, as code that reaches it from ``expr``."""
    if isinstance(value, (list, tuple)):
        return [(f"{expr}[{i}]", item) for i, item in enumerate(value[:4])]
    if isinstance(value, dict):
        return [(f"{expr}[{key!r}]", item) for key, item in value.items()
                if isinstance(key, (str, int))]
    if isinstance(value, types.FunctionType):
        defaults = [(f"{expr}.__defaults__[{i}]", item)
                    for i, item in enumerate(value.__defaults__ or ())]
        defaults += [(f"{expr}.__kwdefaults__[{key!r}]", item)
                     for key, item in (value.__kwdefaults__ or {}).items()]
        cells = [(f"{expr}.__closure__[{i}].cell_contents", cell.cell_contents)
                 for i, cell in enumerate(value.__closure__ or ()) if cell_is_full(cell)]
        return defaults + cells + [(f"{expr}.{key}", item) for key, item in vars(value).items()]
    if is_user_class(value):
        return [(f"{expr}.{key}", item) for key, item in vars(value).items()
                if not key.startswith("__") and not callable(item)
                and not isinstance(item, (staticmethod, classmethod, property))]
    if is_user_instance(value) and hasattr(value, "__dict__") or is_namespace(value):
        return [(f"{expr}.{key}", item) for key, item in vars(value).items()]
    return []


def is_namespace(value):
    return type(value) is types.SimpleNamespace


def cell_is_full(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def reachable(namespace, depth=3):
    """Every ``(expression, value)`` reachable from a probed name in at most ``depth`` steps,
    through each alias, so that a mutation may go through any of them."""
    found, expanded = [], set()

    def walk(expr, value, left):
        found.append((expr, value))
        if left and id(value) not in expanded:
            expanded.add(id(value))
            for sub_expr, sub_value in children(expr, value):
                walk(sub_expr, sub_value, left - 1)

    for name in NAMES:
        if name in namespace:
            walk(name, namespace[name], depth)
    return found


def is_hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def is_mutable(value):
    return isinstance(value, (list, dict, types.FunctionType)) or is_user_class(value) or (
        is_user_instance(value) and hasattr(value, "__dict__")) or is_namespace(value)


def twins(expr, value):
    """Statements that leave ``expr`` equal to what it was (``==``) but not the same: another
    type (``1.0`` for ``1``), sign (``-0.0``), or an unshared copy of a list or dict."""
    if type(value) is int:
        return [f"{expr} = {expr} * 1.0", f"{expr} = -0.0 if {expr} == 0 else {expr} * 1.0"]
    if type(value) in (list, dict):
        return [f"{expr} = {expr}.copy()"]
    return []


class CellWriter:
    """Writes random cells that fit what a replayed namespace defines."""

    def __init__(self, rng):
        self.rng = rng
        self.templates = [
            (4, self.create), (4, self.alias), (7, self.mutate), (1, self.rebind),
            (1, self.delete), (4, self.function), (1, self.function_attribute),
            (4, self.call), (2, self.define_class), (3, self.instance),
            (1, self.top_level_global), (1, self.show),
        ]

    def cell(self, namespace):
        """A cell of one to three snippets, run on ``namespace`` as they are chosen."""
        snippets = []
        for _ in range(self.rng.randint(1, 3)):
            snippet = self.snippet(namespace)
            snippets.append(snippet)
            if run_cell(snippet, namespace)[1] is not None:
                return "\n".join(snippets)  # it raised: nothing after it would run
        if self.rng.random() < FAILURE_RATE:
            snippets.append(self.failure(namespace))
        return "\n".join(snippets)

    def snippet(self, namespace):
        weights, makers = zip(*self.templates)
        while True:
            code = self.rng.choices(makers, weights)[0](namespace)
            if code is not None:
                return code

    # -- choices ---------------------------------------------------------------------------

    def pick(self, options):
        return self.rng.choice(list(options)) if options else None

    def num(self):
        return self.rng.choice(INTS)

    def defined(self, namespace, names=NAMES, test=lambda value: True):
        return [name for name in names if name in namespace and test(namespace[name])]

    def literal(self):
        i = self.num
        return self.rng.choice([
            lambda: f"[{i()}, {i()}]",
            lambda: f"[[{i()}], [{i()}, {i()}]]",
            lambda: f"{{'k': [{i()}], 'j': {i()}}}",
            lambda: f"([{i()}], {i()})",
            lambda: f"{{'k': {{'deep': [{i()}]}}}}",
            lambda: "[]",
            lambda: "{}",
            lambda: f"'s{i()}'",
            lambda: str(i()),
        ])()

    def atom(self, namespace):
        """An expression for a new value: a literal, or one that aliases defined names."""
        name = self.pick(self.defined(namespace))
        if name is None or self.rng.random() < 0.4:
            return self.literal()
        return self.rng.choice([name, f"[{name}, {name}]", f"({name}, {self.num()})",
                                f"{{'k': {name}}}"])

    # -- templates: each returns code, or None when it does not fit ------------------------------

    def create(self, namespace):
        return f"{self.rng.choice(DATA)} = {self.literal()}"

    def alias(self, namespace):
        source = self.pick(self.defined(namespace))
        if source is None:
            return None
        x, y = self.rng.sample(DATA, 2)
        forms = [f"{x} = {source}", f"{x} = [{source}, {source}]", f"{x} = {{'k': {source}}}",
                 f"{x} = ({source}, [{source}])", f"{x} = {y} = [{source}]"]
        if isinstance(namespace[source], (list, dict)):
            forms.append(f"{x} = {source}.copy()")
        return self.rng.choice(forms)

    def mutate(self, namespace):
        targets = [(expr, value) for expr, value in reachable(namespace) if is_mutable(value)]
        if not targets:
            return None
        expr, value = self.rng.choice(targets)
        item = self.atom(namespace)
        if isinstance(value, list):
            forms = [f"{expr}.append({item})", f"{expr}.insert(0, {item})",
                     f"{expr}.extend([{self.num()}, {item}])", f"{expr} += [{self.num()}]"]
            if value:
                index = self.rng.randrange(-len(value), len(value))
                forms += [f"{expr}[{index}] = {item}", f"del {expr}[{index}]", f"{expr}.pop()",
                          *twins(f"{expr}[{index}]", value[index])]
        elif isinstance(value, dict):
            key = self.rng.choice(["'k'", "'j'", "'new'", "0"])
            forms = [f"{expr}[{key}] = {item}", f"{expr}.pop({key}, None)",
                     f"{expr}.setdefault('k', []).append({self.num()})",
                     f"{expr}.update({{'u': {item}}})"]
            key = self.pick(self.defined(namespace, test=is_hashable))
            if key is not None:
                forms.append(f"{expr}[{key}] = {item}")
            first = next(iter(value), None)
            if type(first) in (str, int):  # the same items, in another order
                forms.append(f"{expr}[{first!r}] = {expr}.pop({first!r})")
        else:
            attr = self.rng.choice(["v", "w", "count", "items", "tag", "extra"])
            forms = [f"{expr}.{attr} = {item}"]
            if attr in vars(value) and not callable(vars(value)[attr]):
                forms.append(f"del {expr}.{attr}")
        return self.rng.choice(forms)

    def rebind(self, namespace):
        name = self.pick(self.defined(namespace))
        return None if name is None else f"{name} = {self.num()}"

    def delete(self, namespace):
        name = self.pick(self.defined(namespace))
        return None if name is None else f"del {name}"

    def function(self, namespace):
        fn, other = self.rng.sample(FUNCTIONS, 2)
        x, y = self.rng.choice(DATA + ("n",)), self.rng.choice(DATA)
        box = self.pick(self.defined(namespace, DATA, lambda v: isinstance(v, list)))
        forms = [
            f"def {fn}():\n    return [{x}, {y}]",
            f"{fn} = lambda: {x}",
            (f"def _counter(start):\n    def {fn}():\n        nonlocal start\n"
             f"        start += 1\n        return start\n    return {fn}\n"
             f"{fn} = _counter({self.num()})"),
            (f"def _pair(start):\n    box = [start]\n    def push():\n"
             f"        box.append(len(box))\n        return box\n    def peek():\n"
             f"        return box\n    return push, peek\n{fn}, {other} = _pair({self.num()})"),
            f"def {fn}(item=0, acc=[]):\n    acc.append(item)\n    return acc",
            (f"def {fn}(*, acc=[{self.num()}]):\n    acc.append(len(acc))\n"
             f"    return [acc, {y}]"),
            (f"def _deco(fn):\n    def wrapper():\n        return ['wrapped', fn()]\n"
             f"    wrapper.inner = fn\n    return wrapper\n@_deco\ndef {fn}():\n"
             f"    return {x}"),
            (f"def {fn}():\n    global n\n    try:\n        n += 1\n"
             f"    except NameError:\n        n = 0\n    return n"),
            f"def {fn}():\n    global {x}\n    {x} = [{self.num()}, {y}]\n    return {x}",
        ]
        if box is not None:
            forms += [
                (f"def _capture(box):\n    def {fn}():\n        box.append(len(box))\n"
                 f"        return box\n    return {fn}\n{fn} = _capture({box})"),
                f"def {fn}(acc={box}):\n    acc.append({self.num()})\n    return [acc, {y}]",
            ]
        return self.rng.choice(forms)

    def function_attribute(self, namespace):
        fn = self.pick(self.defined(namespace, FUNCTIONS,
                                    lambda v: isinstance(v, types.FunctionType)))
        return None if fn is None else f"{fn}.memo = {self.atom(namespace)}"

    def call(self, namespace):
        x = self.rng.choice(DATA)
        fn = self.pick(self.defined(namespace, test=lambda v: isinstance(
            v, (types.FunctionType, types.MethodType))))
        obj = self.pick(self.defined(namespace, test=lambda v: is_user_instance(v)
                                     and hasattr(v, "get")))
        cls = self.pick(self.defined(namespace, test=lambda v: is_user_class(v)
                                     and hasattr(v, "make")))
        forms = []
        if fn is not None:
            forms += [f"{x} = {fn}()", f"{fn}()", f"{x} = [{fn}(), {fn}()]"]
        if obj is not None:
            forms += [f"{x} = {obj}.get()", f"{obj}.bump()", f"{x} = {obj}.bump"]
        if cls is not None:
            forms += [f"{x} = {cls}.make()", f"{x} = {cls}.tally()"]
        return self.pick(forms)

    def define_class(self, namespace):
        read = self.rng.choice(DATA)
        if "K" in namespace and is_user_class(namespace["K"]) and self.rng.random() < 0.5:
            return (f"class L(K):\n    items = []\n    def get(self):\n"
                    f"        return ['L', super().get(), {read}]\n    def bump(self):\n"
                    f"        self.v = [self.v]\n        return super().bump()")
        tag = self.atom(namespace)
        return (f"class K:\n    count = {self.num()}\n    items = [{self.num()}]\n"
                f"    tag = {tag}\n    def __init__(self, v):\n        self.v = v\n"
                f"        self.w = []\n    def get(self):\n        return [self.v, {read}]\n"
                f"    def bump(self):\n        K.count += 1\n"
                f"        self.items.append(K.count)\n        self.w.append(len(self.items))\n"
                f"        return K.count\n    @classmethod\n    def make(cls):\n"
                f"        return cls(len(cls.items))\n    @staticmethod\n    def tally():\n"
                f"        return [K.count, len(K.items)]\n    @property\n    def size(self):\n"
                f"        return [len(self.w), {read}]")

    def instance(self, namespace):
        cls = self.pick(self.defined(namespace, CLASSES, is_user_class))
        if cls is None:
            return None
        return f"{self.rng.choice(DATA)} = {cls}({self.atom(namespace)})"

    def top_level_global(self, namespace):
        x = self.rng.choice(DATA + ("n",))
        return f"global {x}\n{x} = [{self.num()}, {self.atom(namespace)}]"

    def show(self, namespace):
        names = self.defined(namespace, DATA)
        if not names:
            return None
        x, y = self.rng.sample(names, 2) if len(names) > 1 else names * 2
        return f"print({x} is {y}, type({x}).__name__)"

    def failure(self, namespace):
        missing = self.pick([name for name in NAMES if name not in namespace]) or "missing"
        return self.rng.choice(["1 / 0", missing, "[].pop()", f"raise ValueError({self.num()})",
                                f"del {missing}"])


class DataCellWriter(CellWriter):
    """Also writes cells with numpy arrays (views, object arrays and their views) and pandas
    objects (object, category, string and date columns, shared indexes, grouped results
    with a MultiIndex, and what a frame holds besides its values changed in place)."""

    def __init__(self, rng):
        super().__init__(rng)
        self.templates += [(4, self.array), (3, self.view), (5, self.array_write),
                           (3, self.frame), (4, self.frame_write), (2, self.share_index),
                           (3, self.frame_meta), (2, self.typed_column), (2, self.grouped)]

    def of_type(self, namespace, name):
        return self.defined(namespace, DATA, lambda value: type(value).__name__ == name)

    def plain_atom(self, namespace):
        """An atom that pandas stores as one object: never an array or a frame."""
        atom = self.atom(namespace)
        name = atom.split("[")[0].split("(")[0].split("{")[0]
        if name in namespace and type(namespace[name]).__module__ not in ("builtins", "__main__"):
            return self.literal()
        return atom

    def array(self, namespace):
        x, n = self.rng.choice(DATA), self.num()
        return self.rng.choice([
            f"import numpy as np\n{x} = np.arange({n}, {n + 4}) * 1.0",
            f"import numpy as np\n{x} = np.arange(6).reshape(2, 3)",
            (f"import numpy as np\n{x} = np.empty(3, dtype=object)\n{x}[0] = {self.atom(namespace)}\n"
             f"{x}[1] = {self.atom(namespace)}\n{x}[2] = {x}"),
        ])

    def view(self, namespace):
        source = self.pick([name for name in self.of_type(namespace, "ndarray")
                            if namespace[name].size > 1])
        if source is None:
            return None
        x = self.rng.choice(DATA)
        forms = [f"{x} = {source}[1:]", f"{x} = {source}[::-1]", f"{x} = {source}.T",
                 f"{x} = {source}.view()", f"{x} = {source}.reshape(-1)"]
        return self.rng.choice(forms)

    def array_write(self, namespace):
        target = self.pick(self.of_type(namespace, "ndarray"))
        if target is None or namespace[target].size == 0:
            return None
        value = namespace[target]
        if value.dtype == object:
            forms = [f"{target}.flat[0] = {self.atom(namespace)}"]
            if isinstance(value.flat[0], list):
                forms.append(f"{target}.flat[0].append({self.num()})")
            return self.rng.choice(forms)
        return self.rng.choice([f"{target}.flat[0] = {self.num()}", f"{target} += 1",
                                f"{target}.flat[-1] = -{self.num()}"])

    def frame(self, namespace):
        x, n = self.rng.choice(DATA), self.num()
        return self.rng.choice([
            (f"import pandas as pd\n{x} = pd.DataFrame({{'a': [{n}, {n + 1}], "
             f"'o': [{self.plain_atom(namespace)}, {self.plain_atom(namespace)}]}})"),
            f"import pandas as pd\n{x} = pd.Series([{self.plain_atom(namespace)}, {n}], dtype=object)",
        ])

    def frame_write(self, namespace):
        target = self.pick(self.of_type(namespace, "DataFrame"))
        if target is None:
            return None
        forms = [f"{target}.loc[0, 'a'] = {self.num()}", f"{target}['b'] = {self.num()}",
                 f"{target}.at[1, 'o'] = {self.plain_atom(namespace)}"]
        frame = namespace[target]
        if "o" in frame.columns and len(frame) and isinstance(frame["o"].iloc[0], list):
            forms.append(f"{target}['o'].iloc[0].append({self.num()})")
        return self.rng.choice(forms)

    def frame_meta(self, namespace):
        """What a frame or series holds besides its values, changed in place: a frame a
        cell only read is its stored object, so a change the store misses would be lost."""
        target = self.pick(self.of_type(namespace, "DataFrame") + self.of_type(namespace, "Series"))
        if target is None:
            return None
        n = self.num()
        forms = [f"{target}.attrs['k'] = {n}", f"{target}.index.name = 'i{n}'",
                 f"{target}.flags.allows_duplicate_labels = False"]
        if type(namespace[target]).__name__ == "DataFrame":
            forms += [f"{target}.columns.name = 'c{n}'",
                      f"{target}.columns = [str(c) + '{n}' for c in {target}.columns]"]
        else:
            forms += [f"{target}.name = 's{n}'"]
        index = namespace[target].index
        if type(index).__name__ == "MultiIndex":
            forms += [f"{target}.index.names = ['m{n}'] * {index.nlevels}"]
        return self.rng.choice(forms)

    def typed_column(self, namespace):
        """A column of categories, strings or dates, new or written."""
        target = self.pick(self.of_type(namespace, "DataFrame"))
        if target is None:
            return None
        n = self.num()
        column = self.rng.choice(["k", "s", "t"])
        return self.rng.choice([
            f"import pandas as pd\n{target}['k'] = pd.Categorical(['x', 'y'] * (len({target}) // 2) + ['x'] * (len({target}) % 2))",
            f"import pandas as pd\n{target}['s'] = pd.array([str(i + {n}) for i in range(len({target}))], dtype='string')",
            f"import pandas as pd\n{target}['t'] = pd.date_range('2020', periods=len({target}), freq='D')",
            f"{target}.loc[{target}.index[0], '{column}'] = {target}['{column}'].iloc[-1]",
        ])

    def grouped(self, namespace):
        """A grouped result (a MultiIndex, a categorical one), or the frame it came from
        indexed by two of its columns."""
        source = self.pick([name for name in self.of_type(namespace, "DataFrame")
                            if "a" in namespace[name].columns and len(namespace[name].columns) > 1])
        if source is None:
            return None
        x = self.rng.choice(DATA)
        other = self.rng.choice([c for c in namespace[source].columns if c != "a"])
        return self.rng.choice([
            f"{x} = {source}.groupby(['a', {other!r}]).size()",
            f"{x} = {source}.set_index(['a', {other!r}])",
            f"{x} = {source}.groupby({other!r}, observed=True).size()",
        ])

    def share_index(self, namespace):
        source = self.pick(self.of_type(namespace, "DataFrame") + self.of_type(namespace, "Series"))
        if source is None:
            return None
        x = self.rng.choice(DATA)
        return self.rng.choice([f"{x} = {source}.index",
                                f"import pandas as pd\n{x} = pd.Series(0, index={source}.index)"])


class SharingCellWriter(CellWriter):
    """Writes data cells with objects holding a generator (shared whole: a value that cannot
    be copied is one object in every state) and names bound to parts of values. Run as a
    chain (``check_chain``): a branch's write to a shared value is seen by its siblings, by
    design, where each branch's replay sees only its own. No functions or classes: a cell's
    function or class a shared value holds is a documented exception (a name bound to it
    gets its own copy, bound to the running state's globals)."""

    def __init__(self, rng):
        super().__init__(rng)
        self.templates = [(4, self.create), (4, self.alias), (7, self.mutate),
                          (1, self.rebind), (1, self.delete), (2, self.show),
                          (3, self.holder), (4, self.part)]

    def holder(self, namespace):
        return (f"import types\n{self.rng.choice(DATA)} = types.SimpleNamespace("
                f"gen=(i for i in range(3)), items={self.atom(namespace)})")

    def part(self, namespace):
        parts = [expr for expr, _ in reachable(namespace) if expr not in NAMES]
        return None if not parts else f"{self.rng.choice(DATA)} = {self.rng.choice(parts)}"


# -- the test --------------------------------------------------------------------------------

def listing(cells):
    return "\n".join(f"# cell {number}\n{code}" for number, code in enumerate(cells, 1))


def grow_tree(kernel, seed, writer_class=None):
    """Run a random tree of cells through ``kernel``; return each state's path of cells.

    Each cell's output and error must match a replay of its path; a failing cell
    stores no state, and the tree grows on from other states.
    """
    rng = random.Random(seed)
    writer = (writer_class or CellWriter)(rng)
    paths, latest = {"initial": []}, "initial"
    for number in range(rng.randint(12, 25)):
        parent = latest if rng.random() < 0.5 else rng.choice(list(paths))
        code = writer.cell(replay(paths[parent]).namespace)
        expected = replay(paths[parent] + [code])
        reply = kernel.execute(code, parent, new_state_name=f"s{number}")
        ename = reply["error"]["ename"] if reply["error"] else None
        context = f"seed {seed}, cell on {parent}:\n{listing(paths[parent] + [code])}"
        assert (ename, stdout(reply)) == (expected.error, expected.stdout), context
        assert (reply["state_name"] is None) == (ename is not None), context
        if reply["state_name"] is not None:
            paths[reply["state_name"]] = paths[parent] + [code]
            latest = reply["state_name"]
    return paths


def assert_same(seed, name, cells, kernel_text, replay_text):
    diff = "".join(difflib.unified_diff(replay_text.splitlines(True),
                                        kernel_text.splitlines(True), "replay", "kernel"))
    assert kernel_text == replay_text, (
        f"seed {seed}: state {name} differs from a replay of its path\n"
        f"{listing(cells)}\n# diff of the probe's output\n{diff}")


@pytest.mark.parametrize("seed", SEEDS)
def test_every_state_equals_a_replay_of_its_path(kernel, seed):
    check_tree(kernel, seed)


@pytest.mark.parametrize("seed", DATA_SEEDS)
def test_with_arrays_and_frames_every_state_equals_a_replay_of_its_path(kernel, seed):
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    check_tree(kernel, seed, DataCellWriter)


@pytest.mark.parametrize("seed", SHARING_SEEDS)
def test_with_values_shared_whole_a_chain_equals_a_replay_of_it(kernel, seed):
    check_chain(kernel, seed, SharingCellWriter)


def check_chain(kernel, seed, writer_class):
    """Run a random chain of cells, each on the last state stored, every cell's output
    checked against a replay; then probe the last state (probing an earlier one would see
    what later cells did to shared values, and the probe's calls may change them). No cell
    fails: what a failed cell wrote to a shared value stays, by design, and a replay of the
    path that made a state leaves failed cells out."""
    rng = random.Random(seed)
    writer = writer_class(rng)
    cells, latest = [], "initial"
    for number in range(rng.randint(12, 25)):
        expected = Replay({}, "", "")
        while expected.error is not None:
            code = writer.cell(replay(cells).namespace)
            expected = replay(cells + [code])
        reply = kernel.execute(code, latest, new_state_name=f"s{number}")
        ename = reply["error"]["ename"] if reply["error"] else None
        context = f"seed {seed}, cell on {latest}:\n{listing(cells + [code])}"
        assert (ename, stdout(reply)) == (None, expected.stdout), context
        cells, latest = cells + [code], reply["state_name"]
    expected = replay(cells + [PROBE])
    assert expected.error is None, f"seed {seed}: the probe raised {expected.error}"
    assert_same(seed, latest, cells, printed(kernel, PROBE, latest), expected.stdout)


def check_tree(kernel, seed, writer_class=None):
    paths = grow_tree(kernel, seed, writer_class)
    probed = {}
    for name, cells in paths.items():
        expected = replay(cells + [PROBE])
        assert expected.error is None, f"seed {seed}: the probe raised {expected.error}"
        probed[name] = printed(kernel, PROBE, name)
        assert_same(seed, name, cells, probed[name], expected.stdout)
    first = list(paths)[min(1, len(paths) - 1)]
    assert_same(seed, first, paths[first], printed(kernel, PROBE, first), probed[first])
