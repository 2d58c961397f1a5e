"""The examples of docs/files.md and docs/client.md, run verbatim (but for the port) against
a live server."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_server import Server

DOCS = Path(__file__).resolve().parent.parent / "docs"
TOKEN = "change-me"


def example(document, marker, language):
    text = (DOCS / document).read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker} -->\n```{language}\n(.*?)```", text, re.S)
    assert match, f"{document} has no {marker} block"
    return match.group(1)


@pytest.fixture
def server(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    running = Server(TOKEN, ["--workdir", str(work)])
    running.wait_until_listening()
    yield running
    running.stop()


def run(server, tmp_path, command, script):
    here = tmp_path / "client"
    here.mkdir()
    return subprocess.run(command + [script.replace("127.0.0.1:8080",
                                                    f"127.0.0.1:{server.port}")],
                          capture_output=True, text=True, timeout=60, cwd=here,
                          env={**os.environ, "SNAPSHOT_KERNEL_TOKEN": TOKEN})


def test_the_files_walkthrough_works_verbatim(server, tmp_path):
    assert shutil.which("curl"), "the walkthrough needs curl on PATH"
    done = run(server, tmp_path, ["bash", "-e", "-c"],
               example("files.md", "files walkthrough", "bash"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '{"name": "inputs/data.csv", "size": 12}'
    assert lines[1] == "6"
    assert '"name": "inputs", "size": 0' in lines[2] and '"name": "total.txt"' in lines[2]
    assert '"name": "data.csv", "size": 12' in lines[3]
    assert lines[4:6] == ['{"deleted": "inputs/data.csv"}', '{"deleted": "inputs"}']
    assert lines[6] == ('{"error": "\'../etc/passwd\' holds \'..\'; paths stay inside the '
                        'server\'s working directory"}')


def test_the_client_example_works_verbatim(server, tmp_path):
    done = run(server, tmp_path, [sys.executable, "-c"],
               example("client.md", "client example", "python"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no state named 'nope'; GET /states lists them\n"


def test_the_async_client_example_works_verbatim(server, tmp_path):
    done = run(server, tmp_path, [sys.executable, "-c"],
               example("client.md", "async client example", "python"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("['6.28', '12.57', '25.13']\n5 b'hello'\nUnreachable True\n")


def test_the_flags_table_lists_every_flag_the_server_takes():
    """docs/server.md's table is where users look a flag up: none may be missing from it."""
    shown = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--help"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", shown)) - {"--help"}
    table = (DOCS / "server.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(--[a-z][a-z-]+)", table, re.M))
    assert "--max-cell-memory" in flags and "--in-memory" in flags
    assert flags - listed == set()
