"""Branches at once: cells on any two states run at the same time, and each reads exactly
what it reads alone, whatever settings the states hold (docs/promises.md).

Each test holds a job running on one branch (it waits on an event the test owns) while
cells run on another; a cell that had to wait for the job would never answer before the
test lets the job go, so "it answered" is "it ran beside the job".
"""

import os
import sys
import threading

import pytest

import helpers
from helpers import WAIT, in_background, ok, printed, stdout, wait_until_running
from test_process import HOME, replayed
from snapshot_kernel.runtime import rcparams

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

SETUP = ("import os, random, warnings, logging, sys, time, helpers\n"
         "import numpy as np\nimport pandas as pd\n"
         "df = pd.DataFrame({'a': np.arange(6.0)})\nrandom.seed(5)\nnp.random.seed(5)")
PROBE = ("import os, random, warnings, logging, sys\nimport numpy as np\nimport pandas as pd\n"
         "import matplotlib\n"
         "print(os.getcwd(), os.environ.get('SK_BRANCH'), [f[0] for f in warnings.filters][:1],\n"
         "      matplotlib.rcParams['lines.linewidth'],\n"
         "      '/sk-branch' in sys.path, logging.getLogger('sk').level,\n"
         "      pd.get_option('display.max_rows'), random.random(), np.random.rand(),\n"
         "      oct(os.umask(os.umask(0o022))))")

# (what a branch's cell does): the job runs on one such branch, the probe on another
CHANGES = {
    "sibling": "x = 1",
    "cwd": "os.chdir(TMP)",
    "environ": "os.environ['SK_BRANCH'] = 'job'",
    "warnings": "warnings.filterwarnings('ignore')",
    "sys.path": "sys.path.insert(0, '/sk-branch')",
    "logging": "logging.getLogger('sk').setLevel(logging.ERROR)",
    "seeds": "random.seed(1)\nnp.random.seed(1)",
    "pandas option": "pd.set_option('display.max_rows', 5)",
    "umask": "os.umask(0o077)",
    "rcParams": "import matplotlib\nmatplotlib.rcParams['lines.linewidth'] = 9.0",
    "cwd and environ": "os.chdir(TMP)\nos.environ['SK_BRANCH'] = 'job'",
}


def _job(kernel, state, signal_name):
    """Start a cell on ``state`` that draws, waits for the test's event, then prints what
    it reads; returns a function that lets it go and gives its reply."""
    code = (f"early = (random.random(), np.random.rand())\n"
            f"helpers.{signal_name}.wait({WAIT})\n" + PROBE + "\nprint(early)")
    reply = in_background(kernel, code, state, exec_id=f"job-{signal_name}")
    wait_until_running(kernel, f"job-{signal_name}")

    def finish():
        getattr(helpers, signal_name).set()
        return reply()

    return finish


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_cell_beside_a_job_on_another_branch_runs_at_once_and_reads_what_it_reads_alone(
        kernel, tmp_path, signal_name, change):
    change = change.replace("TMP", repr(str(tmp_path)))
    ok(kernel, SETUP, new_state_name="data")
    ok(kernel, change, "data", new_state_name="job-branch")
    ok(kernel, "y = 2", "data", new_state_name="probe-branch")
    finish = _job(kernel, "job-branch", signal_name)
    if "rcParams" in change and not rcparams.per_thread():  # matplotlib before 3.10
        probe = kernel.start(PROBE, "probe-branch", exec_id="probe")
        report = _when(kernel, "probe", lambda report: report["status"] == "waiting")
        assert report["waiting"]["settings"] == ["matplotlib.rcParams"]
        job = finish()
        assert probe.done.wait(WAIT)
        beside = stdout(probe.reply)
    else:
        beside = printed(kernel, PROBE, "probe-branch")  # answers while the job waits
        assert any(run["exec_id"] == f"job-{signal_name}" for run in kernel.executions())
        job = finish()
    assert job["error"] is None, job["error"]
    assert beside == printed(kernel, PROBE, "probe-branch"), "it read what it reads alone"
    alone = printed(kernel, "early = (random.random(), np.random.rand())\n" + PROBE +
                    "\nprint(early)", "job-branch")
    assert stdout(job) == alone, "the job read what it reads alone"


LIKE_SKLEARN = ("import os, warnings\n"  # what scikit-learn's import does to the process
                "os.environ.setdefault('KMP_DUPLICATE_LIB_OK', 'True')\n"
                "os.environ.setdefault('SK_LIKE_SKLEARN', 'imported')\n"
                "warnings.filterwarnings('ignore', message='sk-branch')\n")


