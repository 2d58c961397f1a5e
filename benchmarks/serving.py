"""Two servers on loopback, served the same way, and a keep-alive client for them.

Both run Cheroot on 127.0.0.1:0 in a daemon thread of this process, built by
``snapshot_kernel.web.server.make_server``: the snapshot kernel's app, and a bare
Bottle app whose POST /execute only reads its body. Only the app differs.
"""

import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

import bottle

from snapshot_kernel import crashes
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from snapshot_kernel.web.server import make_server

TOKEN = "benchmark-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def bare_app():
    """A Bottle app whose POST /execute reads its body and answers a constant JSON object.

    It reads the body as any real endpoint does: the server closes a connection
    whose request body was left unread, and reconnecting would be timed too.
    """
    app = bottle.Bottle()

    @app.post("/execute")
    def execute():
        bottle.request.body.read()
        return {"ok": True}

    return app


@contextmanager
def serving(app, threads=4):
    """Serve ``app`` on a free loopback port; yield the port; stop the server after."""
    server = make_server(app, ("127.0.0.1", 0), threads=threads)
    server.prepare()
    thread = threading.Thread(target=server.serve, daemon=True, name="benchmark server")
    thread.start()
    try:
        yield server.bind_addr[1]
    finally:
        server.stop()


class Client:
    """One keep-alive connection that POSTs a fixed JSON body and times each reply."""

    def __init__(self, port, body, check):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.body = json.dumps(body).encode("utf-8")
        self.check = check

    def post(self):
        """Seconds from sending the request to having read the whole reply."""
        start = time.perf_counter()
        self.connection.request("POST", "/execute", body=self.body, headers=HEADERS)
        response = self.connection.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {payload[:200]!r}")
        self.check(json.loads(payload))
        return elapsed

    def close(self):
        self.connection.close()


def _kernel_reply_ok(reply):
    if reply.get("error") is not None:
        raise RuntimeError(f"the cell failed: {reply['error']}")


def _bare_reply_ok(reply):
    if reply != {"ok": True}:
        raise RuntimeError(f"unexpected reply {reply!r}")


def trivial_latencies(rounds, per_round, warmup=20):
    """Per-request seconds ``(kernel, bare, default)`` for POST /execute of ``1+1``: the
    kernel with states in memory (``--in-memory``), a bare endpoint, and the kernel as a
    supervised server runs it by default (a private state directory and the journal).

    The client runs in its own process, as curl or an agent would: in this
    one it would compete with the servers' threads for the GIL. Requests go in
    rounds of ``per_round`` to each server, the order flipping every round, so
    that drift in the machine's speed hits both alike.
    """
    kernel = SnapshotKernel()
    directory = tempfile.mkdtemp(prefix="http-trivial-")
    default = SnapshotKernel(state_dir=directory, journal=crashes.Journal(), private_dir=True)
    try:
        with serving(create_app(kernel, TOKEN)) as kernel_port, \
                serving(bare_app()) as bare_port, \
                serving(create_app(default, TOKEN)) as default_port:
            job = {"ports": [kernel_port, bare_port, default_port], "rounds": rounds,
                   "per_round": per_round, "warmup": warmup}
            done = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(job)],
                                  capture_output=True, text=True, timeout=600, check=True)
            return tuple(json.loads(done.stdout))
    finally:
        kernel.close()
        default.close()
        shutil.rmtree(directory, ignore_errors=True)


# The client process: keep-alive connections to each port, interleaved rounds,
# and a check of every reply, so a failing cell cannot pass for a fast one.
CLIENT = """
import http.client, json, sys, time
job = json.loads(sys.argv[1])
body = json.dumps({"code": "1+1", "state_name": "initial"}).encode()
headers = {"Authorization": "Bearer %s", "Content-Type": "application/json"}
connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in job["ports"]]

def post(index):
    start = time.perf_counter()
    connections[index].request("POST", "/execute", body=body, headers=headers)
    response = connections[index].getresponse()
    reply = json.loads(response.read())
    elapsed = time.perf_counter() - start
    if response.status != 200 or reply.get("error") is not None:
        raise SystemExit("bad reply from port %%d: %%r" %% (job["ports"][index], reply))
    return elapsed

for index in range(len(connections)):
    for _ in range(job["warmup"]):
        post(index)
times = [[] for _ in connections]
for number in range(job["rounds"]):
    order = range(len(connections)) if number %% 2 == 0 else reversed(range(len(connections)))
    for index in order:
        times[index].extend(post(index) for _ in range(job["per_round"]))
print(json.dumps(times))
""" % TOKEN
