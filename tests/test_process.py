"""A state is the whole program: what a cell changes outside its namespace follows the state.

The oracle is a fresh ``python`` process replaying a state's lineage cell by cell on its
main thread (``replayed``). Each setting: a child sees its parent's, a sibling or the
parent never sees a branch's, and a state run twice gives the same answer.
"""

import ast
import json
import os
import random
import signal
import subprocess
import sys
import threading

import pytest

import helpers
from helpers import WAIT, ok, printed
from test_server import TOKEN, start_server  # noqa: F401

np = pytest.importorskip("numpy")
HOME = os.getcwd()  # where the tests (and so the kernels they make) start

# (what a cell changes, a probe that prints it): each kind of setting that follows a state.
SETTINGS = [
    ("import os\nos.chdir(TMP)", "import os\nprint(os.getcwd())"),
    ("import os\nos.environ['SK_PROBE'] = 'branch'",
     "import os, subprocess\nprint(os.environ.get('SK_PROBE'), subprocess.run("
     "'echo $SK_PROBE', shell=True, capture_output=True, text=True).stdout.strip())"),
    ("import sys\nsys.path.insert(0, '/sk-probe')", "import sys\nprint('/sk-probe' in sys.path)"),
    ("import random\nrandom.seed(42)", "import random\nprint(random.random())"),
    ("import numpy as np\nnp.random.seed(0)", "import numpy as np\nprint(np.random.rand())"),
    ("import numpy as np\nnp.set_printoptions(precision=2)",
     "import numpy as np\nprint(np.array([1 / 3]))"),
    ("import numpy as np\nnp.seterr(divide='ignore')",
     "import numpy as np\nprint(np.geterr()['divide'])"),
    ("import decimal\ndecimal.getcontext().prec = 4",
     "import decimal\nprint(decimal.Decimal(1) / 3)"),
    ("import warnings\nwarnings.simplefilter('error')",
     "import warnings\nprint(warnings.filters[0][0])"),
    ("import logging\nlogging.getLogger('sk.probe').setLevel(logging.ERROR)",
     "import logging\nprint(logging.getLogger('sk.probe').level)"),
    ("import logging, sys\nlogging.root.addHandler(logging.StreamHandler(sys.stdout))",
     "import logging, sys\nprint([h.stream is sys.stdout for h in logging.root.handlers "
     "if type(h) is logging.StreamHandler])"),
    ("import sys\nsys.setrecursionlimit(4321)", "import sys\nprint(sys.getrecursionlimit())"),
    ("import socket\nsocket.setdefaulttimeout(7.5)",
     "import socket\nprint(socket.getdefaulttimeout())"),
    ("import os\nos.umask(0o077)", "import os\nm = os.umask(0o022); os.umask(m); print(oct(m))"),
    ("import pandas as pd\npd.set_option('display.max_rows', 7)",
     "import pandas as pd\nprint(pd.get_option('display.max_rows'))"),
    ("import pandas as pd\npd.set_option('display.max_columns', 4)",  # read from pandas' tree
     "import pandas as pd\nprint(pd.DataFrame([list(range(6))]))\n"
     "with pd.option_context('display.precision', 3):\n    print(pd.DataFrame([1e-9]))"),
    ("import matplotlib\nmatplotlib.rcParams['lines.linewidth'] = 9.0",
     "import matplotlib\nprint(matplotlib.rcParams['lines.linewidth'])"),
    ("import matplotlib, matplotlib.style\n"
     "with matplotlib.rc_context({'lines.linewidth': 3.0}):\n"
     "    inner = matplotlib.rcParams['lines.linewidth']\nmatplotlib.style.use('ggplot')",
     "import matplotlib\nprint(matplotlib.rcParams['lines.linewidth'], "
     "matplotlib.rcParams['axes.facecolor'], dict(matplotlib.rcParams)['axes.facecolor'])"),
    ("import json\njson.dumps = lambda obj, **options: 'patched'",
     "import json\nprint(json.dumps(1))"),
    ("import fractions\nfractions.Fraction.sk_probe = 'branch'",
     "import fractions\nprint(getattr(fractions.Fraction, 'sk_probe', None))"),
    ("import fractions\nsetattr(fractions, 'SK_PROBE', 'branch')",
     "import fractions\nprint(getattr(fractions, 'SK_PROBE', None))"),
    ("from json import decoder\ndel decoder.scanstring",
     "import json.decoder\nprint(hasattr(json.decoder, 'scanstring'))"),
    ("from unittest import mock\nmock.patch('json.dumps', lambda obj, **options: 'mocked').start()",
     "import json\nprint(json.dumps(1))"),
    ("import fractions\nfrom unittest import mock\n"
     "mock.patch.object(fractions.Fraction, 'limit_denominator',\n"
     "                  lambda self, *a: 'mocked').start()",
     "import fractions\nprint(fractions.Fraction(1, 3).limit_denominator())"),
    ("import sys, types\nsys.modules['sk_probe'] = types.ModuleType('sk_probe')",
     "try:\n    import sk_probe\n    print('imported')\nexcept ImportError:\n    print('missing')"),
]
IDS = [change.split("\n")[-1][:40] for change, _ in SETTINGS]