def test_a_cell_from_before_an_import_runs_beside_a_job_after_it(
        kernel, signal_name, tmp_path, monkeypatch):
    """A library whose first import sets environment variables and warnings filters (as
    scikit-learn's does): the branch that imported it has them, its parent does not."""
    module = f"sk_like_{signal_name}"  # a module no kernel of this process imported yet
    (tmp_path / f"{module}.py").write_text(LIKE_SKLEARN)
    monkeypatch.syspath_prepend(str(tmp_path))
    imports = f"import {module}" + ("\nimport sklearn" if _importable("sklearn") else "")
    ok(kernel, "x = 1", new_state_name="before")
    ok(kernel, SETUP + "\n" + imports, new_state_name="after")
    finish = _job(kernel, "after", signal_name)
    probe = ("import os, warnings\nprint(x, sorted(k for k in os.environ if k.startswith('KMP')),"
             " os.environ.get('SK_LIKE_SKLEARN'),"
             " [f for f in warnings.filters if f[1] is not None and f[1].pattern == 'sk-branch'])")
    beside = printed(kernel, probe, "before")
    job = finish()
    assert job["error"] is None
    assert beside == printed(kernel, probe, "before") == replayed(["x = 1", probe], HOME)
    assert beside.endswith(" None []\n")
    after = printed(kernel, probe.replace("print(x, ", "print("), "after")
    assert "'KMP_DUPLICATE_LIB_OK'" in after and after.endswith(" imported [('ignore', "
                                                               "re.compile('sk-branch', re.IGNORECASE), <class 'Warning'>, None, 0)]\n")


def _importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def test_siblings_drawing_at_once_each_draw_their_states_numbers(kernel):
    """random's and numpy's global generators, and scikit-learn's random_state=None,
    are each cell's own while cells run beside each other."""
    pytest.importorskip("sklearn")
    helpers.draw_barrier = threading.Barrier(2, timeout=WAIT)
    ok(kernel, "import random, time, helpers\nimport numpy as np\n"
               "from sklearn.utils import check_random_state\nrandom.seed(3)\nnp.random.seed(3)",
       new_state_name="seeded")
    ok(kernel, "tag = 'a'", "seeded", new_state_name="a")
    ok(kernel, "tag = 'b'", "seeded", new_state_name="b")
    draws = ("helpers.draw_barrier.wait()\nseen = []\nfor i in range(20):\n"
             "    seen.append((random.random(), np.random.rand(), random.randint(0, 9),\n"
             "                 check_random_state(None).randint(1000)))\n"
             "    time.sleep(0.002)\nprint(tag, seen)")
    replies = [in_background(kernel, draws, name) for name in ("a", "b")]
    together = [stdout(reply()) for reply in replies]
    helpers.draw_barrier = threading.Barrier(1)
    assert together == [printed(kernel, draws, name) for name in ("a", "b")]
    assert together[0].split(" ", 1)[1] == together[1].split(" ", 1)[1]  # the same state's


def test_generators_drawn_beside_others_carry_on_in_the_child(kernel):
    helpers.child_barrier = threading.Barrier(2, timeout=WAIT)
    ok(kernel, "import random, helpers\nimport numpy as np\nrandom.seed(9)\nnp.random.seed(9)",
       new_state_name="seeded")
    step = "helpers.child_barrier.wait()\nfirst = (random.random(), np.random.rand())"
    replies = [in_background(kernel, step, "seeded", new_state_name=name) for name in "ab"]
    assert [reply()["error"] for reply in replies] == [None, None]
    probe = "print(first, random.random(), np.random.rand())"
    expected = replayed(["import random\nimport numpy as np\nrandom.seed(9)\nnp.random.seed(9)",
                         "first = (random.random(), np.random.rand())", probe], HOME)
    assert printed(kernel, probe, "a") == printed(kernel, probe, "b") == expected


FEED = ("import threading\n"
        "class Feed:\n"
        "    def __init__(self):\n"
        "        self.rows = {i: i for i in range(200000)}\n"
        "    def __getstate__(self):  # a loop another thread may interleave with\n"
        "        return {'rows': {k: v for k, v in self.rows.items()}}\n"
        "    def __setstate__(self, state):\n"
        "        self.rows = state['rows']\n"
        "feed, window, stop = Feed(), {i: i for i in range(200000)}, threading.Event()\n"
        "def write():\n"
        "    i = 200000\n"
        "    while not stop.is_set():\n"
        "        for rows in (feed.rows, window):\n"
        "            rows[i] = i\n"
        "            rows.pop(i - 200000, None)\n"
        "        i += 1\n"
        "threading.Thread(target=write, daemon=True).start()")


