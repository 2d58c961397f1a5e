"""The sandbox, against real servers: every escape of issue 30 (and others of the same
kinds) refused by a server started as README starts it, directly, in a subprocess and
through a shell; the same escapes succeed with --no-sandbox, so each check can fail; and
the work cells need (the workdir, temporary files, numpy and matplotlib, subprocesses,
the crash-safe store, %pip) still works.

The servers get a fake HOME holding a secret, a workdir beside it, and the loopback
listeners the escapes aim at. Where this kernel has no Landlock the confined tests skip,
saying so, unless $SNAPSHOT_KERNEL_CI is set (.ci/run sets it): there they fail.
"""

import http.client
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from snapshot_kernel import cli
from test_crashes import _state, server_process_of
from test_server import SERVER_TMPDIR, TIMEOUT, TOKEN, Server, call, server_env

SECRET = "the-secret-in-home-7f3a"
MARKER = "SNAPSHOT_KERNEL_SUPERVISOR_MARKER"
CI_ENV = "SNAPSHOT_KERNEL_CI"
PRELUDE = "import os, shutil, signal, socket, sys, time\nunique = f'{os.getpid()}-{time.time_ns()}'\n"

# What each escape tries; ``{home}`` and the like are filled in per server (``Places``).
ESCAPES = {
    "writing in home": "open({home!r} + '/written-' + unique, 'w').write('x')",
    "writing in /etc": "open({etc!r} + unique, 'w').write('x')\nos.remove({etc!r} + unique)",
    "writing beside the workdir": "open({beside!r} + unique, 'w').write('x')",
    "deleting a directory outside": "shutil.rmtree({victim!r})\nos.mkdir({victim!r})",
    "reading a secret in home": "print(open({home!r} + '/secret').read())",
    "reading it through a symlink": "os.symlink({home!r} + '/secret', 'link-' + unique)\n"
                                    "print(open('link-' + unique).read())",
    "reading it through a hard link": "os.link({home!r} + '/secret', 'hard-' + unique)\n"
                                      "print(open('hard-' + unique).read())",
    "connecting to a listener on loopback":
        "socket.create_connection(('127.0.0.1', {tcp}), timeout=5).sendall(b'in')",
    "listening on a port": "s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()",
    "stopping and continuing the supervisor":
        "os.kill({supervisor}, signal.SIGSTOP)\nos.kill({supervisor}, signal.SIGCONT)",
    "reading the supervisor's environment":
        "print(open('/proc/{supervisor}/environ', 'rb').read())",
    # Others of the same kinds.
    "listening without a bind": "s = socket.socket()\ns.listen()",
    "sending UDP to loopback":
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'in', ('127.0.0.1', {udp}))",
    "connecting to a Unix socket": "s = socket.socket(socket.AF_UNIX)\ns.connect({unix!r})",
    "renaming a file out of the workdir": "open('moved-' + unique, 'w').close()\n"
                                          "os.rename('moved-' + unique, {home!r} + '/m' + unique)",
    "signalling another process of the user": "os.kill({outsider}, 0)",
    "reading the environment of another process": "open('/proc/{outsider}/environ').read()",
}
SHELL_ESCAPES = {
    # ($$$$ is the shell's $$: a cell's ! line makes $$ a $)
    "writing in home through a shell": "!echo x > {home}/shell-$$$$ && echo ESCAPED",
    "writing in /etc through a shell": "!echo x > {etc}$$$$ && rm {etc}$$$$ && echo ESCAPED",
    "reading a secret through a shell": "!cat {home}/secret && echo ESCAPED",
    "deleting through a shell": "!rm -r {victim} && mkdir {victim} && echo ESCAPED",
}


