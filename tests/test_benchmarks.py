"""Every benchmark runs to its end in its small mode: a program that prints figures must not
crash before printing them (run.py once did, on a summary line with no target). Marked
slow: CI runs them once, with the newest CPython."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# benchmark -> its arguments for a small run (settings.py is small as it is)
SMALL = {"run": ["--quick"], "bigdata": ["--quick"], "branches": ["--quick"],
         "cliffs": ["--quick", "--pause", "0.01"], "crashes": ["--quick"],
         "durable": ["--quick"],
         "memory": ["--quick"], "portable": ["--quick"], "sandbox": ["--quick"],
         "smallstates": ["--quick"], "settings": [], "stop": ["--quick"], "agentday": ["--quick"],
         "gallery": ["--quick"], "repeat": ["--quick"]}


def test_every_benchmark_is_listed():
    found = {name[:-3] for name in os.listdir(os.path.join(ROOT, "benchmarks"))
             if name.endswith(".py")
             and name not in ("harness.py", "serving.py", "forkserver.py")}  # their parts
    assert found - set(SMALL) == {"files"}  # 400 MB each way: no small mode


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_benchmark_runs_to_its_end(name):
    done = subprocess.run([sys.executable, os.path.join("benchmarks", f"{name}.py"),
                           *SMALL[name]], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert done.stdout.strip()  # its figures


def test_a_benchmark_whose_measurement_failed_exits_1_after_its_other_figures():
    """A failure a benchmark reports and goes on from still fails its run (and the test
    above): ``harness.failure`` records it, ``harness.finish`` exits 1 naming it."""
    code = ("import harness\nprint('a figure')\n"
            "print('failed:', harness.failure(harness.ServerFailed('no reply\\nlog')))\n"
            "print('another figure')\nharness.finish()")
    done = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "benchmarks"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "a figure", "failed: ServerFailed: no reply", "another figure", "",
        "1 measurement(s) failed:", "   ServerFailed: no reply", "      log"]
