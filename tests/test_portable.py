"""Portable states: GET /states/<name>/export and PUT /states/<name>.

Between two real servers (export from one, import into the other, the same cell on
both), through WebTest (every refusal in one table, each storing nothing), and on the
kernel (state directories, both copy modes, a reset or a taken name meanwhile).
"""

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import urllib.parse
from pathlib import Path

import pytest
import webtest

from archives import flipped, offset_of, packed, rewritten, unpacked
from conftest import TOKEN
from helpers import ok, printed, stdout
from snapshot_kernel.errors import ResetMeanwhile, StateExists
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from snapshot_kernel.states import archive, portable
from test_server import TOKEN as SERVER_TOKEN, Server

pytest.importorskip("numpy")
pytest.importorskip("pandas")

MADE = """
import functools, threading
import numpy as np
import pandas as pd
SCALE = 2
class Point:
    __slots__ = ("x",)
    def __init__(self, x): self.x = x
    def norm(self): return abs(self.x) * SCALE
def counter():
    n = 0
    def inc():
        nonlocal n
        n += 1
        return n
    return inc
inc = counter(); inc()
pts = [Point(1), Point(-3)]
alias = pts
square = lambda v: v * v * SCALE
@functools.lru_cache
def cube(v): return v ** 3 * SCALE
big = np.arange(400_000, dtype=np.float64)   # 3.2 MB: a member of its own
every_third = big[::3]
grid = np.asfortranarray(np.arange(300_000.0).reshape(600, 500))
small = np.array([1, 2, 3], dtype=np.int16)
df = pd.DataFrame({"a": np.arange(200_000), "b": np.tile(list("xyz"), 200_000)[:200_000]})
frozen = np.ones(200_000); frozen.flags.writeable = False
lock = threading.Lock()
"""
CHANGED = "big[7] = -1.0\nfiltered = df[df.a % 7 == 0]\nnote = 'child'"
PROBE = """
print(pts[1].norm(), alias is pts, isinstance(pts[0], Point), inc(), square(3), cube(2))
print(big[:9], big.sum(), every_third.base is big, every_third[5], grid[3, 7], grid.flags.f_contiguous)
print(small.dtype, small.sum(), df.shape, df.b.iloc[4], int(df.a.sum()), len(filtered), note)
print(frozen.flags.writeable, [k for k in sorted(globals()) if k[0] != '_' and k != 'lock'])
SCALE = 10
print(pts[1].norm(), square(1), cube(1))
big[0] = 99.0
print(big[:2], every_third[0])
"""
SERVER_AUTH = {"Authorization": f"Bearer {SERVER_TOKEN}"}
DOCS = Path(__file__).resolve().parent.parent / "docs" / "portable-states.md"


# -- two real servers ---------------------------------------------------------------------

@pytest.fixture
def servers(tmp_path):
    """Two servers: ``a``, states in memory, and ``b``, with a state directory."""
    started = {"a": Server(SERVER_TOKEN), "b": Server(SERVER_TOKEN, ["--state-dir",
                                                                     str(tmp_path / "b")])}
    try:
        for server in started.values():
            server.wait_until_listening()
        yield started
    finally:
        for server in started.values():
            server.stop()


def run(server, code, state, **fields):
    connection = server.connect()
    connection.timeout = 60
    connection.request("POST", "/execute", json.dumps({"code": code, "state_name": state,
                                                       **fields}), SERVER_AUTH)
    reply = json.loads(connection.getresponse().read())
    assert reply["error"] is None, reply["error"]
    return reply


def export_from(server, name):
    connection = server.connect()
    connection.request("GET", f"/states/{urllib.parse.quote(name)}/export", headers=SERVER_AUTH)
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, body
    assert response.getheader("Content-Type") == "application/x-tar"
    assert int(response.getheader("Content-Length")) == len(body)
    return body