class Places:
    """A fake home with a secret and a directory to delete, a workdir, and listeners."""

    def __init__(self, base):
        self.base = base
        self.home, self.work = base / "home", base / "work"
        for directory in (self.home, self.work, self.home / "victim"):
            directory.mkdir()
        (self.home / "secret").write_text(SECRET)
        (self.home / "victim" / "file").write_text("keep me")
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(base / "unix.sock"))
        self.unix.listen()
        for sock in (self.tcp, self.udp, self.unix):
            sock.setblocking(False)

    def fields(self, supervisor):
        return {"home": str(self.home), "etc": "/etc/snapshot-kernel-escape-",
                "beside": str(self.base / "beside-"), "victim": str(self.home / "victim"),
                "tcp": self.tcp.getsockname()[1], "udp": self.udp.getsockname()[1],
                "unix": str(self.base / "unix.sock"), "supervisor": supervisor,
                "outsider": os.getpid()}

    def reached(self):
        """Whether anything reached the listeners since the last call (and drain it)."""
        reached = False
        for sock in (self.tcp, self.unix):
            try:
                sock.accept()[0].close()
                reached = True
            except BlockingIOError:
                pass
        try:
            self.udp.recv(16)
            reached = True
        except BlockingIOError:
            pass
        return reached

    def close(self):
        for sock in (self.tcp, self.udp, self.unix):
            sock.close()


class Running:
    """A server started on ``Places``, as a user starts it, with ``flags``."""

    def __init__(self, places, flags=()):
        self.places = places
        self.server = Server(TOKEN, flags, cwd=places.work,
                             env={"HOME": str(places.home), MARKER: "supervisor"})
        self.server.wait_until_listening()
        self.fields = places.fields(self.server.process.pid)
        self.said = []

    def execute(self, code, **fields):
        status, reply = call(self.server.connect(), "POST", "/execute",
                             {"code": code, "state_name": "initial", **fields})
        assert status == 200, reply
        return reply

    def document(self):
        status, document = call(self.server.connect(), "GET", "/openapi.json")
        assert status == 200
        return document

    def stderr(self):
        """The lines the server wrote on stderr so far."""
        lines = []
        while not self.server.lines.empty():
            line = self.server.lines.get()
            if line is not None:
                lines.append(line)
        self.said.extend(lines)
        return self.said

    def stop(self):
        self.server.stop()


def stdout(reply, name="stdout"):
    return "".join(item["text"] for item in reply["output"]
                   if item["output_type"] == "stream" and item["name"] == name)


@pytest.fixture(scope="module")
def confined(tmp_path_factory):
    running = Running(Places(tmp_path_factory.mktemp("confined")))
    report = running.document()["info"].get("x-sandbox", {})
    if "files" not in report.get("confined", {}):
        running.stop()
        why = report.get("not_confined", {}).get("files", "no report")
        if os.environ.get(CI_ENV):
            pytest.fail(f"this CI machine's server did not confine files: {why}")
        pytest.skip(f"this kernel cannot confine files: {why}")
    yield running
    running.stop()
    running.places.close()


@pytest.fixture(scope="module")
def unconfined(tmp_path_factory):
    running = Running(Places(tmp_path_factory.mktemp("unconfined")), ["--no-sandbox"])
    yield running
    running.stop()
    running.places.close()


def escape_code(name, fields):
    return PRELUDE + ESCAPES[name].format(**fields) + "\nprint('ESCAPED')"


def in_subprocess(code):
    """A cell that runs ``code`` in a new Python process and passes its outputs on."""
    return ("import subprocess, sys\n"
            f"done = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, "
            "text=True, timeout=30)\n"
            "print(done.stdout)\nprint(done.stderr, file=sys.stderr)")


def assert_escape_refused(confined, name, reply):
    error = reply["error"]
    assert "ESCAPED" not in stdout(reply) and SECRET not in json.dumps(reply), name
    assert error is not None and error["ename"] in ("PermissionError", "OSError"), error
    assert "refused by the server's sandbox" in error["evalue"], error["evalue"]
    assert "--no-sandbox" in error["evalue"] or "--allow-network" in error["evalue"]
    assert error["traceback"][-1] == f"{error['ename']}: {error['evalue']}\n"
    assert not confined.places.reached(), f"{name}: a listener was reached"