def replayed(cells, cwd):
    """What a fresh process prints running ``cells`` in order on its main thread."""
    program = "import sys\n__ns = {'__name__': '__main__'}\nfor __c in sys.argv[1:]:\n" \
              "    exec(compile(__c, '<cell>', 'exec'), __ns)\n"
    done = subprocess.run([sys.executable, "-c", program, *cells], capture_output=True,
                          text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "SK_PROBE": "server"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """A directory for TMP, and a known SK_PROBE in the server's environment."""
    monkeypatch.setenv("SK_PROBE", "server")
    return str(tmp_path)


@pytest.mark.parametrize("change, probe", SETTINGS, ids=IDS)
def test_a_setting_follows_its_state_and_only_its_state(tmp, kernel, change, probe):
    change = change.replace("TMP", repr(tmp))
    ok(kernel, "pass", new_state_name="base")
    in_base = printed(kernel, probe, "base")
    ok(kernel, change, "base", new_state_name="branch")
    in_branch = printed(kernel, probe, "branch")
    assert printed(kernel, probe, "branch") == in_branch, "a state runs the same twice"
    ok(kernel, "x = 1", "branch", new_state_name="child")
    assert printed(kernel, probe, "child") == in_branch, "a child carries it"
    assert printed(kernel, probe, "base") == in_base, "the parent never sees it"
    assert in_branch == replayed(["pass", change, probe], HOME)


@pytest.mark.parametrize("change, probe", SETTINGS, ids=IDS)
def test_a_setting_a_cell_left_on_its_thread_reaches_no_cell_of_another_state(
        tmp, kernel, change, probe):
    """Cell threads are reused: all four cells here run on one thread (``execute_here``),
    so what the change left there is what a cell of another state would find. The gallery
    found it: scikit-learn's set_config reached cells of states that never called it."""
    change = change.replace("TMP", repr(tmp))
    replies = []

    def cells():
        replies.append(kernel.execute_here("pass", "initial", new_state_name="base"))
        replies.append(kernel.execute_here(probe, "base"))
        replies.append(kernel.execute_here(change, "base", new_state_name="branch"))
        replies.append(kernel.execute_here(probe, "base", new_state_name="after"))
    thread = threading.Thread(target=cells)
    thread.start()
    thread.join(WAIT)
    assert [reply["error"] for reply in replies] == [None] * 4
    before, after = helpers.stdout(replies[1]), helpers.stdout(replies[3])
    assert after == before  # (what "base" holds is test_a_setting_follows_its_state_...'s)
    ok(kernel, probe, "base", new_state_name="control")  # on a pooled thread
    assert printed(kernel, probe, "after") == printed(kernel, probe, "control"), \
        "nor is it stored in the new state"


LEFT_ON_A_THREAD = """
import sys, threading
from snapshot_kernel.kernel import SnapshotKernel
kernel = SnapshotKernel()
probe = "import sklearn\\nprint(sklearn.get_config()['assume_finite'])"
cells = [("pass", "initial", "base"), (probe, "base", None),
         ("import sklearn\\nsklearn.set_config(assume_finite=True)", "base", "set"),
         (probe, "base", "after"), (probe, "initial", None), (probe, "after", None)]
def run():
    for code, state, name in cells:
        reply = kernel.execute_here(code, state, new_state_name=name)
        print(repr("".join(output.get("text", "") for output in reply["output"])))
thread = threading.Thread(target=run)
thread.start()
thread.join()
"""


def test_scikit_learn_s_config_left_on_a_thread_reaches_no_cell_of_another_state():
    """The gallery found it: scikit-learn keeps its config in a threading.local, and a
    state made before it was imported got whatever the thread's last cell left there. A
    fresh process: in this one, another test may have imported scikit-learn already."""
    pytest.importorskip("sklearn")
    done = subprocess.run([sys.executable, "-c", LEFT_ON_A_THREAD], capture_output=True,
                          text=True, timeout=120, cwd=HOME)
    assert done.returncode == 0, done.stderr
    shown = [ast.literal_eval(line) for line in done.stdout.splitlines()]
    assert shown == ["", "False\n", "", "False\n", "False\n", "False\n"]


def test_random_draws_of_a_state_are_the_same_every_time_and_siblings_do_not_move_them(kernel):
    ok(kernel, "import random\nrandom.seed(7)", new_state_name="seeded")
    first = printed(kernel, "print(random.random(), random.random())", "seeded")
    ok(kernel, "[random.random() for _ in range(50)]", "seeded")  # a sibling draws
    assert printed(kernel, "print(random.random(), random.random())", "seeded") == first
    assert first == replayed(["import random\nrandom.seed(7)",
                              "print(random.random(), random.random())"], HOME)


def test_a_failed_cell_leaves_no_setting_behind(tmp, kernel):
    ok(kernel, "import os\nos.environ['SK_PROBE'] = 'kept'", new_state_name="a")
    reply = kernel.execute(f"os.chdir({tmp!r})\nos.environ['SK_PROBE'] = 'failed'\n1 / 0", "a")
    assert reply["error"]["ename"] == "ZeroDivisionError"
    assert printed(kernel, "print(os.getcwd(), os.environ['SK_PROBE'])", "a") == \
        f"{HOME} kept\n"


def test_cells_from_different_working_directories_never_mix(tmp, kernel):
    """Two cells at once from states in other directories each stay in their own."""
    ok(kernel, f"import os, time\nos.chdir({tmp!r})", new_state_name="there")
    ok(kernel, "import os, time", new_state_name="here")
    probe = "seen = set()\nfor _ in range(40):\n    seen.add(os.getcwd())\n    time.sleep(0.005)\n" \
            "print(sorted(seen))"
    replies = {}
    threads = [threading.Thread(target=lambda n=n: replies.update({n: kernel.execute(probe, n)}))
               for n in ("there", "here", "there", "here")]
    for each in threads:
        each.start()
    for each in threads:
        each.join(60)
    assert printed(kernel, "print(os.getcwd())", "there") == f"{tmp}\n"
    assert [reply["error"] for reply in replies.values()] == [None, None]
    assert replies["there"]["output"][0]["text"] == f"[{tmp!r}]\n"
    assert replies["here"]["output"][0]["text"] == f"[{HOME!r}]\n"


def test_context_variables_carry_from_cell_to_cell(kernel):
    ok(kernel, "import contextvars\nmode = contextvars.ContextVar('mode', default='off')\n"
               "mode.set('on')", new_state_name="a")
    ok(kernel, "mode.set(mode.get() + '!')", "a", new_state_name="b")
    assert printed(kernel, "print(mode.get())", "b") == "on!\n"
    assert printed(kernel, "print(mode.get())", "a") == "on\n"


def test_a_cell_defined_class_pickles_through_main(kernel):
    ok(kernel, "import pickle\nclass Point:\n    def __init__(self, x):\n        self.x = x\n"
               "def double(v):\n    return 2 * v", new_state_name="defs")
    assert printed(kernel, "print(pickle.loads(pickle.dumps(Point(3))).x, "
                           "pickle.loads(pickle.dumps(double))(4))", "defs") == "3 8\n"
    assert printed(kernel, "import __main__\nprint(__main__.Point is Point, 'double' in "
                           "vars(__main__))", "defs") == "True True\n"


@pytest.mark.parametrize("pool", [
    "import multiprocessing\nwith multiprocessing.get_context('fork').Pool(2) as p:\n"
    "    print(p.map(double, range(4)))",
    "import concurrent.futures, multiprocessing\nwith concurrent.futures.ProcessPoolExecutor("
    "2, mp_context=multiprocessing.get_context('fork')) as p:\n    print(list(p.map(double, range(4))))",
])
def test_process_pools_run_cell_defined_functions(kernel, pool):
    ok(kernel, "import warnings\nwarnings.simplefilter('ignore', DeprecationWarning)\n"
               "def double(v):\n    return 2 * v", new_state_name="defs")
    assert printed(kernel, pool, "defs") == "[0, 2, 4, 6]\n"


def test_joblib_runs_cell_defined_functions(kernel):
    pytest.importorskip("joblib")
    ok(kernel, "def double(v):\n    return 2 * v", new_state_name="defs")
    assert printed(kernel, "from joblib import Parallel, delayed\nprint(Parallel(2)("
                           "delayed(double)(i) for i in range(4)))", "defs") == "[0, 2, 4, 6]\n"


def test_top_level_await(kernel):
    reply = ok(kernel, "import asyncio\nasync def answer():\n    await asyncio.sleep(0.01)\n"
                       "    return 42\nvalue = await answer()\nawait answer() + 1",
               new_state_name="awaited")
    assert reply["output"][-1]["data"]["text/plain"] == "43"
    assert printed(kernel, "print(value)", "awaited") == "42\n"


def test_settings_survive_a_restart(tmp_path, tmp):
    from snapshot_kernel.kernel import SnapshotKernel
    state_dir = str(tmp_path / "states")
    first = SnapshotKernel(state_dir=state_dir)
    ok(first, f"import os, random, decimal\nos.chdir({tmp!r})\nrandom.seed(3)\n"
              "decimal.getcontext().prec = 3", new_state_name="set")
    probe = "print(os.getcwd(), random.random(), decimal.Decimal(1) / 7)"
    before = printed(first, probe, "set")
    printed(first, "pass", "initial")  # the process's own settings again
    restarted = SnapshotKernel(state_dir=state_dir)
    assert printed(restarted, probe, "set") == before
    assert printed(restarted, "import os\nprint(os.getcwd())", "initial") == f"{HOME}\n", \
        "initial keeps the server's settings, whatever state the first cell ran on"
    assert before == replayed([f"import os, random, decimal\nos.chdir({tmp!r})\nrandom.seed(3)\n"
                               "decimal.getcontext().prec = 3", probe], HOME)


PATCHER = "import fractions\ndef patch(value):\n    fractions.SK_PROBE = value"
PATCH_PROBE = "print(getattr(fractions, 'SK_PROBE', None))"


def test_a_patch_made_by_a_function_of_an_earlier_cell_follows_the_state_that_called_it(kernel):
    ok(kernel, PATCHER, new_state_name="defined")
    ok(kernel, "patch('a')", "defined", new_state_name="a")
    ok(kernel, "patch('b')", "defined", new_state_name="b")
    assert printed(kernel, PATCH_PROBE, "a") == replayed([PATCHER, "patch('a')", PATCH_PROBE],
                                                         HOME) == "a\n"
    assert printed(kernel, PATCH_PROBE, "b") == "b\n"
    assert printed(kernel, PATCH_PROBE, "defined") == "None\n"


@pytest.mark.parametrize("form", ["import {package}.sub as sub", "from {package} import sub",
                                  "from {package}.sub import Holder as sub"])
def test_a_module_patched_by_the_cell_that_first_imports_it_is_the_states_only(tmp, kernel,
                                                                                form):
    package = f"sk_first_{os.getpid()}_{abs(hash(tmp)) % 10 ** 8}"  # never imported before
    os.makedirs(os.path.join(tmp, package))
    with open(os.path.join(tmp, package, "__init__.py"), "w"):
        pass
    with open(os.path.join(tmp, package, "sub.py"), "w") as module:
        module.write("X = 'original'\nclass Holder:\n    X = 'original'\n")
    load = f"import sys\nsys.path.insert(0, {tmp!r})\n{form.format(package=package)}\n"
    probe = f"{load}print(sub.X, sys.modules['{package}.sub'].__loader__.get_filename())"
    ok(kernel, "pass", new_state_name="base")
    ok(kernel, f"{load}sub.X = 'patched'", "base", new_state_name="patched")
    path = os.path.join(tmp, package, "sub.py")
    assert printed(kernel, probe, "patched") == f"patched {path}\n"
    assert printed(kernel, probe, "base") == replayed([probe], HOME) == f"original {path}\n"
    assert not any(type(finder).__module__.startswith("snapshot_kernel.runtime.monkeypatches")
                   for finder in sys.meta_path), "the finder is gone once the cell is done"


def test_watched_places_are_read_from_the_module_sys_modules_holds_now():
    import types
    from snapshot_kernel.runtime import monkeypatches
    first, second = types.ModuleType("sk_replaced"), types.ModuleType("sk_replaced")
    first.X, second.X = "original", "second's"
    place = ("sk_replaced", "X")
    sys.modules["sk_replaced"] = first
    try:
        monkeypatches.watch(((("import sk_replaced",), "X"),), lambda name: None)
        assert place not in monkeypatches.read().values
        first.X = "patched"
        assert monkeypatches.read().values[place] == "patched"
        sys.modules["sk_replaced"] = second  # a cell imported it again, say
        assert monkeypatches.read().values[place] == "second's"
        del sys.modules["sk_replaced"]  # gone: nothing to compare or put back
        assert place not in monkeypatches.read().values
    finally:
        first.X = "original"
        sys.modules["sk_replaced"] = first
    assert place not in monkeypatches.read().values


SORTED_DUMPS = ("import json, functools, fractions\n"
                "json.dumps = functools.partial(json.dumps, sort_keys=True)\n"
                "fractions.SK_PROBE = 'kept'\nmark = '!'\n"
                "def shout(text):\n    return text.upper() + mark\n"
                "fractions.SK_SHOUT = shout")
DUMPS_PROBE = ("import json, fractions\nprint(json.dumps({'b': 1, 'a': 2}), "
               "getattr(fractions, 'SK_PROBE', None), getattr(fractions, 'SK_SHOUT', lambda t: None)('x'))")
RESTARTED = ("import sys\nfrom snapshot_kernel.kernel import SnapshotKernel\n"
             "kernel = SnapshotKernel(state_dir=sys.argv[1])\n"
             "for name in ('patched', 'initial'):\n"
             "    reply = kernel.execute(sys.argv[2], name)\n"
             "    print(reply['error'] or reply['output'][0]['text'], end='')\n")


def test_patches_survive_a_restart_functions_defined_in_cells_too(tmp_path):
    """A restarted server is a fresh process: what a state patched comes back from its
    saved values (a function of a cell reading the state's globals), and the other
    states see the modules as imported."""
    from snapshot_kernel.kernel import SnapshotKernel
    state_dir = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, SORTED_DUMPS, new_state_name="patched")
    assert printed(kernel, DUMPS_PROBE, "patched") == '{"a": 2, "b": 1} kept X!\n'
    printed(kernel, "pass", "initial")  # this process's modules as they were
    done = subprocess.run([sys.executable, "-c", RESTARTED, state_dir, DUMPS_PROBE],
                          capture_output=True, text=True, timeout=120, cwd=HOME)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"a": 2, "b": 1} kept X!\n{"b": 1, "a": 2} None None\n'


