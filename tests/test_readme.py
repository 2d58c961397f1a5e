"""The README's walkthrough, run verbatim (but for the port) against a live server."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def walkthrough():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- walkthrough -->\n```bash\n(.*?)```", text, re.S)
    assert match, "README.md has no walkthrough block"
    return match.group(1)


@pytest.fixture
def server():
    env = dict(os.environ, SNAPSHOT_KERNEL_TOKEN="change-me")
    process = subprocess.Popen([sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0"],
                               env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, f"the server did not say where it listens: {line!r}"
        yield int(match.group(1))
    finally:
        process.kill()
        process.wait(10)


def test_the_walkthrough_works_verbatim(server):
    assert shutil.which("curl"), "the walkthrough needs curl on PATH"
    script = walkthrough().replace("127.0.0.1:8080", f"127.0.0.1:{server}")
    run = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert '"text/plain": "42"' in out and '"state_name": "base"' in out
    assert '"text/plain": "82"' in out and '"text/plain": "-41"' in out
    assert '"ename": "ZeroDivisionError"' in out and '"text": "partial\\n"' in out
    assert '{"states": ["initial", "base", "doubled", "negated"]}' in out
    assert '"exec_id": "nap"' in out and '{"interrupted": "nap"}' in out
    assert '"ename": "KeyboardInterrupt"' in out and '"text": "napping\\n"' in out
    assert '"ename": "TimeoutError"' in out
    assert '{"deleted": "negated"}' in out and "no state named 'negated'" in out
    assert '"status": "running", "location": "/executions/job"' in out
    assert '"status": "completed"' in out and '"state_name": "summed@3"' in out
    assert '"text/plain": "15"' in out
    assert "<stdout>\nhi\n</stdout>\n<execute_result>\n41\n</execute_result>" in out
    assert out.rstrip().endswith('{"states": ["initial"]}')
