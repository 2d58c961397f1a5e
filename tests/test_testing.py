"""The pytest plugin (snapshot_kernel.testing), as a user's test suite meets it: its test
files run by pytest in a process of their own (pytester), as installing the package makes
pytest load the plugin. docs/testing.md's examples are run as written."""

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


def _examples():
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)


def test_docs_testing_examples_pass_as_written(pytester):
    examples = "\n\n".join(_examples())
    pytester.makepyfile(test_examples=examples)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=examples.count("\ndef test_") + examples.startswith("def test_"))


LEAVES_NOTHING = '''
import json, os, sys, threading
import pytest

def environment():
    return {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}


BEFORE = (os.getcwd(), environment(), list(sys.path), json.dumps, threading.active_count())
CELL = ("import os, sys, json, logging\\n"
        "os.makedirs('sub', exist_ok=True)\\nos.chdir('sub')\\n"
        "os.environ['SK_LEAK'] = 'cell'\\nsys.path.insert(0, '/sk-leak')\\n"
        "json.dumps = lambda *args, **options: 'patched'\\n"
        "logging.getLogger('sk.leak').setLevel(logging.ERROR)\\n"
        "print(os.getcwd(), json.dumps(1))")


@pytest.mark.parametrize("number", range(20))
def test_a_cell_that_changes_everything(snapshot_kernel, snapshot_workdir, number):
    reply = snapshot_kernel.execute(CELL, "initial", new_state_name="changed")
    assert reply["error"] is None, reply["error"]
    assert reply["output"][0]["text"] == f"{snapshot_workdir / 'sub'} patched\\n"
    later = snapshot_kernel.execute("print(os.getcwd(), os.environ['SK_LEAK'], json.dumps(1))",
                                    "changed")
    assert later["output"][0]["text"] == f"{snapshot_workdir / 'sub'} cell patched\\n"


def test_the_process_is_as_it_was():
    import logging
    assert (os.getcwd(), environment(), list(sys.path), json.dumps) == BEFORE[:4]
    assert logging.getLogger("sk.leak").level == logging.NOTSET
    assert threading.active_count() == BEFORE[4], [t.name for t in threading.enumerate()]
'''


def test_twenty_tests_whose_cells_change_settings_leave_pytest_as_they_found_it(pytester):
    pytester.makepyfile(test_leaves=LEAVES_NOTHING)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=21)


IN_MEMORY = '''
import pytest


@pytest.mark.snapshot_kernel(in_memory=True, timeout=0.5)
def test_in_memory(snapshot_kernel):
    reply = snapshot_kernel.execute("import threading\\nlock = threading.Lock()", "initial")
    assert "lost" not in reply
    slow = snapshot_kernel.execute("while True: pass", "initial")
    assert slow["error"]["ename"] == "TimeoutError"


def test_crash_safe_by_default(snapshot_kernel):
    reply = snapshot_kernel.execute("import threading\\nlock = threading.Lock()", "initial")
    assert "lock" in reply["lost"]


@pytest.mark.snapshot_kernel(flags=["--in-memory"])
def test_a_server_with_flags(snapshot_server):
    assert snapshot_server.client.execute("1 + 1")["output"][0]["data"]["text/plain"] == "2"
    snapshot_server.stop()
    assert snapshot_server.process.returncode == 0
'''


def test_the_marker_chooses_how_the_kernel_is_made(pytester):
    pytester.makepyfile(test_marked=IN_MEMORY)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
