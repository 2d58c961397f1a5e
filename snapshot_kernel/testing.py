"""A pytest plugin: fixtures for the three ways a test suite uses the server.

Installing snapshot-kernel registers it (the ``pytest11`` entry point); docs/testing.md
shows each fixture.

- ``snapshot_kernel``: a ``SnapshotKernel`` in this process;
- ``snapshot_app``: its WSGI app under WebTest, the token set (needs ``webtest``);
- ``snapshot_server``: a real server on a free port (``.url``, ``.token``, ``.client``).

Each test's cells run in a temporary workdir of its own, and its states are kept as the
server README starts keeps them (a private state directory: crash-safe, so a reply's
``lost`` is what the server would report), unless the test asks for them in memory:
``@pytest.mark.snapshot_kernel(in_memory=True)``; the marker's other keywords go to
``SnapshotKernel``. A kernel leaves nothing behind: at the end of the test its threads end
and the process-wide settings its cells changed (a module attribute) are put back.
"""

import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import threading

import pytest

TOKEN_VARIABLE = "SNAPSHOT_KERNEL_TOKEN"
START_TIMEOUT = 60.0  # seconds a server may take to say where it listens
_LISTENING = re.compile(r"listening on (http://\S+)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "snapshot_kernel(in_memory=False, **options): how the snapshot_kernel, "
        "snapshot_app and snapshot_server fixtures make their kernel (options: "
        "SnapshotKernel's keywords, or the server's flags for snapshot_server)")


def _options(request):
    marker = request.node.get_closest_marker("snapshot_kernel")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def snapshot_workdir(tmp_path):
    """The directory the test's cells run in (and its app serves under /files)."""
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    return workdir


@pytest.fixture
def snapshot_kernel(request, tmp_path, snapshot_workdir):
    """A SnapshotKernel in this process, its cells in ``snapshot_workdir``."""
    from .kernel import SnapshotKernel
    from .runtime import settings
    options = _options(request)
    if not options.pop("in_memory", False):
        options.setdefault("state_dir", str(tmp_path / "states"))
        options.setdefault("private_dir", True)
    before = settings.process_values()
    kernel = SnapshotKernel(workdir=str(snapshot_workdir), **options)
    try:
        yield kernel
    finally:
        kernel.shutdown()
        settings.put_back(before)


@pytest.fixture
def snapshot_token():
    """The token the ``snapshot_app`` and ``snapshot_server`` fixtures expect."""
    return f"test-{secrets.token_hex(8)}"


@pytest.fixture
def snapshot_app(snapshot_kernel, snapshot_token):
    """``webtest.TestApp`` over the kernel's app, presenting the token as a Bearer."""
    webtest = pytest.importorskip("webtest", reason="snapshot_app needs WebTest: "
                                  "pip install webtest")
    from .main import create_app
    app = webtest.TestApp(create_app(snapshot_kernel, snapshot_token))
    app.authorization = ("Bearer", snapshot_token)
    return app


class Server:
    """A real server (``python -m snapshot_kernel.main``) on a free loopback port: ``url``,
    ``token``, ``client`` (a ``Client`` for it), ``workdir``, and ``stderr``, the lines
    it has written so far."""

    def __init__(self, workdir, tmpdir, token, flags):
        self.workdir, self.token, self.stderr = workdir, token, []
        environment = {**os.environ, TOKEN_VARIABLE: token, "TMPDIR": str(tmpdir)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0",
             "--workdir", str(workdir), *flags], env=environment, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.url = self._listening()
        from .client import Client
        self.client = Client(self.url, token)

    def _read_stderr(self):
        for line in self.process.stderr:
            self.stderr.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _listening(self):
        while True:
            try:
                line = self._lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise RuntimeError("the server did not start:\n" + "".join(self.stderr))
            found = _LISTENING.search(line)
            if found:
                return found.group(1)

    def stop(self):
        """SIGTERM, as a deploy stops it; SIGKILL if it has not ended 10 s later."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


@pytest.fixture
def snapshot_server(request, tmp_path, snapshot_workdir, snapshot_token):
    """A real server for the test, stopped at its end (flags: the marker's ``flags``)."""
    options = _options(request)
    flags = list(options.get("flags", ()))
    if options.get("in_memory"):
        flags.append("--in-memory")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    server = Server(snapshot_workdir, tmpdir, snapshot_token, flags)
    try:
        yield server
    finally:
        server.stop()
