"""/files: the server's working directory, read, written, listed and deleted over HTTP.

Through WebTest on a temporary working directory, then on a real server: a file far
larger than the server may buffer goes up and comes back streamed."""

import errno
import hashlib
import http.client
import io
import json
import os
import socket
import stat
from urllib.parse import quote

import pytest
import webtest

from conftest import TOKEN
from helpers import WAIT
from snapshot_kernel import files as files_module
from snapshot_kernel.errors import FileTooLarge
from snapshot_kernel.files import Workdir
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from test_server import TOKEN as SERVER_TOKEN, Server, start_server  # noqa: F401 (a fixture)

MAX_FILE = 1000


@pytest.fixture
def kernel():
    """One kernel: files do not depend on conftest's copy modes."""
    kernel = SnapshotKernel()
    yield kernel
    kernel.close()


@pytest.fixture
def work(tmp_path):
    """The working directory the app serves, holding ``notes.txt`` and ``data/x.csv``,
    beside a directory ``outside`` it must never reach."""
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "notes.txt").write_bytes(b"hello\n")
    (work / "data" / "x.csv").write_bytes(b"a,b\n1,2\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"secret")
    (work / "out").symlink_to(outside)
    (work / "secret").symlink_to(outside / "secret.txt")
    (work / "inner").symlink_to(work / "data")
    return work


@pytest.fixture
def app(kernel, work):
    app = webtest.TestApp(create_app(kernel, TOKEN, files=Workdir(work, MAX_FILE)))
    app.authorization = ("Bearer", TOKEN)
    return app


def send(app, method, path, body=None, **environ):
    if body is None:
        return app.request(path, method=method, environ=environ, expect_errors=True)
    return app.request(path, method=method, body=body, environ=environ, expect_errors=True)


def assert_json_error(response, status, *words):
    assert response.status_int == status, response.body
    assert response.content_type == "application/json"
    for word in words:
        assert word in response.json["error"]


def tree(root):
    """Every path below ``root`` with its bytes (None for a directory or link)."""
    found = {}
    for directory, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            found[rel] = (None if os.path.isdir(path) or os.path.islink(path)
                          else open(path, "rb").read())
    return found


# -- reading, writing, listing, deleting ---------------------------------------------

def test_a_file_put_is_the_file_got_with_its_parent_directories_made(app, work):
    reply = send(app, "PUT", "/files/made/deep/r%C3%A9sults.json", b'{"a": 1}')
    assert (reply.status_int, reply.json) == (200, {"name": "made/deep/r\u00e9sults.json",
                                                    "size": 8})
    assert (work / "made" / "deep" / "r\u00e9sults.json").read_bytes() == b'{"a": 1}'
    got = send(app, "GET", "/files/made/deep/r%C3%A9sults.json")
    assert (got.status_int, got.content_type, got.body) == (200, "application/json", b'{"a": 1}')
    assert got.headers["Content-Length"] == "8"


CONTENT_TYPES = {"notes.txt": "text/plain", "plot.png": "image/png", "model.bin": None,
                 "table.csv": "text/csv", "no_suffix": None}


@pytest.mark.parametrize("name, content_type", CONTENT_TYPES.items(), ids=list(CONTENT_TYPES))
def test_a_file_comes_back_with_the_type_its_name_suggests(app, name, content_type):
    send(app, "PUT", f"/files/{name}", b"\x89PNG\x00")
    got = send(app, "GET", f"/files/{name}")
    assert got.content_type == (content_type or "application/octet-stream")
    assert got.body == b"\x89PNG\x00"


def test_a_put_replaces_a_file_whole_and_keeps_its_mode(app, work):
    script = work / "run.sh"
    script.write_bytes(b"old")
    script.chmod(0o750)
    assert send(app, "PUT", "/files/run.sh", b"new contents").json["size"] == 12
    assert script.read_bytes() == b"new contents"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert not [name for name in os.listdir(work) if name.startswith(".upload-")]


def test_an_empty_file_can_be_stored(app, work):
    assert send(app, "PUT", "/files/empty", b"").json == {"name": "empty", "size": 0}
    assert send(app, "GET", "/files/empty").body == b""


def test_a_trailing_slash_lists_a_directory_sorted_by_name(app, work):
    mtime = 1_700_000_000
    os.utime(work / "notes.txt", (mtime, mtime))
    listing = send(app, "GET", "/files/").json["files"]
    assert [item["name"] for item in listing] == ["data", "inner", "notes.txt", "out", "secret"]
    notes = listing[2]
    assert notes == {"name": "notes.txt", "size": 6, "mtime": "2023-11-14T22:13:20+00:00",
                     "is_dir": False}
    assert {item["name"]: item["is_dir"] for item in listing}["data"] is True
    assert send(app, "GET", "/files/data/").json["files"][0]["name"] == "x.csv"
    assert send(app, "GET", "/files/inner/").json == send(app, "GET", "/files/data/").json


def test_a_link_that_leads_nowhere_is_listed_as_itself(app, work):
    (work / "dangling").symlink_to(work / "gone")
    listed = {item["name"] for item in send(app, "GET", "/files/").json["files"]}
    assert "dangling" in listed


def test_delete_removes_a_file_a_link_or_an_empty_directory(app, work, tmp_path):
    assert send(app, "DELETE", "/files/data/x.csv").json == {"deleted": "data/x.csv"}
    assert send(app, "DELETE", "/files/data/").json == {"deleted": "data"}
    assert send(app, "DELETE", "/files/secret").json == {"deleted": "secret"}
    assert not (work / "data").exists() and not (work / "secret").is_symlink()
    assert (tmp_path / "outside" / "secret.txt").read_bytes() == b"secret"  # the link only


CONFLICTS = {
    "get a directory": ("GET", "/files/data", None, "is a directory"),
    "list a file": ("GET", "/files/notes.txt/", None, "is a file"),
    "put onto a directory": ("PUT", "/files/data", b"x", "is a directory"),
    "put below a file": ("PUT", "/files/notes.txt/x", b"x", "is a file"),
    "delete a full directory": ("DELETE", "/files/data", None, "not empty"),
    "delete a file as a directory": ("DELETE", "/files/notes.txt/", None, "not a directory"),
    "delete a link as a directory": ("DELETE", "/files/secret/", None, "not a directory"),
}


@pytest.mark.parametrize("method, path, body, words", CONFLICTS.values(), ids=CONFLICTS)
def test_a_path_of_the_wrong_kind_is_409_and_changes_nothing(app, work, method, path, body,
                                                             words):
    before = tree(work)
    assert_json_error(send(app, method, path, body), 409, words)
    assert tree(work) == before


def test_a_fifo_is_not_read(app, work):
    os.mkfifo(work / "pipe")
    assert_json_error(send(app, "GET", "/files/pipe"), 409, "not a regular file")


MISSING = {"get": ("GET", "/files/nope.txt"), "list": ("GET", "/files/nope/"),
           "delete": ("DELETE", "/files/nope.txt"), "below": ("GET", "/files/nope/x")}


@pytest.mark.parametrize("method, path", MISSING.values(), ids=MISSING)
def test_a_missing_file_is_404(app, method, path):
    assert_json_error(send(app, method, path), 404, "no file or directory")


# -- paths that would leave the working directory -------------------------------------

# (path as sent, words of the error): each is refused for GET, PUT and DELETE alike.
ESCAPES = {
    "dot dot": ("/files/../outside/secret.txt", ".."),
    "dot dot, encoded": ("/files/%2e%2e/outside/secret.txt", ".."),
    "dot dot inside": ("/files/data/../../outside/secret.txt", ".."),
    "slash encoded dot dot": ("/files/data%2F..%2F..%2Foutside%2Fsecret.txt", ".."),
    "absolute": ("/files//etc/passwd", "absolute"),
    "absolute, encoded": ("/files/%2Fetc%2Fpasswd", "absolute"),
    "a NUL byte": ("/files/notes.txt%00.png", "NUL"),
    "a linked directory": ("/files/out/secret.txt", "symbolic link"),
    "a linked file": ("/files/secret", "symbolic link"),
    "a file in a new directory below a link": ("/files/out/new/x.txt", "symbolic link"),
}


# Deleting a link deletes the link, which is inside (test_delete_removes_...).
ESCAPE_CASES = [pytest.param(method, path, words, id=f"{method} {name}")
                for name, (path, words) in ESCAPES.items() for method in ("GET", "PUT", "DELETE")
                if (method, name) != ("DELETE", "a linked file")]


@pytest.mark.parametrize("method, path, words", ESCAPE_CASES)
def test_a_path_that_escapes_the_working_directory_is_400_and_changes_nothing(
        app, work, tmp_path, method, path, words):
    before, outside = tree(work), tree(tmp_path / "outside")
    assert_json_error(send(app, method, path, b"x" if method == "PUT" else None), 400, words)
    assert tree(work) == before
    assert tree(tmp_path / "outside") == outside


def test_the_working_directory_itself_is_not_deleted_or_written(app, work):
    assert_json_error(send(app, "DELETE", "/files/."), 400, "working directory itself")
    assert_json_error(send(app, "PUT", "/files/new/.", b"x"), 400, "names a directory")
    assert work.is_dir() and not (work / "new").exists()


def test_put_on_a_directory_path_is_a_405_naming_the_methods_it_takes(app, work):
    """Found by fuzzing (schemathesis's unsupported_method): PUT /files/<dir>/ was a 400,
    though the OpenAPI document lists only GET and DELETE for a path ending in '/'."""
    before = tree(work)
    response = send(app, "PUT", "/files/new/", b"x")
    assert_json_error(response, 405, "PUT is not allowed on /files/new/; use DELETE or GET")
    assert response.headers["Allow"] == "DELETE,GET"
    assert tree(work) == before


# Found by fuzzing (schemathesis): a name of 381 bytes (Zalgo text) was a 400 for DELETE.
LONG = quote("e\u0301" * 100)  # 200 characters, 300 bytes in UTF-8: past NAME_MAX (255)
LONG_NAMES = {"get": ("GET", f"/files/{LONG}"), "list": ("GET", f"/files/{LONG}/"),
              "delete": ("DELETE", f"/files/{LONG}"), "below": ("GET", f"/files/data/{LONG}/x")}


@pytest.mark.parametrize("method, path", LONG_NAMES.values(), ids=LONG_NAMES)
def test_a_name_longer_than_the_file_system_holds_names_no_file(app, method, path):
    assert_json_error(send(app, method, path), 404,
                      "no file or directory", "too long")


def test_a_name_longer_than_the_file_system_holds_is_not_written(app, work):
    before = tree(work)
    assert_json_error(send(app, "PUT", f"/files/data/new/{LONG}", b"x"), 400, "too long")
    assert tree(work) == before


def test_a_link_that_stays_inside_is_followed(app, work):
    assert send(app, "GET", "/files/inner/x.csv").body == b"a,b\n1,2\n"
    send(app, "PUT", "/files/inner/y.csv", b"y")
    assert (work / "data" / "y.csv").read_bytes() == b"y"


# -- limits, refusals, failures ---------------------------------------------------------

def test_a_file_over_max_file_is_413_and_nothing_is_made(app, work):
    before = tree(work)
    assert_json_error(send(app, "PUT", "/files/new/dir/big", b"x" * (MAX_FILE + 1)), 413,
                      "--max-file", str(MAX_FILE))
    assert tree(work) == before
    assert send(app, "PUT", "/files/new/dir/fits", b"x" * MAX_FILE).json["size"] == MAX_FILE


def test_a_body_of_unknown_length_is_cut_at_max_file_leaving_nothing(work):
    """What a chunked upload meets: the limit is found while the bytes arrive."""
    workdir = Workdir(work, MAX_FILE)
    before = tree(work)
    with pytest.raises(FileTooLarge, match="--max-file"):
        workdir.store("new/dir/big", iter([b"x" * 600, b"x" * 600]))
    assert tree(work) == before


FAILURES = {
    "permission": (PermissionError(errno.EACCES, "Permission denied"), 403, "permission"),
    "disk full": (OSError(errno.ENOSPC, "No space left on device"), 507, "no room"),
    "quota": (OSError(errno.EDQUOT, "Disk quota exceeded"), 507, "no room"),
}


@pytest.mark.parametrize("error, status, words", FAILURES.values(), ids=FAILURES)
def test_what_the_disk_refuses_is_an_error_that_says_so_and_leaves_nothing(
        app, work, monkeypatch, error, status, words):
    def fail(*args, **kwargs):
        raise error

    before = tree(work)
    monkeypatch.setattr(files_module.os, "replace", fail)
    assert_json_error(send(app, "PUT", "/files/new/x", b"x"), status, words)
    monkeypatch.undo()
    assert tree(work) == before


FILE_ROUTES = [("GET", "/files/"), ("GET", "/files/data/"), ("GET", "/files/notes.txt"),
               ("PUT", "/files/notes.txt"), ("DELETE", "/files/notes.txt")]


@pytest.mark.parametrize("method, path", FILE_ROUTES)
def test_every_file_route_needs_the_token(app, work, method, path):
    before = tree(work)
    app.authorization = None
    reply = send(app, method, path, b"x" if method == "PUT" else None)
    assert_json_error(reply, 401, "token")
    assert tree(work) == before


def test_a_download_holds_a_slot_of_max_running_until_it_is_closed(kernel, work):
    wsgi = create_app(kernel, TOKEN, max_running=1, files=Workdir(work))
    app = webtest.TestApp(wsgi)
    app.authorization = ("Bearer", TOKEN)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/files/notes.txt",
               "HTTP_AUTHORIZATION": f"Bearer {TOKEN}", "wsgi.input": io.BytesIO(),
               "SERVER_NAME": "x", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
    body = wsgi(environ, lambda status, headers, exc_info=None: None)
    assert b"".join(body) == b"hello\n"
    assert_json_error(send(app, "PUT", "/files/other", b"y"), 503, "--max-running")
    body.close()
    assert send(app, "PUT", "/files/other", b"y").json["size"] == 1


def test_by_default_the_app_serves_the_current_directory(kernel, work, monkeypatch):
    monkeypatch.chdir(work)
    app = webtest.TestApp(create_app(kernel, TOKEN))
    app.authorization = ("Bearer", TOKEN)
    assert send(app, "GET", "/files/notes.txt").body == b"hello\n"


# -- a real server ---------------------------------------------------------------------

BIG = 50 * 1024 * 1024
HEADERS = {"Authorization": f"Bearer {SERVER_TOKEN}"}


def peak_rss(pid):
    """The process's peak resident memory in bytes (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def big_file(tmp_path):
    """A 50 MB file of incompressible bytes, and its SHA-256."""
    path, digest = tmp_path / "big.bin", hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(BIG // (1 << 20)):
            chunk = os.urandom(1 << 20)
            digest.update(chunk)
            out.write(chunk)
    return path, digest.hexdigest()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc (Linux)")
def test_a_large_file_goes_up_and_comes_back_streamed(start_server, tmp_path, big_file):
    work = tmp_path / "served"
    work.mkdir()
    server = start_server(flags=["--workdir", str(work), "--max-file", str(2 * BIG)])
    conn = server.connect()
    conn.request("GET", "/files/", headers=HEADERS)  # warm up: the routes' code is loaded
    assert conn.getresponse().read()
    before = peak_rss(server.process.pid)
    path, digest = big_file
    with open(path, "rb") as upload:
        conn.request("PUT", "/files/up/big.bin", body=upload,
                     headers={**HEADERS, "Content-Length": str(BIG)})
        reply = conn.getresponse()
        assert (reply.status, reply.read()) == (200, b'{"name": "up/big.bin", "size": %d}' % BIG)
    conn.request("GET", "/files/up/big.bin", headers=HEADERS)
    download = conn.getresponse()
    assert download.status == 200 and download.getheader("Content-Length") == str(BIG)
    got = hashlib.sha256()
    for chunk in iter(lambda: download.read(1 << 20), b""):
        got.update(chunk)
    assert got.hexdigest() == digest
    grown = peak_rss(server.process.pid) - before
    assert grown < BIG // 4, f"the server's peak memory grew by {grown} bytes"


def test_a_chunked_upload_is_stored_and_one_over_the_limit_is_refused(start_server, tmp_path):
    work = tmp_path / "served"
    work.mkdir()
    server = start_server(flags=["--workdir", str(work), "--max-file", "100000"])
    conn = server.connect()
    conn.request("PUT", "/files/chunked.txt", body=iter([b"abc"] * 1000), headers=HEADERS,
                 encode_chunked=True)
    reply = conn.getresponse()
    assert (reply.status, reply.read()) == (200, b'{"name": "chunked.txt", "size": 3000}')
    assert (work / "chunked.txt").read_bytes() == b"abc" * 1000
    conn.request("PUT", "/files/big.txt", body=iter([b"x" * 60000] * 2), headers=HEADERS,
                 encode_chunked=True)
    refused = conn.getresponse()
    assert refused.status == 413 and b"--max-file" in refused.read()
    assert sorted(os.listdir(work)) == ["chunked.txt"]


def test_an_upload_over_the_limit_is_refused_before_its_body_is_read(start_server, tmp_path):
    work = tmp_path / "served"
    work.mkdir()
    server = start_server(flags=["--workdir", str(work), "--max-file", "1000"])
    conn = server.connect()
    body = io.BytesIO(b"x" * (20 * 1024 * 1024))
    try:
        conn.request("PUT", "/files/big.bin", body=body,
                     headers={**HEADERS, "Content-Length": str(20 * 1024 * 1024)})
    except (BrokenPipeError, ConnectionResetError):  # the server hung up on the rest
        pass
    refused = conn.getresponse()
    assert refused.status == 413 and b"--max-file" in refused.read()
    assert os.listdir(work) == []


def test_a_body_that_stops_is_408_and_stores_nothing(start_server, tmp_path):
    work = tmp_path / "served"
    work.mkdir()
    server = start_server(flags=["--workdir", str(work), "--request-timeout", "0.5"])
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
        sock.sendall(f"PUT /files/a/b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     f"{SERVER_TOKEN}\r\nContent-Length: 100\r\n\r\nabc".encode())
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        assert reply.status == 408, reply.read()
    assert os.listdir(work) == []


def raw_request(port, method, path, body=b""):
    """``method path`` sent byte for byte on a socket, as a hostile client writes it (no
    client library normalising the path); returns ``(status, Content-Type, body bytes)``."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     f"{SERVER_TOKEN}\r\nContent-Length: {len(body)}\r\nConnection: close"
                     "\r\n\r\n".encode() + body)
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        return reply.status, reply.getheader("Content-Type"), reply.read()