def test_patches_move_in_an_export_archive():
    import io
    from snapshot_kernel.kernel import SnapshotKernel
    source, target = SnapshotKernel(), SnapshotKernel()
    printed(target, "pass", "initial")  # its first cell: it reads its server's settings
    ok(source, SORTED_DUMPS, new_state_name="patched")
    writer, _ = source.export_state("patched")
    target.import_state("moved", io.BytesIO(b"".join(writer.chunks())))
    assert printed(target, DUMPS_PROBE, "moved") == '{"a": 2, "b": 1} kept X!\n'
    assert printed(target, DUMPS_PROBE, "initial") == '{"b": 1, "a": 2} None None\n'


# -- functions of cells in module attributes -------------------------------------------------

DEFINES_DUMPS = ("import json\nprefix, calls = 'a', []\n"
                 "def my_dumps(obj, **options):\n    calls.append(obj)\n    return prefix + str(obj)\n"
                 "json.dumps = my_dumps")
CALLS_DUMPS = "print(json.dumps(1), json.dumps is my_dumps, calls)"


def test_a_function_patched_in_reads_the_globals_of_the_cell_that_calls_it(kernel):
    """As in one process whose __main__ is the state: ``json.dumps`` is the state's
    ``my_dumps``, reading its ``prefix`` and appending to its ``calls``, and a branch's
    calls never reach its parent or a sibling."""
    ok(kernel, DEFINES_DUMPS, new_state_name="patched")
    ok(kernel, "prefix = 'b'", "patched", new_state_name="b")
    ok(kernel, "prefix = 'c'\njson.dumps(0)", "patched", new_state_name="c")
    lineage = [DEFINES_DUMPS, "prefix = 'b'", CALLS_DUMPS]
    assert printed(kernel, CALLS_DUMPS, "b") == replayed(lineage, HOME) == "b1 True [1]\n"
    assert printed(kernel, CALLS_DUMPS, "c") == "c1 True [0, 1]\n"
    assert printed(kernel, CALLS_DUMPS, "patched") == "a1 True [1]\n"
    assert printed(kernel, CALLS_DUMPS, "b") == "b1 True [1]\n", "a state runs the same twice"