def test_values_a_thread_of_the_cell_keeps_changing_are_stored_not_refused(kernel):
    """A feed the cell's own thread keeps writing is stored: a dict as of one moment (a
    window with no gap), an object as its own copying code saw it, never refused."""
    for attempt in range(3):
        ok(kernel, FEED, new_state_name=f"fed{attempt}")
        kept = printed(kernel, "rows = sorted(window)\n"
                               "print(len(rows) in (200000, 200001), rows[-1] - rows[0] + 1 == len("
                               "rows), type(feed).__name__, len(feed.rows) > 0)", f"fed{attempt}")
        assert kept == "True True Feed True\n"
        ok(kernel, "stop.set()", f"fed{attempt}")  # the event is shared: its thread ends


# -- what cannot be held per cell: the gate, and waiting made visible ----------------------

def test_a_cell_that_must_wait_says_so_and_its_timeout_starts_when_it_runs(kernel, signal_name):
    """A function of a cell patched into a module reads one cell's globals at a time:
    cells on such a state run alone, and the one that waits is shown waiting."""
    ok(kernel, "import json, time, helpers\njson.dumps = lambda obj, **k: 'patched'",
       new_state_name="patched")
    ok(kernel, "import time, helpers", new_state_name="plain")
    job = in_background(kernel, f"helpers.{signal_name}.wait({WAIT})", "patched",
                        exec_id="long")
    wait_until_running(kernel, "long")
    waiting = kernel.start("print('ran')", "plain", exec_id="short", timeout=0.3)
    report = _when(kernel, "short", lambda report: report["status"] == "waiting")
    assert report["waiting"] == {"for": ["long"],
                                 "settings": ["module attributes: json.dumps"]}
    threading.Event().wait(0.6)  # past its timeout, had the wait counted
    assert kernel.execution("short")["status"] == "waiting"
    getattr(helpers, signal_name).set()
    assert job()["error"] is None
    assert waiting.done.wait(WAIT) and waiting.reply["error"] is None
    assert stdout(waiting.reply) == "ran\n"
    assert kernel.execution("short")["waiting"] is None
    waited = waiting.reply["waited"]
    assert (waited["for"], waited["settings"]) == (["long"], ["module attributes: json.dumps"])
    assert waited["seconds"] >= 0.6


def test_a_waiting_cell_is_stopped_by_an_interrupt(kernel, signal_name):
    ok(kernel, "import json, helpers\njson.dumps = lambda obj, **k: 'patched'",
       new_state_name="patched")
    job = in_background(kernel, f"helpers.{signal_name}.wait({WAIT})", "patched",
                        exec_id="long")
    wait_until_running(kernel, "long")
    waiting = kernel.start("print('ran')", "initial", exec_id="short")
    _when(kernel, "short", lambda report: report["status"] == "waiting")
    kernel.interrupt("short")
    assert waiting.done.wait(WAIT)
    assert waiting.reply["error"]["ename"] == "KeyboardInterrupt"
    assert waiting.reply["output"][:1] != [{"output_type": "stream", "name": "stdout",
                                            "text": "ran\n"}]
    getattr(helpers, signal_name).set()
    assert job()["error"] is None


def test_a_process_wide_change_beside_other_cells_is_named(kernel, signal_name):
    """A function of an earlier cell patches a module: the cell that calls it shows no
    patch in its code, so it runs beside others, and its output names what it changed."""
    ok(kernel, "import fractions, helpers\ndef patch():\n    fractions.SK_NAMED = 1",
       new_state_name="base")
    job = in_background(kernel, f"helpers.{signal_name}.wait({WAIT})", "base", exec_id="long")
    wait_until_running(kernel, "long")
    reply = ok(kernel, "patch()", "base", new_state_name="patched")
    getattr(helpers, signal_name).set()
    job()
    notes = [item["text"] for item in reply["output"] if item.get("name") == "stderr"]
    assert len(notes) == 1, reply["output"]
    assert "changed module attributes: fractions.SK_NAMED while other cells" in notes[0]
    assert printed(kernel, "print(getattr(fractions, 'SK_NAMED', None))", "patched") == "1\n"
    assert printed(kernel, "print(getattr(fractions, 'SK_NAMED', None))", "base") == "None\n"