@pytest.mark.parametrize("name", ESCAPES)
def test_each_escape_is_refused_with_a_note_naming_the_sandbox(confined, name):
    reply = confined.execute(escape_code(name, confined.fields))
    assert_escape_refused(confined, name, reply)


@pytest.mark.parametrize("name", ESCAPES)
def test_each_escape_is_refused_in_a_subprocess_too(confined, name):
    reply = confined.execute(in_subprocess(escape_code(name, confined.fields)))
    assert reply["error"] is None, reply["error"]
    assert "ESCAPED" not in stdout(reply) and SECRET not in stdout(reply)
    assert "PermissionError" in stdout(reply, "stderr") or "OSError" in stdout(reply, "stderr")
    assert not confined.places.reached(), f"{name}: a listener was reached"


@pytest.mark.parametrize("name", SHELL_ESCAPES)
def test_each_escape_through_a_shell_is_refused_and_the_note_says_why(confined, name):
    reply = confined.execute(SHELL_ESCAPES[name].format(**confined.fields))
    said = stdout(reply) + stdout(reply, "stderr")
    assert "ESCAPED" not in said and SECRET not in said
    assert "Permission denied" in said
    assert "if the server's sandbox refused the command" in stdout(reply, "stderr")


def test_nothing_an_escape_aimed_at_changed(confined):
    """Run after the escapes (pytest keeps the file's order): what they aimed at is as it was."""
    home = confined.places.home
    assert sorted(os.listdir(home)) == ["secret", "victim"]
    assert (home / "victim" / "file").read_text() == "keep me"
    assert not [name for name in os.listdir(confined.places.base) if name.startswith("beside")]
    assert not [name for name in os.listdir("/etc") if name.startswith("snapshot-kernel-esc")]
    assert _process_state(confined.server.process.pid) in ("S", "R")


@pytest.mark.parametrize("name", ESCAPES)
def test_without_the_sandbox_each_escape_succeeds(unconfined, name):
    """The baseline of issue 30 (13 of 13): the checks above are not vacuous."""
    reply = unconfined.execute(escape_code(name, unconfined.fields))
    assert reply["error"] is None, reply["error"]
    assert "ESCAPED" in stdout(reply)
    if name.startswith("reading a") or name.startswith("reading it"):
        assert SECRET in stdout(reply)
    if name == "reading the supervisor's environment":
        assert MARKER in stdout(reply)
    unconfined.places.reached()


@pytest.mark.parametrize("name", SHELL_ESCAPES)
def test_without_the_sandbox_each_shell_escape_succeeds(unconfined, name):
    reply = unconfined.execute(SHELL_ESCAPES[name].format(**unconfined.fields))
    assert "ESCAPED" in stdout(reply), reply