def test_an_unnamed_function_patched_in_reads_the_calling_cells_globals(kernel):
    ok(kernel, "import json\ntag = 'a'\njson.dumps = lambda obj, **options: tag + str(obj)",
       new_state_name="patched")
    ok(kernel, "tag = 'b'", "patched", new_state_name="b")
    assert printed(kernel, "print(json.dumps(1))", "b") == replayed(
        ["import json\ntag = 'a'\njson.dumps = lambda obj, **options: tag + str(obj)",
         "tag = 'b'", "print(json.dumps(1))"], HOME) == "b1\n"
    assert printed(kernel, "print(json.dumps(1))", "patched") == "a1\n"
    assert printed(kernel, "import json\nprint(json.dumps(1))", "initial") == "1\n"


def test_a_checkpoint_keeps_the_function_a_cell_patched_in(kernel):
    ok(kernel, "import json\nfrom snapshot_kernel import checkpoint\ntag = 'a'\n"
               "json.dumps = lambda obj, **options: tag + str(obj)\ncheckpoint(name='mid')\n"
               "tag = 'end'", new_state_name="done")
    assert printed(kernel, "print(json.dumps(1))", "mid") == "a1\n"
    assert printed(kernel, "print(json.dumps(1))", "done") == "end1\n"


DEFINES_CLASSES = ("import fractions, functools\ncalls, offset = [], 0\n"
                   "class Clock:\n    def now(self):\n        calls.append(offset)\n"
                   "        return offset\n    @classmethod\n    def made(cls):\n        return cls()\n"
                   "class Frozen(Clock):\n    log = calls\n"
                   "def add(a, b):\n    return a + b + offset\n"
                   "fractions.Frozen = Frozen\nfractions.add_one = functools.partial(add, 1)")
CALLS_CLASSES = ("print(fractions.Frozen.made().now(), fractions.add_one(1), fractions.Frozen is "
                 "globals().get('Frozen'), isinstance(fractions.Frozen(), Clock), "
                 "fractions.Frozen.log is calls, calls)")


def test_a_class_and_a_partial_patched_in_are_the_states_and_read_its_globals(kernel):
    """A class a cell patches into a module is, in every later cell, that cell's class:
    the same object as its name, its instances instances of the cell's classes, its
    class attributes the cell's objects, its methods reading the cell's globals; a
    partial of a cell's function reads them too. A branch never reaches a sibling."""
    ok(kernel, DEFINES_CLASSES, new_state_name="patched")
    ok(kernel, "offset = 5", "patched", new_state_name="five")
    ok(kernel, "offset = 7\nFrozen = None", "patched", new_state_name="renamed")
    five = [DEFINES_CLASSES, "offset = 5", CALLS_CLASSES]
    assert printed(kernel, CALLS_CLASSES, "five") == replayed(five, HOME) == \
        "5 7 True True True [5]\n"
    # Its name rebound, the class is a copy over the cell's globals, its base the cell's
    # (its class attribute is a copy: docs/promises.md, Limitations).
    renamed_probe = CALLS_CLASSES.replace("fractions.Frozen.log is calls, ", "")
    renamed = [DEFINES_CLASSES, "offset = 7\nFrozen = None", renamed_probe]
    assert printed(kernel, renamed_probe, "renamed") == replayed(renamed, HOME) == \
        "7 9 False True [7]\n"
    assert printed(kernel, CALLS_CLASSES, "patched") == "0 2 True True True [0]\n"
    assert printed(kernel, CALLS_CLASSES, "five") == "5 7 True True True [5]\n", \
        "a state runs the same twice"