def test_recursion_limits_and_socket_timeouts_are_each_cells_own(kernel):
    helpers.limits_barrier = threading.Barrier(2, timeout=WAIT)
    ok(kernel, "import sys, socket, helpers\n"
               "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)", new_state_name="base")
    ok(kernel, "sys.setrecursionlimit(6000)\nsocket.setdefaulttimeout(7.5)", "base",
       new_state_name="deep")
    probe = ("helpers.limits_barrier.wait()\n"
             "print(sys.getrecursionlimit(), socket.getdefaulttimeout(), "
             "socket.socket().gettimeout())\n"
             "try:\n    print(depth(4000))\nexcept RecursionError:\n    print('too deep')")
    replies = [in_background(kernel, probe, name) for name in ("deep", "base")]
    deep, base = (stdout(reply()) for reply in replies)
    helpers.limits_barrier = threading.Barrier(1)
    assert deep == printed(kernel, probe, "deep") == "6000 7.5 7.5\n4000\n"
    limit = sys.getrecursionlimit()
    assert base.split("\n")[0] == f"{limit} None None"
    assert printed(kernel, "print(sys.getrecursionlimit())", "base") == f"{limit}\n"


def test_a_cell_deep_in_recursion_keeps_the_limit_it_started_under_while_it_runs(kernel):
    """The interpreter's recursion limit is the highest of the running cells'. A cell that
    ended used to lower it under one still running deeper than the new limit, and when
    that cell then called deeper, CPython aborted the whole process ("Cannot recover from
    stack overflow": CI's 3.10 run died so, and 3.11 does the same)."""
    helpers.recursion_barrier = threading.Barrier(2, timeout=WAIT)
    helpers.recursion_on = threading.Event()
    ok(kernel, "import sys, helpers\nsys.setrecursionlimit(6000)", new_state_name="deep")
    ok(kernel, "import helpers\n"
               "def down(n, then):\n"
               "    if n == 0:\n"
               "        return then()\n"
               "    return 1 + down(n - 1, then)\n"
               "def wait():\n"
               "    helpers.recursion_barrier.wait()\n"
               f"    helpers.recursion_on.wait({WAIT})\n"
               "    return down(100, lambda: 0)", new_state_name="base")
    deep = in_background(kernel, "helpers.recursion_barrier.wait()", "deep", exec_id="deep")
    wait_until_running(kernel, "deep")  # the limit is 6,000 from now on
    base = in_background(kernel, "print(down(3000, wait))", "base")
    assert deep()["error"] is None  # it ended while the other is 3,000 frames down
    helpers.recursion_on.set()
    reply = base()
    assert reply["error"] is None, reply["error"]
    assert stdout(reply) == "3100\n"


def test_where_threads_cannot_own_a_directory_cells_from_others_take_turns(
        kernel, tmp_path, signal_name, monkeypatch):
    from snapshot_kernel.runtime import fs
    monkeypatch.setattr(fs, "_available", [False])
    monkeypatch.setattr(fs, "_unshare", None)
    ok(kernel, "import os, helpers", new_state_name="here")
    ok(kernel, f"os.chdir({str(tmp_path)!r})", "here", new_state_name="there")
    job = in_background(kernel, f"helpers.{signal_name}.wait({WAIT})\nprint(os.getcwd())",
                        "here", exec_id="long")
    wait_until_running(kernel, "long")
    waiting = kernel.start("print(os.getcwd())", "there", exec_id="short")
    report = _when(kernel, "short", lambda report: report["status"] == "waiting")
    assert report["waiting"]["settings"] == ["cwd"]
    getattr(helpers, signal_name).set()
    assert stdout(job()) == f"{os.path.realpath(HOME)}\n"
    assert waiting.done.wait(WAIT) and stdout(waiting.reply) == f"{tmp_path}\n"


def _when(kernel, exec_id, condition):
    """The execution's report once ``condition(report)`` holds (bounded by WAIT)."""
    deadline = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        report = kernel.execution(exec_id)
        if condition(report):
            return report
        deadline.wait(0.01)
    raise AssertionError(f"{exec_id}: {report}")