def _process_state(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


# -- what the server says ------------------------------------------------------------------

PARTS = ("files", "outgoing connections", "listening sockets", "Unix sockets", "signals",
         "other processes", "privileges")


def test_the_server_says_at_start_what_it_confines_after_where_it_listens(confined):
    said = confined.stderr()  # what came after the line where it listens (read already)
    for part in PARTS:
        assert any(line.startswith(f"snapshot-kernel: sandbox: {part} confined: ")
                   for line in said), (part, said)
    assert not [line for line in said if "NOT confined" in line], said
    files = next(line for line in said if "sandbox: files confined" in line)
    assert str(confined.places.work) in files and "Landlock ABI" in files


def test_openapi_says_what_is_and_is_not_confined(confined, unconfined):
    info = confined.document()["info"]
    assert "Sandbox: code runs confined." in info["description"]
    report = info["x-sandbox"]
    assert report["enabled"] is True and report["network"] == "closed"
    assert set(PARTS) <= set(report["confined"]) and report["not_confined"] == {}
    assert str(confined.places.work) in report["writable"]
    off = unconfined.document()["info"]
    assert "the sandbox is off (--no-sandbox)" in off["description"]
    assert off["x-sandbox"]["enabled"] is False
    assert any(line.startswith("snapshot-kernel: the sandbox is off (--no-sandbox): cells run "
                               "with this process's rights") for line in unconfined.stderr())


@pytest.mark.parametrize("flags, message", [
    (["--no-sandbox", "--allow-network"], "--no-sandbox has no sandbox: drop one of them"),
])
def test_contradictory_sandbox_flags_are_refused_before_anything_starts(flags, message):
    done = subprocess.run([sys.executable, "-m", "snapshot_kernel.main", "--bind",
                           "127.0.0.1:0", *flags], env=server_env(TOKEN), capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_server_whose_own_code_lies_in_its_workdir_keeps_it_read_only(tmp_path):
    """Started from the checkout (as the tests' installs are, and README's virtualenv), the
    workdir holds the package: a mount namespace keeps it read-only, and the server says so."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    server = Server(TOKEN, [], cwd=checkout, env={"HOME": str(tmp_path)})
    try:
        server.wait_until_listening()
        said = _lines_until(server, "sandbox: the server's own code")
        assert any("sandbox: the server's own code confined: read-only where cells write: "
                   in line and os.path.join(checkout, "snapshot_kernel") in line
                   for line in said), said
        status, reply = call(server.connect(), "POST", "/execute", {
            "code": "open('snapshot_kernel/sandbox/escape.py', 'w')", "state_name": "initial"})
        assert reply["error"]["ename"] == "OSError", reply
        assert "Read-only file system" in reply["error"]["evalue"]
        assert "the server's own code stays read-only" in reply["error"]["evalue"]
        assert not os.path.exists(os.path.join(checkout, "snapshot_kernel/sandbox/escape.py"))
    finally:
        server.stop()


def _lines_until(server, *markers):
    """The server's stderr lines up to those holding ``markers``, one after the other,
    and what came a little after."""
    lines, deadline, waiting = [], time.monotonic() + TIMEOUT, list(markers)
    while waiting:
        line = server.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        assert line is not None, f"the server ended before saying {waiting}: {lines}"
        lines.append(line)
        if waiting[0] in line:
            waiting.pop(0)
    time.sleep(0.2)
    while not server.lines.empty():
        line = server.lines.get()
        lines += [line] if line is not None else []
    return lines


DEGRADED = {  # what a kernel lacks (patched into the server) -> what the server must say
    "no Landlock": ("from snapshot_kernel.sandbox import landlock\n"
                    "landlock.abi = lambda: (0, 'this kernel has no Landlock (a test)')",
                    ["files NOT confined: this kernel has no Landlock (a test)",
                     "signals NOT confined", "outgoing connections confined: cells open none "
                     "(seccomp)"]),
    "no seccomp": ("from snapshot_kernel.sandbox import seccomp\nseccomp.machine = lambda: None",
                   ["outgoing connections NOT confined: TCP is refused (Landlock ABI",
                    "Unix sockets NOT confined: no seccomp filter for this machine",
                    "listening sockets NOT confined", "files confined"]),
}


@pytest.mark.parametrize("lacking", DEGRADED)
def test_a_server_that_cannot_confine_a_part_says_so_and_confines_the_rest(tmp_path, lacking):
    patch, expected = DEGRADED[lacking]
    places = Places(tmp_path)
    site = tmp_path / "site"  # sitecustomize runs in the server's processes before main
    site.mkdir()
    (site / "sitecustomize.py").write_text(patch + "\n")
    server = Server(TOKEN, [], cwd=places.work,
                    env={"HOME": str(places.home), "PYTHONPATH": str(site)})
    try:
        server.wait_until_listening()
        said = "".join(_lines_until(server, "sandbox: privileges"))
        for words in expected:
            assert words in said, (words, said)
        status, document = call(server.connect(), "GET", "/openapi.json")
        assert document["info"]["x-sandbox"]["not_confined"], document["info"]["x-sandbox"]
        code = escape_code("connecting to a listener on loopback", places.fields(0))
        status, reply = call(server.connect(), "POST", "/execute",
                             {"code": code, "state_name": "initial"})
        assert reply["error"]["ename"] == "PermissionError", reply  # by one or the other
        assert not places.reached()
    finally:
        server.stop()
        places.close()


# -- the work cells need ---------------------------------------------------------------------

def ok(running, code, **fields):
    reply = running.execute(code, **fields)
    assert reply["error"] is None, "".join(reply["error"]["traceback"])
    return reply


def test_the_workdir_is_a_cells_and_the_files_api_agrees_with_the_sandbox(confined):
    ok(confined, "open('out.txt', 'w').write('made by a cell')\n"
                 f"os.symlink({str(confined.places.home / 'secret')!r}, 'to-secret')"
       .replace("os.", "__import__('os')."))
    status, body = _get(confined, "/files/out.txt")
    assert (status, body) == (200, b"made by a cell")
    status, body = _get(confined, "/files/to-secret")
    assert status == 400 and b"leads out of the working directory" in body
    assert SECRET.encode() not in body


def test_a_workdir_inside_home_is_a_cells_and_the_rest_of_home_is_not(tmp_path):
    places = Places(tmp_path)
    project = places.home / "project"
    project.mkdir()
    server = Server(TOKEN, [], cwd=project, env={"HOME": str(places.home)})
    try:
        server.wait_until_listening()
        code = ("open('notes.txt', 'w').write('mine')\nprint(open('notes.txt').read())\n"
                "print(open('../secret').read())")
        status, reply = call(server.connect(), "POST", "/execute",
                             {"code": code, "state_name": "initial"})
        assert stdout(reply) == "mine\n" and SECRET not in json.dumps(reply)
        assert "refused by the server's sandbox" in reply["error"]["evalue"]
        assert (project / "notes.txt").read_text() == "mine"
    finally:
        server.stop()
        places.close()


def sandbox_dirs(supervisor_pid):
    """The sandbox's private directories of one supervisor, in the servers' $TMPDIR."""
    prefix = f"{cli.SANDBOX_PREFIX}{supervisor_pid}-"
    return [name for name in os.listdir(SERVER_TMPDIR) if name.startswith(prefix)]


def test_the_private_directory_goes_when_the_server_stops_or_at_the_next_start(tmp_path):
    places = Places(tmp_path)
    try:
        stopped = Running(places)
        ok(stopped, "import tempfile\ntempfile.NamedTemporaryFile(delete=False).write(b'x')")
        assert len(sandbox_dirs(stopped.server.process.pid)) == 1
        stopped.server.process.send_signal(signal.SIGTERM)
        assert stopped.server.process.wait(TIMEOUT) == 0
        assert sandbox_dirs(stopped.server.process.pid) == []
        killed = Running(places)
        killed.server.process.kill()  # SIGKILL: the supervisor cannot clean up
        killed.server.process.wait(TIMEOUT)
        _wait_until(lambda: server_process_of(killed.server.process.pid) == -1
                    or _state(server_process_of(killed.server.process.pid)) == "Z",
                    "its server process to follow it")
        assert len(sandbox_dirs(killed.server.process.pid)) == 1
        Running(places).stop()
        assert sandbox_dirs(killed.server.process.pid) == []
    finally:
        places.close()


def test_temporary_files_go_to_the_servers_private_directory(confined):
    reply = ok(confined, "import os, tempfile\n"
                         "with tempfile.NamedTemporaryFile('w+') as f:\n"
                         "    f.write('scratch'); f.flush(); f.seek(0); print(f.read())\n"
                         "print(tempfile.gettempdir())\nprint(os.environ['TMPDIR'])")
    text, where, tmpdir = stdout(reply).splitlines()
    private = [path for path in confined.document()["info"]["x-sandbox"]["writable"]
               if "snapshot-kernel-sandbox-" in path]
    assert text == "scratch" and where == tmpdir and private and where.startswith(private[0])


def test_numpy_and_matplotlib_plot_and_save_a_figure(confined):
    reply = ok(confined, "import numpy as np, matplotlib.pyplot as plt\n"
                         "plt.plot(np.arange(10) ** 2)\nplt.savefig('figure.png')\nplt.show()\n"
                         "import os; os.path.getsize('figure.png') > 1000")
    assert reply["output"][-1]["data"]["text/plain"] == "True"
    assert any("image/png" in item.get("data", {}) for item in reply["output"])
    assert "Matplotlib created a temporary" not in stdout(reply, "stderr")


def test_subprocesses_shell_commands_and_multiprocessing_work(confined):
    reply = ok(confined, "import subprocess, multiprocessing\n"
                         "print(subprocess.run(['sh', '-c', 'echo one > f && cat f'], "
                         "capture_output=True, text=True).stdout.strip())\n"
                         "!echo two\n"
                         "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
                         "    print(pool.map(abs, [-1, -2]))\n"
                         "import socket; print(len(socket.socketpair()))")
    assert stdout(reply).split() == ["one", "two", "[1,", "2]", "2"]


def test_pip_with_the_network_closed_says_how_to_open_it(confined):
    reply = confined.execute("%pip install --no-cache-dir tomli-w")
    assert "start the server with --allow-network" in stdout(reply, "stderr")
    assert confined.execute("import tomli_w")["error"]["ename"] == "ModuleNotFoundError"


def test_pip_cannot_change_the_servers_own_environment_and_says_so(confined):
    before = importlib.metadata.version("six")
    reply = confined.execute("%pip uninstall -y six")
    assert "keeps the server's own environment read-only" in stdout(reply, "stderr"), reply
    assert importlib.metadata.version("six") == before


def test_a_crash_restarts_a_confined_server_that_kept_the_states(tmp_path):
    running = Running(Places(tmp_path))
    try:
        ok(running, "x = 41", new_state_name="kept")
        with pytest.raises((http.client.HTTPException, ConnectionError)):  # no reply comes
            running.execute("import os\nos._exit(3)", state_name="kept", exec_id="crasher")
        _wait_until(lambda: _status(running, "crasher") == "crashed", "the crash reported")
        assert "kept" in call(running.server.connect(), "GET", "/states")[1]["states"]
        assert ok(running, "x + 1", state_name="kept")["output"][-1]["data"]["text/plain"] \
            == "42"
        said = _lines_until(running.server, "starting a new one", "listening on",
                            "sandbox: privileges confined")
        assert "sandbox: files confined" in "".join(said[said.index(next(
            line for line in said if "starting a new one" in line)):]), said
        reply = running.execute(escape_code("reading a secret in home", running.fields))
        assert_escape_refused(running, "after the restart", reply)
    finally:
        running.stop()
        running.places.close()


def test_pip_with_the_network_open_installs_where_cells_import_and_not_in_the_server(
        tmp_path):
    running = Running(Places(tmp_path), ["--allow-network"])
    try:
        reply = ok(running, "%pip install --no-cache-dir tomli-w")
        assert "Successfully installed tomli-w" in stdout(reply), reply
        packages = running.document()["info"]["x-sandbox"]["packages"]
        assert f"installs into this server's package directory, {packages}" in stdout(reply)
        reply = ok(running, "import tomli_w\ntomli_w.__file__")
        assert reply["output"][-1]["data"]["text/plain"].startswith(repr(packages)[:-1])
        assert subprocess.run([sys.executable, "-c", "import tomli_w"]).returncode == 1
        six = importlib.metadata.version("six")
        other = "1.16.0" if six != "1.16.0" else "1.15.0"
        reply = running.execute(f"%pip install --no-cache-dir six=={other}")
        assert "keeps the server's own environment read-only" in stdout(reply, "stderr")
        assert importlib.metadata.version("six") == six
        connected = ok(running, "import socket\nsocket.create_connection(('127.0.0.1', "
                                f"{running.fields['tcp']}), timeout=5).close()")
        assert connected["error"] is None and running.places.reached()
        reply = running.execute(escape_code("listening on a port", running.fields))
        assert "outgoing connections are open" in reply["error"]["evalue"]
    finally:
        running.stop()
        running.places.close()


def _get(running, path):
    conn = running.server.connect()
    conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    return response.status, response.read()


def _status(running, exec_id):
    try:
        return call(running.server.connect(), "GET", f"/executions/{exec_id}")[1].get("status")
    except (OSError, http.client.HTTPException):  # the server process is being replaced
        return None


def _wait_until(predicate, what):
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# -- the pieces, in this process ---------------------------------------------------------

@pytest.mark.parametrize("evalue, note", [
    ("[Errno 13] Permission denied: '/etc/passwd-'", "FILES"),
    ("[Errno 13] Permission denied: 'inside.txt'", None),  # the workdir's own permissions
    ("[Errno 13] Permission denied: 'inside.txt' -> '/elsewhere/x'", "FILES"),
    ("[Errno 18] Invalid cross-device link: '/home/u/secret' -> 'hard'", "FILES"),
    ("[Errno 13] Permission denied: '/proc/1/environ'", "PROCESSES"),
    ("[Errno 30] Read-only file system: '.venv/bin/python'", "OWN_CODE"),
    ("[Errno 30] Read-only file system: '/media/cdrom/x'", None),  # a read-only disk
    ("[Errno 13] Permission denied", "NETWORK"),
    ("<urlopen error [Errno 13] Permission denied>", "NETWORK"),
    ("[Errno 1] Operation not permitted", "PROCESSES"),
    ("[Errno 2] No such file or directory: '/etc/nothing'", None),
    ("division by zero", None),
])
def test_a_refusal_gets_the_note_of_what_refused_it(tmp_path, monkeypatch, evalue, note):
    from snapshot_kernel.sandbox import refusals
    work = str(tmp_path)
    monkeypatch.setattr(refusals, "ACTIVE", refusals.Sandbox(work, [work], False, "/p"))
    error = {"ename": "PermissionError", "evalue": evalue,
             "traceback": ["Traceback...\n", f"PermissionError: {evalue}\n"]}
    explained = refusals.explain(error)
    if note is None:
        assert explained == error
        return
    expected = getattr(refusals, note).format(workdir=work)
    assert explained["evalue"] == f"{evalue} ({expected})"
    assert explained["traceback"] == ["Traceback...\n", f"PermissionError: {evalue} ({expected})\n"]


def test_outside_a_sandbox_no_note_is_added():
    from snapshot_kernel.sandbox import refusals
    error = {"ename": "PermissionError", "evalue": "[Errno 13] Permission denied",
             "traceback": ["PermissionError: [Errno 13] Permission denied\n"]}
    assert refusals.ACTIVE is None and refusals.explain(error) is error


def test_reads_never_grant_a_directory_holding_home_or_tmpdir(monkeypatch):
    from snapshot_kernel.sandbox import policy
    tmpdir = os.path.realpath(tempfile.gettempdir())
    monkeypatch.setenv("PATH", os.pathsep.join(["/", tmpdir, os.path.expanduser("~"),
                                                os.environ["PATH"]]))
    readable = policy.readable()
    for place in (os.path.expanduser("~"), tmpdir):
        assert not [path for path in readable
                    if os.path.commonpath([path, place]) == path], place
    assert "/usr" in readable and os.path.realpath(sys.prefix) in readable


def test_configuration_is_granted_but_its_credentials(tmp_path):
    from snapshot_kernel.sandbox import policy
    for path in ("etc/ssh/ssh_host_rsa_key", "etc/ssh/ssh_config", "etc/shadow", "etc/hosts",
                 "etc/ssl/private/key.pem", "etc/ssl/certs/ca.pem"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    root = str(tmp_path / "etc")
    granted = policy._beneath_except(root, [f"{root}/shadow*", f"{root}/ssh/ssh_host_*",
                                            f"{root}/ssl/private"])
    assert sorted(os.path.relpath(path, root) for path in granted) == [
        "hosts", "ssh/ssh_config", "ssl/certs"]