def test_a_partial_of_a_cell_function_survives_a_restart_and_a_class_is_left_out(tmp_path):
    """A restarted server has no cell's classes (pickle finds a class by name in
    ``__main__``): the attribute has its original value; a partial's function is saved
    by value, as a function patched in is."""
    from snapshot_kernel.kernel import SnapshotKernel
    state_dir = str(tmp_path / "states")
    kernel = SnapshotKernel(state_dir=state_dir)
    ok(kernel, DEFINES_CLASSES + "\noffset = 5", new_state_name="patched")
    probe = "import fractions\nprint(fractions.add_one(1), hasattr(fractions, 'Frozen'))\n"
    assert printed(kernel, probe, "patched") == "7 True\n"
    kernel.close()
    done = subprocess.run([sys.executable, "-c", RESTARTED.replace("'initial'", ""), state_dir,
                           probe], capture_output=True, text=True, timeout=120, cwd=HOME)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "7 False\n"


MOCKED = ("import json\nfrom unittest import mock\n"
          "p = mock.patch('json.dumps', lambda obj, **options: 'mocked')\np.start()")
MOCK_PROBE = "print(json.dumps(1), json.loads('2'), len(mock._patch._active_patches))"


def test_mock_patches_started_in_one_cell_are_stopped_in_later_ones_of_each_branch(kernel):
    """``p.stop()`` and ``mock.patch.stopall()`` in a later cell stop what the state
    started, in any order across branches, as in one process per lineage."""
    tree = {"started": ("initial", MOCKED), "stopped": ("started", "p.stop()"),
            "all": ("started", "mock.patch.stopall()"),
            "twice": ("stopped", "p.stop()\nmock.patch.stopall()"),
            "two": ("started", "q = mock.patch('json.loads', lambda text: 'q')\nq.start()"),
            "two-p": ("two", "p.stop()"), "two-all": ("two-p", "mock.patch.stopall()"),
            "again": ("started", "mock.patch.stopall()")}
    lineage = {"initial": []}
    for name, (parent, cell) in tree.items():
        ok(kernel, cell, parent, new_state_name=name)
        lineage[name] = lineage[parent] + [cell]
    expected = {"started": "mocked 2 1", "stopped": "1 2 0", "all": "1 2 0", "twice": "1 2 0",
                "two": "mocked q 2", "two-p": "1 q 1", "two-all": "1 2 0", "again": "1 2 0"}
    for name in tree:
        assert printed(kernel, MOCK_PROBE, name) == replayed(
            lineage[name] + [MOCK_PROBE], HOME) == expected[name] + "\n", name


def test_logging_configured_in_a_branch_is_the_branchs_and_survives_a_restart(
        start_server, tmp_path):
    """``logging.basicConfig`` in one branch leaves a sibling's to do its own (it does
    nothing once the root logger has a handler), and the handler comes back after a
    restart. A server process: pytest's own handlers are on this one's root logger."""
    from snapshot_kernel.client import Client
    flags = ["--state-dir", str(tmp_path / "states")]
    configure = "logging.basicConfig(level=logging.INFO, format='{}:%(message)s')\n"
    server = start_server(flags=flags)
    with Client(f"http://127.0.0.1:{server.port}", TOKEN, timeout=WAIT) as kernel:
        kernel.execute("import logging", new_state_name="base")
        for name in "ab":
            reply = kernel.execute(configure.format(name) + f"logging.info('{name}')", "base",
                                   new_state_name=name)
            assert reply["output"] == [{"output_type": "stream", "name": "stderr",
                                        "text": f"{name}:{name}\n"}], reply
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(WAIT)
    server = start_server(flags=flags)
    with Client(f"http://127.0.0.1:{server.port}", TOKEN, timeout=WAIT) as kernel:
        reply = kernel.execute("logging.info('again')", "b")
        assert reply["output"][0]["text"] == "b:again\n", reply
        reply = kernel.execute("logging.warning('w')", "base")
        assert reply["output"][0]["text"] == "WARNING:root:w\n", reply


def test_cells_on_states_holding_functions_of_cells_in_module_attributes_run_alone(kernel):
    """One module attribute holds one function for the process: two cells that each need
    theirs in it never run at once, and each reads its own globals all along."""
    ok(kernel, "import json, time\njson.dumps = lambda obj, **options: tag", new_state_name="p")
    ok(kernel, "tag = 'x'", "p", new_state_name="x")
    ok(kernel, "tag = 'y'", "p", new_state_name="y")
    probe = ("seen = set()\nfor _ in range(30):\n    seen.add(json.dumps(0))\n"
             "    time.sleep(0.005)\nprint(sorted(seen))")
    replies = {}
    threads = [threading.Thread(target=lambda n=n: replies.update({n: kernel.execute(probe, n)}))
               for n in ("x", "y")]
    for each in threads:
        each.start()
    for each in threads:
        each.join(60)
    assert [replies[n]["output"][0]["text"] for n in ("x", "y")] == ["['x']\n", "['y']\n"]


# -- differential: random trees of cells that change settings -----------------------------

CHANGES = [
    "os.chdir(DIRS[{i} % 3])",
    "os.environ['SK_PROBE'] = 'v{i}'",
    "os.environ.pop('SK_PROBE', None)",
    "sys.path.append('/sk-{i}')",
    "random.seed({i})",
    "random.random()",
    "np.random.seed({i})",
    "np.random.rand()",
    "decimal.getcontext().prec = {i} + 2",
    "np.set_printoptions(precision={i} % 5 + 1)",
    "warnings.simplefilter(['error', 'ignore', 'always'][{i} % 3], UserWarning)",
    "logging.getLogger('sk').setLevel(10 * ({i} % 5))",
    "sys.setrecursionlimit(2000 + {i})",
    "fractions.SK_PROBE = {i}",
    "sys.modules['sk_probe'] = types.SimpleNamespace(n={i})",
    "sys.modules.pop('sk_probe', None)",
    "tag = {i}",
    "def sk_fn():\n    return ('def', tag)\nfractions.SK_FN = sk_fn",
    "fractions.SK_FN = lambda: ('lambda', tag)",
    "fractions.SK_FN = functools.partial(lambda kind: (kind, tag), 'partial')",
    "class SkClass:\n    def __call__(self):\n        return ('class', tag)\n"
    "fractions.SK_CLASS = SkClass",
]
PROBE = ("print(os.getcwd(), os.environ.get('SK_PROBE'), [p for p in sys.path if p.startswith("
         "'/sk-')], random.random(), np.random.rand(), decimal.Decimal(1) / 7, "
         "np.array([1 / 3]), [f[0] for f in warnings.filters if f[2] is UserWarning][:1], logging.getLogger('sk').level, "
         "sys.getrecursionlimit(), getattr(fractions, 'SK_PROBE', None), "
         "getattr(sys.modules.get('sk_probe'), 'n', None), "
         "getattr(fractions, 'SK_FN', lambda: None)(), "
         "getattr(fractions, 'SK_FN', None) is globals().get('sk_fn'), "
         "getattr(fractions, 'SK_CLASS', lambda: lambda: None)()(), "
         "getattr(fractions, 'SK_CLASS', None) is globals().get('SkClass'))")