def test_a_kernel_made_without_a_workdir_runs_cells_where_its_host_is(kernel, tmp_path,
                                                                       monkeypatch):
    """An embedded kernel (a test's, the docstring corpus's) follows its host's directory:
    a state whose cells chose none runs where the process is when the cell starts."""
    ok(kernel, "import os", new_state_name="plain")
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert printed(kernel, "print(os.getcwd())", "plain") == f"{tmp_path}\n"
    ok(kernel, "os.chdir('data')", "plain", new_state_name="inside")
    assert printed(kernel, "print(os.getcwd())", "inside") == f"{tmp_path / 'data'}\n"
    assert os.getcwd() == str(tmp_path)


# -- what a cell starts: processes get its environment and directory ----------------------

CHILDREN = ("import os, subprocess\n"
            "def read(name):\n"
            "    with open(name) as f:\n"
            "        return f.read().strip()\n"
            "seen = [subprocess.run('echo $SK_CHILD; pwd', shell=True, capture_output=True,\n"
            "                       text=True).stdout.split()]\n"
            "os.system('echo $SK_CHILD > system.txt'); seen.append(read('system.txt'))\n"
            "os.spawnlp(os.P_WAIT, 'sh', 'sh', '-c', 'echo $SK_CHILD > spawn.txt')\n"
            "seen.append(read('spawn.txt'))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execlp('sh', 'sh', '-c', 'echo $SK_CHILD > exec.txt')\n"
            "os.waitpid(pid, 0); seen.append(read('exec.txt'))\n"
            "seen.append(os.popen('echo $SK_CHILD').read().strip())\n"
            "print(seen)")


def test_processes_a_cell_starts_get_its_environment_and_directory(kernel, tmp_path):
    branch = f"import os\nos.chdir({str(tmp_path)!r})\nos.environ['SK_CHILD'] = 'branch'"
    (tmp_path / "sibling").mkdir()
    ok(kernel, branch, new_state_name="branch")
    ok(kernel, f"import os\nos.chdir({str(tmp_path / 'sibling')!r})", new_state_name="sibling")
    expected = replayed([branch, CHILDREN], HOME)
    assert expected == f"[['branch', '{tmp_path}'], 'branch', 'branch', 'branch', 'branch']\n"
    assert printed(kernel, CHILDREN, "branch") == expected
    assert printed(kernel, CHILDREN, "sibling") == \
        f"[['{tmp_path / 'sibling'}'], '', '', '', '']\n"
    assert os.environ.get("SK_CHILD") is None, "the server's environment is its own"


def test_shell_commands_of_a_cell_get_its_environment(kernel, tmp_path):
    ok(kernel, f"import os\nos.chdir({str(tmp_path)!r})\nos.environ['SK_CHILD'] = 'branch'",
       new_state_name="branch")
    assert printed(kernel, "!echo $SK_CHILD; pwd", "branch") == f"branch\n{tmp_path}\n"


# -- over HTTP --------------------------------------------------------------------------------

def test_a_job_that_waits_says_so_over_http(snapshot_server):
    """An agent starts a job without waiting behind a cell that sets a module attribute: the
    202 and the record say waiting, for whom and why, and its reply says how long."""
    client = snapshot_server.client
    client.execute("import json, time", new_state_name="base")
    patching = client.execute("json.dumps = lambda obj, **k: 'patched'\ntime.sleep(1.5)",
                              "base", exec_id="patching", wait=False)
    assert patching["status"] == "running"
    _until(lambda: client.execution("patching")["status"] == "running")
    started = client.execute("print('ran')", "base", exec_id="after", wait=False)
    assert started["status"] == "waiting"
    record = client.execution("after")
    assert record["status"] == "waiting" and record["waiting"]["for"] == ["patching"]
    assert record["waiting"]["settings"] == [
        "module attributes: json.dumps (a cell that sets them runs alone)"]
    reply = client.execution("after", wait=10)["reply"]
    assert reply["output"] == [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
    assert reply["waited"]["for"] == ["patching"] and reply["waited"]["seconds"] > 0.5
    client.execute("json.dumps = lambda obj, **k: 'again'\ntime.sleep(1.5)", "base",
                   exec_id="patching again", wait=False)
    _until(lambda: client.execution("patching again")["status"] == "running")
    text = client.execute("print('ran')", "base", new_state_name="text", format="text")
    assert text.startswith("ran\n\n[new state 'text' (from 'base'); waited ")
    assert "for 'patching again': module attributes: json.dumps" in text


def _until(condition):
    for _ in range(int(WAIT / 0.02)):
        if condition():
            return
        threading.Event().wait(0.02)
    raise AssertionError("the condition did not hold in time")