def import_into(server, name, body):
    """``(status, reply)``; ``body`` is bytes, or an iterable of bytes sent chunked."""
    connection = server.connect()
    connection.timeout = 60
    chunked = not isinstance(body, bytes)
    connection.request("PUT", f"/states/{urllib.parse.quote(name)}", body, SERVER_AUTH,
                       encode_chunked=chunked)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_a_state_moved_to_another_server_gives_what_it_gives_on_the_first(servers):
    a, b = servers["a"], servers["b"]
    run(a, MADE, "initial", new_state_name="made")
    run(a, CHANGED, "made", new_state_name="changed")
    status, reply = import_into(b, "moved", export_from(a, "changed"))
    assert status == 200, reply
    assert reply["imported"] == "moved" and reply["original"]["name"] == "changed"
    assert reply["original"]["parent"] == "made"
    assert set(reply["original"]["libraries"]) == {"numpy", "pandas"}
    assert list(reply["lost"]) == ["lock"] and "pickle" in reply["lost"]["lock"]
    here = stdout(run(a, PROBE, "changed"))
    assert "[99.  1.] 99.0" in here and "child" in here
    assert stdout(run(b, PROBE, "moved")) == here


def test_a_moved_state_moves_on_chunked_and_is_kept_by_a_state_directory(servers, tmp_path):
    a, b = servers["a"], servers["b"]
    run(a, MADE, "initial", new_state_name="made")
    run(a, CHANGED, "made", new_state_name="changed")
    first = export_from(a, "changed")
    pieces = (first[start:start + 65536] for start in range(0, len(first), 65536))
    assert import_into(b, "moved", pieces)[0] == 200
    status, reply = import_into(a, "back", export_from(b, "moved"))  # exported in turn
    assert status == 200 and reply["original"]["name"] == "moved"
    assert list(reply["lost"]) == ["lock"]
    b.stop()
    servers["b"] = restarted = Server(SERVER_TOKEN, ["--state-dir", str(tmp_path / "b")])
    restarted.wait_until_listening()
    here = stdout(run(a, PROBE, "changed"))
    assert stdout(run(a, PROBE, "back")) == here
    assert stdout(run(restarted, PROBE, "moved")) == here


def test_a_lost_name_fails_on_the_importing_server_saying_why(servers):
    run(servers["a"], "import threading\nlock = threading.Lock()\nx = 1", "initial",
        new_state_name="locked")
    assert import_into(servers["b"], "locked", export_from(servers["a"], "locked"))[0] == 200
    connection = servers["b"].connect()
    connection.request("POST", "/execute", json.dumps({"code": "x\nlock", "state_name":
                                                       "locked"}), SERVER_AUTH)
    error = json.loads(connection.getresponse().read())["error"]
    assert error["ename"] == "NameError"
    assert "could not be exported (TypeError: cannot pickle" in error["evalue"]


def test_a_traceback_through_a_moved_function_quotes_the_function_s_cell(servers):
    """The importing server's own first cells have the file names the exporting one's had.
    (Servers with --state-dir keep no cells' source: their tracebacks quote no line.)"""
    a, c = servers["a"], Server(SERVER_TOKEN)
    try:
        c.wait_until_listening()
        run(a, "def f(x):\n    return 1 / x", "initial", new_state_name="f")
        for n in range(2):
            run(c, "def g():\n    return 'a line of the importing server'", "initial")
        assert import_into(c, "f", export_from(a, "f"))[0] == 200
        connection = c.connect()
        connection.request("POST", "/execute", json.dumps({"code": "f(0)", "state_name": "f"}),
                           SERVER_AUTH)
        error = json.loads(connection.getresponse().read())["error"]
    finally:
        c.stop()
    traceback = "".join(error["traceback"])
    assert "ZeroDivisionError" in traceback and "    return 1 / x\n" in traceback
    assert "importing server" not in traceback


def test_the_move_in_the_docs_works_verbatim(servers):
    assert shutil.which("curl"), "the docs' example needs curl on PATH"
    match = re.search(r"<!-- move -->\n```bash\n(.*?)```", DOCS.read_text("utf-8"), re.S)
    run(servers["a"], "x = 41", "initial", new_state_name="base")
    env = {**os.environ, "AUTH": f"Authorization: Bearer {SERVER_TOKEN}",
           "OLD": f"http://127.0.0.1:{servers['a'].port}",
           "NEW": f"http://127.0.0.1:{servers['b'].port}"}
    moved = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", match.group(1)], env=env,
                           capture_output=True, text=True, timeout=60)
    assert moved.returncode == 0, moved.stderr
    assert '"text/plain": "42"' in moved.stdout


# -- WebTest: the routes and every refusal ---------------------------------------------------