def test_over_a_real_socket_a_path_that_escapes_is_400_and_changes_nothing(
        start_server, work, tmp_path):
    # The fuzzer in .ci/schemathesis cannot send these (it drops '/', '..' and NUL from
    # path values), so this is where the refusals meet Cheroot's own parsing of the path.
    server = start_server(flags=["--workdir", str(work)])
    before, outside = tree(work), tree(tmp_path / "outside")
    for method, path, words in (case.values for case in ESCAPE_CASES):
        status, media, body = raw_request(server.port, method, path,
                                          b"x" if method == "PUT" else b"")
        assert (status, media) == (400, "application/json"), (method, path, body)
        error = json.loads(body)
        assert list(error) == ["error"] and words in error["error"]
    assert tree(work) == before
    assert tree(tmp_path / "outside") == outside


def test_over_a_real_socket_a_quoted_slash_is_a_slash_and_a_quoted_percent_a_percent(
        start_server, work):
    # Cheroot hands '%2F' over still encoded (WebTest decodes it): a client that quotes a
    # whole path, quote(path, safe=""), must name the same file as one that quotes segments.
    server = start_server(flags=["--workdir", str(work)])
    whole = quote("data/new/y.txt", safe="")
    assert raw_request(server.port, "PUT", f"/files/{whole}", b"y")[0] == 200
    assert (work / "data" / "new" / "y.txt").read_bytes() == b"y"
    assert raw_request(server.port, "GET", f"/files/{whole}")[2] == b"y"
    listed = raw_request(server.port, "GET", f"/files/{quote('data/new', safe='')}%2F")
    assert [entry["name"] for entry in json.loads(listed[2])["files"]] == ["y.txt"]
    assert raw_request(server.port, "DELETE", f"/files/{whole}")[0] == 200
    assert not (work / "data" / "new" / "y.txt").exists()
    # A name that holds '%2F' itself is sent as '%252F', and is one file, not two.
    literal = quote("a%2Fb", safe="")
    assert raw_request(server.port, "PUT", f"/files/{literal}", b"z")[0] == 200
    assert (work / "a%2Fb").read_bytes() == b"z" and not (work / "a").exists()