def _root(kernel, tmp):
    """The root state of a random tree, and ``{state: its lineage's cells}`` so far."""
    dirs = [os.path.join(tmp, f"d{i}") for i in range(3)]
    for each in dirs:
        os.makedirs(each)
    setup = (f"import os, sys, random, decimal, warnings, logging, fractions, types, functools\n"
             f"import time\nimport numpy as np\n"
             f"DIRS = {dirs!r}\nrandom.seed(1234)\nnp.random.seed(1234)\ntag = None")
    ok(kernel, setup, new_state_name="root")
    return {"root": [setup]}


@pytest.mark.parametrize("seed", range(3))
def test_every_state_equals_a_fresh_process_replaying_its_lineage(tmp, kernel, seed):
    rng = random.Random(seed)
    paths = _root(kernel, tmp)
    for i in range(10):
        parent = rng.choice(sorted(paths))
        cell = "\n".join(rng.choice(CHANGES).format(i=i) for _ in range(rng.randint(1, 3)))
        ok(kernel, cell, parent, new_state_name=f"s{i}")
        paths[f"s{i}"] = paths[parent] + [cell]
    for name in rng.sample(sorted(paths), 5):
        assert printed(kernel, PROBE, name) == replayed(paths[name] + [PROBE], HOME), \
            "\n\n".join(paths[name])


@pytest.mark.parametrize("seed", range(3))
def test_siblings_run_at_once_and_each_equals_a_fresh_process_replaying_its_lineage(
        tmp, kernel, seed):
    """The same random trees, each level's siblings made at once from several clients,
    and then every state probed at once: each answers what its lineage answers alone."""
    rng = random.Random(1000 + seed)
    paths = _root(kernel, tmp)
    made = 0
    for _ in range(4):
        parent = rng.choice(sorted(paths))
        cells = {}
        for _ in range(3):
            cells[f"s{made}"] = "time.sleep(0.02)\n" + "\n".join(
                rng.choice(CHANGES).format(i=made) for _ in range(rng.randint(1, 3)))
            made += 1
        _at_once(kernel, {name: (code, parent) for name, code in cells.items()})
        paths.update({name: paths[parent] + [code] for name, code in cells.items()})
    names = rng.sample(sorted(paths), 6)
    probes = _at_once(kernel, {name: (PROBE, name) for name in names}, store=False)
    for name in names:
        assert helpers.stdout(probes[name]) == replayed(paths[name] + [PROBE], HOME), \
            "\n\n".join(paths[name])


def _at_once(kernel, cells, store=True):
    """Run ``{name: (code, state)}`` each from a client of its own, all at once; their
    replies by name (each stored as ``name`` if ``store``)."""
    replies = {}

    def run(name, code, state):
        replies[name] = kernel.execute(code, state, new_state_name=name if store else None)

    threads = [threading.Thread(target=run, args=(name, *cell)) for name, cell in cells.items()]
    for each in threads:
        each.start()
    for each in threads:
        each.join(WAIT * 3)
    for name, reply in replies.items():
        assert reply["error"] is None, (name, "".join(reply["error"]["traceback"]))
    assert len(replies) == len(cells)
    return replies


def test_a_state_whose_working_directory_is_gone_says_so_and_others_run(tmp, kernel):
    gone = os.path.join(tmp, "gone")
    os.makedirs(gone)
    ok(kernel, f"import os\nos.chdir({gone!r})", new_state_name="there")
    ok(kernel, "pass")  # the process leaves it for initial's working directory
    os.rmdir(gone)
    reply = kernel.execute("1 + 1", "there")
    assert reply["error"]["ename"] == "SettingError"
    assert "working directory" in reply["error"]["evalue"] and gone in reply["error"]["evalue"]
    assert reply["state_name"] is None
    assert printed(kernel, "import os\nprint(os.getcwd())", "initial") == f"{HOME}\n"


def test_a_repr_that_evals_names_of_its_state_works_in_get_states(kernel):
    """The ``display`` helper of a public pandas tutorial: its repr evals names."""
    ok(kernel, "class display:\n    def __init__(self, *args):\n        self.args = args\n"
               "    def __repr__(self):\n"
               "        return '\\n'.join(a + ': ' + repr(eval(a)) for a in self.args)\n"
               "x = [1, 2]\nshown = display('x')", new_state_name="s")
    assert kernel.describe("s")["variables"]["shown"]["repr"] == "x: [1, 2]"


def test_a_repr_in_get_states_uses_the_states_print_options(kernel):
    ok(kernel, "import numpy as np\nnp.set_printoptions(precision=2)\nthird = np.array([1 / 3])",
       new_state_name="s")
    assert kernel.describe("s")["variables"]["third"]["repr"] == "array([0.33])"


# -- threading.local: one logical thread per lineage ----------------------------------------

LOCALS = ("import threading\nloc = threading.local()\nloc.seen = ['a']\n"
          "class Pool(threading.local):\n    def __init__(self):\n        self.conn = 'fresh'\n"
          "class Holder:\n    def __init__(self):\n        self.pool = Pool()\n"
          "holder = Holder()\nholder.pool.conn = 'opened'")
LOCALS_PROBE = "print(loc.seen, holder.pool.conn, type(holder.pool).__name__)"


def on_a_new_thread(kernel, code, state, **fields):
    """The reply of ``code`` run on a thread no cell ran on before (``execute_here``)."""
    replies = []
    thread = threading.Thread(target=lambda: replies.append(
        kernel.execute_here(code, state, **fields)))
    thread.start()
    thread.join(WAIT)
    return replies[0]