@pytest.fixture
def source():
    """A kernel holding the states ``made`` (MADE) and ``changed``, and its archive of
    ``changed``."""
    kernel = SnapshotKernel()
    ok(kernel, MADE, new_state_name="made")
    ok(kernel, CHANGED, "made", new_state_name="changed")
    writer, _ = kernel.export_state("changed")
    yield kernel, b"".join(writer.chunks())
    kernel.close()


@pytest.fixture
def target(tmp_path):
    """``(app, kernel, blob directory)``: a WebTest app on a kernel with a state directory,
    taking archives of up to 64 MB."""
    kernel = SnapshotKernel(state_dir=str(tmp_path / "target"))
    app = webtest.TestApp(create_app(kernel, TOKEN, max_import=64 << 20))
    app.authorization = ("Bearer", TOKEN)
    yield app, kernel, tmp_path / "target" / "blobs"
    kernel.close()


def put(app, name, body):
    return app.put(f"/states/{urllib.parse.quote(name)}", body,
                   {"Content-Type": "application/x-tar"}, expect_errors=True)


def test_export_and_import_through_the_app(source, target):
    kernel, data = source
    app, imported, _ = target
    exported = webtest.TestApp(create_app(kernel, TOKEN))
    exported.authorization = ("Bearer", TOKEN)
    response = exported.get("/states/changed/export")
    assert response.content_type == "application/x-tar"
    assert response.headers["Content-Disposition"] == \
        "attachment; filename=\"changed.tar\"; filename*=UTF-8''changed.tar"
    names = [name for name, _ in unpacked(response.body)]
    assert names[0] == "meta.json"
    assert names[-3:] == ["state.pickle", "settings.pickle", "checksums.json"]
    assert len(names) > 5 and all(name.startswith("buffers/") for name in names[1:-3])
    reply = put(app, "caf\u00e9", response.body)
    assert reply.status_int == 200, reply.body
    assert app.get(f"/states/{urllib.parse.quote('café')}").json["parent"] is None
    assert printed(imported, PROBE, "caf\u00e9") == printed(kernel, PROBE, "changed")


def test_an_archive_holds_the_bytes_of_an_array_with_many_views_once(target):
    from test_durable import CHECK_VIEWS, VIEWS
    kernel = SnapshotKernel()
    ok(kernel, VIEWS, new_state_name="views")
    writer, _ = kernel.export_state("views")
    data = b"".join(writer.chunks())
    assert len(data) < 2 * 64_000 * 8  # each view's reference held the base's bytes again
    app, imported, _ = target
    assert put(app, "views", data).status_int == 200
    assert printed(imported, CHECK_VIEWS, "views") == "True True 897.0 True\n"


def test_members_are_npy_files_and_meta_says_what_the_state_needs(source):
    import numpy as np
    _, data = source
    members = dict(unpacked(data))
    meta = json.loads(members["meta.json"])
    assert meta["name"] == "changed" and meta["parent"] == "made" and meta["code"] == CHANGED
    assert meta["python"] == portable.PYTHON and meta["libraries"]["numpy"] == np.__version__
    assert meta["lost"] == {"lock": "TypeError: cannot pickle '_thread.lock' object"}
    arrays = [np.load(io.BytesIO(body)) for name, body in members.items() if name.endswith(".npy")]
    assert any(array.shape == (400_000,) and array[7] == -1.0 for array in arrays)
    assert any(array.shape == (600, 500) and array.flags.f_contiguous for array in arrays)
    checksums = json.loads(members["checksums.json"])["sha256"]
    assert checksums == {name: hashlib.sha256(body).hexdigest()
                         for name, body in members.items() if name != "checksums.json"}


