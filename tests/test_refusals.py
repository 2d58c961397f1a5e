"""A refusal of an upload is heard by any HTTP client, on a real socket: one that asks with
``Expect: 100-continue`` is refused before it sends its body (curl does for bodies over
1 MiB), and one that sends its whole body before reading (Python's http.client, requests)
gets the refusal once it has sent it, not a broken pipe."""

import http.client
import json
import socket
import subprocess

import pytest

from helpers import WAIT
from test_server import TOKEN, Server

BIG = 48 << 20  # bytes: far more than the socket buffers hold, so a sender would block
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server whose state ``taken`` exists, working in a directory of its own."""
    work = tmp_path_factory.mktemp("refusals")
    (work / "dir").mkdir()
    running = Server(TOKEN, ["--workdir", str(work)])
    running.wait_until_listening()
    conn = running.connect()
    conn.request("POST", "/execute", json.dumps({"code": "x = 1", "state_name": "initial",
                                                 "new_state_name": "taken"}), AUTH)
    assert conn.getresponse().status == 200
    conn.close()
    yield running
    running.stop()


@pytest.fixture
def big_file(tmp_path):
    path = tmp_path / "big.bin"
    with open(path, "wb") as out:
        out.truncate(BIG)
    return path


# (method, path, status, words): requests the server refuses without reading their body.
REFUSED = {
    "an import onto a taken name": ("PUT", "/states/taken", 409, "already exists"),
    "a file onto a directory's path": ("PUT", "/files/dir/", 405, "use DELETE or GET"),
    "an unknown route": ("POST", "/nowhere", 404, "no route"),
}


@pytest.mark.parametrize("method, path, status, words", REFUSED.values(), ids=REFUSED)
def test_http_client_sending_its_whole_body_first_hears_the_refusal(
        server, big_file, method, path, status, words):
    conn = server.connect()
    with open(big_file, "rb") as body:
        conn.request(method, path, body, {**AUTH, "Content-Length": str(BIG)})
    response = conn.getresponse()
    assert (response.status, response.getheader("Connection")) == (status, "close")
    assert words in json.loads(response.read())["error"]
    conn.close()


def test_a_chunked_body_is_read_to_its_end_too(server):
    conn = server.connect()
    conn.request("PUT", "/states/taken", (bytes(1 << 20) for _ in range(48)),
                 {**AUTH, "Transfer-Encoding": "chunked"})
    assert conn.getresponse().status == 409
    conn.close()


def curl(server, *args):
    """``(status, bytes curl sent of the body)`` of one curl request."""
    done = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}",
                           "-H", f"Authorization: Bearer {TOKEN}", *args],
                          capture_output=True, text=True, timeout=WAIT, check=True)
    status, sent = done.stdout.split()
    return int(status), int(sent)


def test_curl_asking_to_continue_is_refused_before_it_sends_the_body(server, big_file):
    """curl sends ``Expect: 100-continue`` with a body over 1 MiB and waits for an answer:
    1 s by default, then it sends anyway. A loaded CI machine once took longer to answer, so
    curl here waits as long as the test does: what is tested is the server's answer."""
    url = f"http://127.0.0.1:{server.port}"
    wait = ("--expect100-timeout", str(WAIT))
    assert curl(server, *wait, "-T", str(big_file), f"{url}/states/taken") == (409, 0)
    assert curl(server, *wait, "-X", "PUT", "--data-binary", f"@{big_file}",
                f"{url}/files/dir/") == (405, 0)


def test_curl_not_asking_hears_the_refusal_while_it_sends(server, big_file):
    """curl stops sending when the refusal comes; the server reads what it sent meanwhile."""
    url = f"http://127.0.0.1:{server.port}"
    assert curl(server, "-H", "Expect:", "-T", str(big_file), f"{url}/states/taken")[0] == 409


def test_a_body_the_server_takes_is_asked_for_with_100_continue(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
        sock.sendall(f"PUT /files/asked.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     f"{TOKEN}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n".encode())
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 200
        assert json.loads(response.read()) == {"name": "asked.txt", "size": 5}


def test_a_body_sent_without_the_token_is_not_read(server, big_file):
    """The security promise stands: a body without the token is never read; the 401 is
    sent, and the connection closed under a sender that does not read before it is done."""
    conn = server.connect()
    with pytest.raises(ConnectionError), open(big_file, "rb") as body:
        conn.request("PUT", "/states/taken", body, {"Authorization": "Bearer wrong",
                                                    "Content-Length": str(BIG)})
    conn.close()