def test_a_thread_local_carries_along_a_lineage_whatever_thread_runs_the_cell(kernel):
    ok(kernel, LOCALS, new_state_name="made")
    expected = replayed([LOCALS, LOCALS_PROBE], HOME)
    assert expected == "['a'] opened Pool\n"
    assert helpers.stdout(on_a_new_thread(kernel, LOCALS_PROBE, "made")) == expected
    assert printed(kernel, LOCALS_PROBE, "made") == expected  # and on a pooled thread
    assert kernel.describe("made")["shared"] == {}  # copied, no longer shared by every state


def test_a_branch_s_thread_local_values_reach_neither_its_parent_nor_its_siblings(kernel):
    ok(kernel, LOCALS, new_state_name="made")
    change = "loc.seen.append('b')\nholder.pool.conn = 'closed'"
    reply = on_a_new_thread(kernel, change, "made", new_state_name="branch")
    assert reply["error"] is None, reply["error"]
    assert printed(kernel, LOCALS_PROBE, "branch") == \
        replayed([LOCALS, change, LOCALS_PROBE], HOME) == "['a', 'b'] closed Pool\n"
    assert printed(kernel, LOCALS_PROBE, "made") == "['a'] opened Pool\n"
    assert helpers.stdout(on_a_new_thread(kernel, "loc.seen.append('c')\n" + LOCALS_PROBE,
                                          "made")) == "['a', 'c'] opened Pool\n"


def test_threads_a_cell_starts_see_a_thread_local_as_python_makes_it(kernel):
    ok(kernel, LOCALS, new_state_name="made")
    probe = ("seen = []\nt = threading.Thread(target=lambda: seen.append((hasattr(loc, 'seen'), "
             "holder.pool.conn)))\nt.start(); t.join()\nprint(seen)")
    assert printed(kernel, probe, "made") == replayed([LOCALS, probe], HOME) == \
        "[(False, 'fresh')]\n"


def test_thread_locals_survive_a_restart(tmp_path):
    from snapshot_kernel.kernel import SnapshotKernel
    state_dir = str(tmp_path / "states")
    reply = ok(SnapshotKernel(state_dir=state_dir), LOCALS, new_state_name="made")
    assert "lost" not in reply
    assert printed(SnapshotKernel(state_dir=state_dir), LOCALS_PROBE, "made") == \
        "['a'] opened Pool\n"


def test_an_in_memory_sqlite_database_is_the_states_own(kernel):
    ok(kernel, "import sqlite3\ndb = sqlite3.connect(':memory:')\n"
               "db.execute('create table t (x)')\ndb.execute('insert into t values (1)')\n"
               "db.commit()", new_state_name="made")
    ok(kernel, "db.execute('insert into t values (2)')\ndb.commit()", "made",
       new_state_name="grown")
    count = "print(db.execute('select count(*) from t').fetchone()[0])"
    assert printed(kernel, count, "grown") == "2\n"
    assert printed(kernel, count, "made") == "1\n"


def test_an_sqlite_file_is_opened_again_in_children(tmp, kernel):
    ok(kernel, f"import sqlite3\nf = sqlite3.connect({tmp!r} + '/f.db')\n"
               "f.execute('create table t (x)')\nf.commit()", new_state_name="opened")
    ok(kernel, "f.execute('insert into t values (5)')\nf.commit()", "opened")
    assert printed(kernel, "print(f.execute('select * from t').fetchall())", "opened") == \
        "[(5,)]\n"


def test_a_branching_notebook_with_scikit_learn(kernel):
    pytest.importorskip("sklearn")
    setup = ("import numpy as np, sklearn\nfrom sklearn.linear_model import Ridge\n"
             "rng = np.random.RandomState(0)\nX = rng.rand(40, 3)\ny = X @ [1.0, 2.0, 3.0]\n"
             "sklearn.set_config(assume_finite=True)")
    branch = "model = Ridge(alpha={}).fit(X, y)\nnp.random.seed(1)\nnoise = np.random.rand(2)"
    probe = ("print(sklearn.get_config()['assume_finite'], model.alpha, "
             "np.round(model.coef_, 6), noise, np.random.rand())")
    ok(kernel, setup, new_state_name="data")
    for alpha in (0.1, 10.0):
        ok(kernel, branch.format(alpha), "data", new_state_name=f"alpha{alpha}")
    for alpha in (0.1, 10.0):
        seen = printed(kernel, probe, f"alpha{alpha}")
        assert seen == printed(kernel, probe, f"alpha{alpha}")
        assert seen == replayed([setup, branch.format(alpha), probe], HOME)
    assert printed(kernel, "print(sklearn.get_config()['assume_finite'])", "data") == "True\n"
    assert printed(kernel, "import sklearn\nprint(sklearn.get_config()['assume_finite'])",
                   "initial") == "False\n"


def test_a_branching_notebook_with_torch(kernel):
    pytest.importorskip("torch")
    setup = "import torch\ntorch.manual_seed(0)\nw = torch.zeros(3)"
    branch = "w += torch.rand(3) * {}\nstep = torch.rand(1)"
    probe = "print(w.tolist(), step.tolist(), torch.rand(2).tolist())"
    ok(kernel, setup, new_state_name="seeded")
    for scale in (1, 100):
        ok(kernel, branch.format(scale), "seeded", new_state_name=f"scale{scale}")
    for scale in (1, 100):
        seen = printed(kernel, probe, f"scale{scale}")
        assert seen == printed(kernel, probe, f"scale{scale}")
        assert seen == replayed([setup, branch.format(scale), probe], HOME)
    assert printed(kernel, "print(w.tolist())", "seeded") == "[0.0, 0.0, 0.0]\n"


def test_a_supervised_server_s_cells_run_process_pools_on_cell_defined_functions():
    """The server process is itself forked by the supervisor: a cell's pool forks again."""
    from test_server import TOKEN, Server, execute
    server = Server(TOKEN)
    server.wait_until_listening()
    try:
        status, reply = execute(server, "import multiprocessing\ndef double(v):\n"
                                        "    return 2 * v\nwith multiprocessing.get_context("
                                        "'fork').Pool(2) as pool:\n"
                                        "    print(pool.map(double, range(4)))")
        assert status == 200 and reply["error"] is None
        assert reply["output"][0]["text"] == "[0, 2, 4, 6]\n"
    finally:
        server.stop()


# -- memoryviews: a view of the state's own copy of its exporter --------------------------------