def test_over_a_real_socket_a_path_that_is_not_utf8_is_400_and_writes_nothing(
        start_server, work):
    # Bottle would drop the byte and route the rest: this PUT replaced notes.txt.
    server = start_server(flags=["--workdir", str(work)])
    before = tree(work)
    for method, path in [("PUT", "/files/notes%FF.txt"), ("DELETE", "/files/data/x%FF.csv"),
                         ("GET", "/files/%FF"), ("PUT", "/files/notes.txt%2F%FF")]:
        status, media, body = raw_request(server.port, method, path, b"x")
        assert (status, media) == (400, "application/json"), (method, path, body)
        assert "not UTF-8" in json.loads(body)["error"]
    assert tree(work) == before


def test_cells_run_in_the_working_directory_that_files_serves(start_server, tmp_path):
    work = tmp_path / "served"
    work.mkdir()
    server = start_server(flags=["--workdir", str(work)])
    conn = server.connect()
    conn.request("PUT", "/files/input.txt", body=b"41", headers=HEADERS)
    assert conn.getresponse().read()
    code = ("n = int(open('input.txt').read())\n"
            "open('output.txt', 'w').write(str(n + 1))")
    conn.request("POST", "/execute", body=json.dumps({"code": code, "state_name": "initial"}),
                 headers=HEADERS)
    ran = conn.getresponse()
    assert json.loads(ran.read())["error"] is None
    conn.request("GET", "/files/output.txt", headers=HEADERS)
    assert conn.getresponse().read() == b"42"


def test_a_workdir_that_is_not_there_stops_the_server_with_a_message(tmp_path):
    server = Server(SERVER_TOKEN, ["--workdir", str(tmp_path / "nope")])
    assert server.process.wait(WAIT) != 0
    said = "".join(iter(lambda: server.lines.get(timeout=WAIT) or "", ""))
    assert "cannot work in --workdir" in said