def test_an_archive_unpacked_and_packed_again_by_tar_loads(source, target):
    """As ``tar`` may pack it: a directory entry, pax headers, a name only a pax header holds."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo("buffers")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for name, body in unpacked(source[1]):
            info = tarfile.TarInfo("x" * 120 if name == "state.pickle" else name)
            info.size, info.pax_headers = len(body), {"comment": "packed again", "path": name}
            tar.addfile(info, io.BytesIO(body))
    app, kernel, _ = target
    assert put(app, "again", out.getvalue()).status_int == 200
    assert printed(kernel, PROBE, "again") == printed(source[0], PROBE, "changed")


def _truncated_before_checksums(data):
    return data[:offset_of(data, archive.CHECKSUMS)]


# name -> (what the body is made of, from the good archive; the status; what the error says)
REFUSALS = {
    "not an archive": (lambda data: b"hello world\n" * 100, 400, "not a state archive"),
    "an empty body": (lambda data: b"", 400, "not a state archive"),
    "JSON": (lambda data: b'{"code": "1"}', 400, "not a state archive"),
    "a gzipped archive": (lambda data: gzip.compress(data), 400, "not a state archive"),
    "a tar of something else": (lambda data: packed([("a.txt", b"hi")]), 400,
                                "its first member is 'a.txt'"),
    "truncated in a buffer": (lambda data: data[:offset_of(data, "buffers/1.npy") + 5000],
                              400, "truncated"),
    "truncated before its checksums": (_truncated_before_checksums, 400, "truncated"),
    "a byte of a buffer damaged": (lambda data: flipped(data, "buffers/0.npy"), 400,
                                   "'buffers/0.npy' does not match its sha256"),
    "a byte of the pickle damaged": (lambda data: flipped(data, "state.pickle", 0.1), 400,
                                     "'state.pickle' does not match its sha256"),
    "a byte of meta.json damaged": (lambda data: flipped(data, "meta.json", 0.99), 400,
                                    "damaged"),
    "a member header damaged": (lambda data: data[:offset_of(data, "state.pickle") + 10]
                                + b"X" + data[offset_of(data, "state.pickle") + 11:], 400,
                                "damaged"),
    "a checksum for a member it lacks": (lambda data: rewritten(data, checksums={
        "buffers/99.npy": "0" * 64}), 400, "lists members it does not hold: buffers/99.npy"),
    "another CPython minor version": (lambda data: rewritten(data, {"python": "cpython-3.99"}),
                                      422, "one CPython minor version"),
    "another numpy major version": (lambda data: rewritten(data, {"libraries": {
        "numpy": "0.1.0"}}), 422, "numpy 0.1.0, and this server has numpy"),
    "a library this server lacks": (lambda data: rewritten(data, {"libraries": {
        "no_such_library_here": "1.0"}}), 422, "cannot import (ModuleNotFoundError)"),
    "a newer format": (lambda data: rewritten(data, {"format": "snapshot-kernel state archive "
                                                               "2"}), 422, "this server reads"),
}


@pytest.mark.parametrize("make, status, says", REFUSALS.values(), ids=REFUSALS)
def test_a_refused_archive_says_why_and_stores_nothing(source, target, make, status, says):
    app, kernel, blobs = target
    before = (kernel.state_names(), sorted(os.listdir(blobs)))
    reply = put(app, "moved", make(source[1]))
    assert reply.status_int == status, reply.body
    assert reply.content_type == "application/json" and says in reply.json["error"]
    assert (kernel.state_names(), sorted(os.listdir(blobs))) == before
    assert put(app, "moved", source[1]).status_int == 200  # the name was not kept


@pytest.mark.parametrize("name, status, says", [
    ("initial", 409, "already exists"), (" x", 400, "whitespace"), ("a\\b", 400, "contain '/'")])
def test_a_name_that_is_taken_or_invalid_is_refused(
        source, target, name, status, says):
    app, kernel, _ = target
    reply = put(app, name, source[1])
    assert reply.status_int == status and says in reply.json["error"], reply.body


def test_an_archive_over_max_import_is_a_413(source, target):
    app = webtest.TestApp(create_app(target[1], TOKEN, max_import=1000))
    app.authorization = ("Bearer", TOKEN)
    reply = put(app, "moved", source[1])
    assert reply.status_int == 413 and "the limit is 1000" in reply.json["error"]


def test_an_unpickling_failure_is_a_422_and_stores_nothing(target):
    """A whole archive whose pickle names a module this server lacks (not a library that
    meta.json lists): found only when unpickling."""
    kernel = SnapshotKernel()
    ok(kernel, "import fractions\nhalf = fractions.Fraction(1, 2)", new_state_name="half")
    data = b"".join(kernel.export_state("half")[0].chunks())
    members = [(name, body.replace(b"fractions", b"fractionz"))
               for name, body in unpacked(data) if name != archive.CHECKSUMS]
    digests = {name: hashlib.sha256(body).hexdigest() for name, body in members}
    data = packed(members + [(archive.CHECKSUMS, json.dumps({"sha256": digests}).encode())])
    app, kernel, blobs = target
    reply = put(app, "moved", data)
    assert reply.status_int == 422, reply.body
    assert "No module named 'fractionz'" in reply.json["error"]
    assert kernel.state_names() == ["initial"]


def test_an_unknown_state_cannot_be_exported(target):
    reply = target[0].get("/states/nope/export", expect_errors=True)
    assert reply.status_int == 404 and "no state named 'nope'" in reply.json["error"]


# -- the kernel -----------------------------------------------------------------------------

def test_every_copy_mode_imports_what_every_copy_mode_exports(kernel, source):
    kernel.import_state("moved", io.BytesIO(source[1]))
    assert printed(kernel, PROBE, "moved") == printed(source[0], PROBE, "changed")
    writer, lost = kernel.export_state("moved")
    assert list(lost) == ["lock"]
    again = SnapshotKernel(copy_on_write=None)
    again.import_state("twice", io.BytesIO(b"".join(writer.chunks())))
    assert printed(again, PROBE, "twice") == printed(source[0], PROBE, "changed")


def test_an_imported_state_survives_a_restart(source, tmp_path):
    directory = str(tmp_path / "states")
    SnapshotKernel(state_dir=directory).import_state("moved", io.BytesIO(source[1]))
    restarted = SnapshotKernel(state_dir=directory)
    assert printed(restarted, PROBE, "moved") == printed(source[0], PROBE, "changed")
    assert restarted.describe("moved")["lost"] == {
        "lock": "not exported: TypeError: cannot pickle '_thread.lock' object"}


class Stream:
    """An archive that runs ``meanwhile()`` once half of it has been read."""

    def __init__(self, data, meanwhile):
        self.file, self.half, self.meanwhile = io.BytesIO(data), len(data) // 2, meanwhile

    def read(self, size):
        if self.meanwhile is not None and self.file.tell() >= self.half:
            self.meanwhile, meanwhile = None, self.meanwhile
            meanwhile()
        return self.file.read(size)


def test_a_reset_during_an_import_stores_nothing(source, tmp_path):
    kernel = SnapshotKernel(state_dir=str(tmp_path / "states"))
    with pytest.raises(ResetMeanwhile):
        kernel.import_state("moved", Stream(source[1], kernel.reset))
    assert kernel.state_names() == ["initial"]
    assert SnapshotKernel(state_dir=str(tmp_path / "states")).state_names() == ["initial"]
    assert os.listdir(tmp_path / "states" / "blobs") == []


def test_the_name_is_held_while_the_archive_arrives(source):
    kernel = SnapshotKernel()
    refused = []

    def take_the_name():
        with pytest.raises(StateExists):
            kernel.execute("x = 1", "initial", new_state_name="moved")
        refused.append(True)

    kernel.import_state("moved", Stream(source[1], take_the_name))
    assert refused and kernel.state_names() == ["initial", "moved"]


def test_settings_travel_with_a_state_but_the_machine_s_own_stay(tmp_path):
    """What the state's cells chose moves (an environment variable, an entry of sys.path,
    the random generators, decimal, a working directory inside the workdir); what none
    chose is the importing server's: its workdir is where the imported state's cells run."""
    there, here = tmp_path / "there", tmp_path / "here"
    for workdir in (there, here):
        (workdir / "data").mkdir(parents=True)
    kernel = SnapshotKernel(workdir=str(there))
    importer = SnapshotKernel(workdir=str(here))
    ok(kernel, "import os, sys, random, decimal", new_state_name="plain")
    ok(kernel, "os.chdir('data')\nos.environ['SK_MOVED'] = 'there'\n"
               "sys.path.append('/sk-there')\nrandom.seed(5)\ndecimal.getcontext().prec = 3",
       "plain", new_state_name="set")
    for name in ("plain", "set"):
        writer, _ = kernel.export_state(name)
        importer.import_state(name, io.BytesIO(b"".join(writer.chunks())))
    probe = "print(random.random(), decimal.Decimal(1) / 7)"
    assert printed(importer, probe, "set") == printed(kernel, probe, "set")
    chosen = "print(os.getcwd(), os.environ.get('SK_MOVED'), '/sk-there' in sys.path)"
    assert printed(importer, chosen, "set") == f"{here / 'data'} there True\n"
    assert printed(importer, chosen, "plain") == f"{here} None False\n"
    importer.close()
    kernel.close()