VIEWS = ("import array\nimport numpy as np\n"
         "buf = bytearray(b'hello world!')\nwhole = memoryview(buf)\npart = whole[2:7]\n"
         "every_other = whole[::-3]\nwords = whole.cast('I')\nfrozen = whole.toreadonly()[3:]\n"
         "nums = array.array('d', range(10))\nsome = memoryview(nums)[1::3]\n"
         "grid = np.arange(12.0).reshape(3, 4)\nrows = memoryview(grid)[1:]\n"
         "const = memoryview(b'abcdef')[1:4]")
VIEWS_PROBE = ("print(bytes(part), bytes(every_other), words.tolist(), bytes(frozen), "
               "some.tolist(), rows.tolist(), bytes(const), whole.obj is buf, "
               "some.obj is nums, rows.obj is grid, frozen.readonly)")
VIEWS_WRITE = "whole[0] = 74\npart[0] = 76\nnums[4] = -1.0\ngrid[1, 0] = 99.0"


def test_a_memoryview_follows_its_exporter_in_each_state(kernel):
    ok(kernel, VIEWS, new_state_name="made")
    assert kernel.describe("made")["shared"] == {}
    assert printed(kernel, VIEWS_PROBE, "made") == replayed([VIEWS, VIEWS_PROBE], HOME)
    ok(kernel, VIEWS_WRITE, "made", new_state_name="written")
    expected = replayed([VIEWS, VIEWS_WRITE, VIEWS_PROBE], HOME)
    assert "b'Llo w'" in expected and "-1.0" in expected  # written through the views
    assert printed(kernel, VIEWS_PROBE, "written") == expected
    # the branch wrote into its own copies: the parent's views and objects are as they were
    assert printed(kernel, VIEWS_PROBE, "made") == replayed([VIEWS, VIEWS_PROBE], HOME)
    assert printed(kernel, "print(bytes(buf), nums[4], grid[1, 0])", "made") == \
        "b'hello world!' 4.0 4.0\n"


def test_a_memoryview_that_cannot_be_laid_out_again_is_shared_and_says_why(kernel):
    ok(kernel, "import numpy as np\ngrid = np.arange(12.0).reshape(3, 4)\n"
               "gaps = memoryview(grid[:, ::2])", new_state_name="made")
    assert "memoryview" in kernel.describe("made")["shared"]["gaps"]


SUBCLASS_VIEWS = ("import numpy as np, warnings\n"
                  "warnings.simplefilter('ignore', PendingDeprecationWarning)\n"
                  "a = np.arange(6.0)\nc = np.ma.masked_where(a <= 2, a, copy=False)\nv = c[1:4]\n"
                  "z = np.matrix([[1, 2], [3, 4]])\nr = z[0]\nmask = c.mask[3:]")
SUBCLASS_WRITE = "v[2] = 55\nv[1] = np.ma.masked\nr[0, 0] = 9"
SUBCLASS_PROBE = ("print(a, c, v, z, r, mask, type(v).__name__, r.base is z, c.base is a, "
                  "np.shares_memory(v.mask, c.mask))")


# (the cells that make them, a cell writing through them, a probe): views of every kind
VIEW_KINDS = {"memoryview": (VIEWS, VIEWS_WRITE, VIEWS_PROBE),
              "numpy subclass": (SUBCLASS_VIEWS, SUBCLASS_WRITE, SUBCLASS_PROBE)}


@pytest.mark.parametrize("cells", VIEW_KINDS.values(), ids=VIEW_KINDS.keys())
def test_views_survive_a_restart_as_views(tmp_path, cells):
    from snapshot_kernel.kernel import SnapshotKernel
    made, write, probe = cells
    state_dir = str(tmp_path / "states")
    reply = ok(SnapshotKernel(state_dir=state_dir), made, new_state_name="made")
    assert "lost" not in reply
    expected = replayed([made, write, probe], HOME)
    assert expected != replayed([made, probe], HOME), "the probe sees the writes"
    assert printed(SnapshotKernel(state_dir=state_dir), f"{write}\n{probe}", "made") == expected


@pytest.mark.parametrize("cells", VIEW_KINDS.values(), ids=VIEW_KINDS.keys())
def test_views_move_in_an_export_archive_as_views(cells):
    import io
    from snapshot_kernel.kernel import SnapshotKernel
    made, write, probe = cells
    source, target = SnapshotKernel(), SnapshotKernel()
    ok(source, made, new_state_name="made")
    writer, lost = source.export_state("made")
    assert lost == {}
    target.import_state("moved", io.BytesIO(b"".join(writer.chunks())))
    assert printed(target, f"{write}\n{probe}", "moved") == replayed([made, write, probe], HOME)


FIRST_IMPORT = """
import json
from snapshot_kernel.kernel import SnapshotKernel
kernel = SnapshotKernel()
cell = '''import numpy as np, pandas as pd
pd.set_option('display.max_rows', 7)
np.random.seed(4)
first = np.random.rand()
checkpoint(name='mid')
pd.set_option('display.max_columns', 3)
second = np.random.rand()
print(pd.get_option('display.max_rows'), pd.get_option('display.max_columns'))'''
probe = "print(pd.get_option('display.max_rows'), pd.get_option('display.max_columns'), np.random.rand())"
replies = [kernel.execute(cell, 'initial', new_state_name='end')]
replies += [kernel.execute(probe, name) for name in ('mid', 'end')]
print(json.dumps([[item['text'] for item in reply['output']] for reply in replies]))
"""


def test_what_the_cell_that_first_imports_a_library_sets_stays_its_own_past_a_checkpoint():
    """pandas and numpy imported for the first time in the process by a cell that sets
    options, draws and checkpoints: the checkpoint has what was set before it, the cell
    goes on seeing it, and the state it ends with has all of it."""
    done = subprocess.run([sys.executable, "-c", FIRST_IMPORT], capture_output=True, text=True,
                          timeout=120, cwd=HOME)
    assert done.returncode == 0, done.stderr
    cell, mid, end = json.loads(done.stdout)
    oracle = replayed(["import numpy as np, pandas as pd\npd.set_option('display.max_rows', 7)\n"
                       "np.random.seed(4)\nfirst = np.random.rand()",
                       "print(pd.get_option('display.max_rows'), "
                       "pd.get_option('display.max_columns'), np.random.rand())"], HOME)
    assert cell == ["7 3\n"] and mid == [oracle]
    assert end[0].split()[:2] == ["7", "3"]
