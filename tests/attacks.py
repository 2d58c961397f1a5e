"""Hostile and careless clients, for tests and for measuring: ``python tests/attacks.py``.

An ``Attack`` holds many raw sockets to a server and, from a background thread,
trickles bytes into them the way a slowloris or slow-body client does. ``probe``
is what a legitimate client sees meanwhile: how long a ``GET /states`` with the
token takes on a fresh connection. Run as a script, this module starts a real
server for each attack and prints the probes' worst latency, so the figures
behind the server's defences can be reproduced against any version of it.
"""

import http.client
import json
import math
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

from test_server import TOKEN, Server

PROBE_TIMEOUT = 5  # seconds; a probe slower than this counts as failed
SLOWLORIS = (b"GET /states HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n")
SLOW_BODY = (b"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n",
             b"{")


class Attack:
    """``count`` sockets, each sent ``opening``, then a byte of ``trickle`` every ``interval`` s."""

    def __init__(self, port, count, opening=b"", trickle=b"", interval=0.5):
        self.sockets = [socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT)
                        for _ in range(count)]
        self.dead = set()
        self._stop = threading.Event()
        for sock in self.sockets:
            self._send(sock, opening)
        if trickle:
            self._thread = threading.Thread(target=self._trickle, args=(trickle, interval),
                                            daemon=True)
            self._thread.start()

    def _send(self, sock, data):
        if sock in self.dead or not data:
            return
        try:
            sock.sendall(data)
        except OSError:  # the server closed or reset it: that is allowed
            self.dead.add(sock)

    def _trickle(self, trickle, interval):
        position = 0
        while not self._stop.wait(interval):
            byte = trickle[position % len(trickle):][:1]
            position += 1
            for sock in self.sockets:
                self._send(sock, byte)

    def closed_by_server(self):
        """How many of the sockets the server has closed (EOF or reset)."""
        return sum(1 for sock in self.sockets if sock in self.dead or closed_by_peer(sock))

    def stop(self):
        self._stop.set()
        for sock in self.sockets:
            sock.close()


def closed_by_peer(sock):
    """True if the other end has closed or reset ``sock``; never blocks."""
    sock.setblocking(False)
    try:
        return sock.recv(65536, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset by the server
        return True
    finally:
        sock.settimeout(PROBE_TIMEOUT)


def flood_head(port, size, chunk=1 << 20):
    """Send a request line of ``size`` bytes without a token; return the bytes the server took."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT) as sock:
        try:
            sock.sendall(b"GET /")
            block = b"a" * chunk
            while sent < size:
                sock.sendall(block)
                sent += len(block)
        except OSError:  # refused part-way, as it should be
            pass
    return sent


def probe(port, token=TOKEN):
    """Seconds a fresh ``GET /states`` with the token takes; ``math.inf`` if it fails."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT)
    try:
        conn.request("GET", "/states", headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError):
        return math.inf
    finally:
        conn.close()
    return time.monotonic() - start if response.status == 200 and "states" in body else math.inf


def probes_during(port, seconds, every=0.2):
    """Probe every ``every`` s for ``seconds``; return each probe's latency."""
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        latencies.append(probe(port))
        time.sleep(every)
    return latencies


def peak_rss_kib(pid):
    """The most memory process ``pid`` has held so far (Linux's VmHWM), in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for process {pid}")


# -- measuring ------------------------------------------------------------------------

ATTACKS = {
    "16 idle connections": dict(count=16),
    "200 slowloris connections": dict(count=200, opening=SLOWLORIS[0], trickle=SLOWLORIS[1]),
    "200 slow-body connections": dict(count=200, opening=SLOW_BODY[0], trickle=SLOW_BODY[1]),
}


LEFT_BEHIND = {
    "a ThreadPoolExecutor task": "import concurrent.futures, time\n"
                                 "pool = concurrent.futures.ThreadPoolExecutor()\n"
                                 "pool.submit(time.sleep, 3600)",
    "a non-daemon thread": "import threading, time\n"
                           "threading.Thread(target=time.sleep, args=(3600,),\n"
                           "                 daemon=False).start()",
    "a multiprocessing.Process": "import multiprocessing, time\n"
                                 "multiprocessing.Process(target=time.sleep, args=(3600,)).start()",
}


def execute(port, code, timeout=PROBE_TIMEOUT, **fields):
    """POST /execute ``code`` on ``initial``; return ``(status, reply)``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        body = json.dumps({"code": code, "state_name": "initial", **fields})
        conn.request("POST", "/execute", body, {"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def seconds_to_stop(server, limit=30):
    """Send SIGTERM; return how long the process took to exit (``math.inf`` past ``limit``)."""
    start = time.monotonic()
    server.process.terminate()
    try:
        server.process.wait(limit)
    except subprocess.TimeoutExpired:
        return math.inf
    return time.monotonic() - start


def measure(flags, seconds):
    """Print what a probe sees under each attack, and how long SIGTERM takes to stop the server."""
    for name, attack_args in ATTACKS.items():
        with _started(flags) as server:
            attack = Attack(server.port, **attack_args)
            latencies = probes_during(server.port, seconds)
            closed = attack.closed_by_server()
            attack.stop()
        print(f"{name:28} worst probe {max(latencies):6.3f} s  failed "
              f"{sum(map(math.isinf, latencies)):3}/{len(latencies)}  closed by the server "
              f"{closed}/{attack_args['count']}")
    with _started(flags) as server:
        before = peak_rss_kib(server.process.pid)
        flood_head(server.port, 200 << 20)
        grown = peak_rss_kib(server.process.pid) - before
        print(f"{'a 200 MB request line':28} worst probe {probe(server.port):6.3f} s  "
              f"peak RSS grew {grown / 1024:.1f} MiB")
    with _started(flags) as server:
        sleepers = [threading.Thread(target=_quietly, daemon=True, args=(
            execute, server.port, "import time\ntime.sleep(40)"), kwargs={"timeout": 60})
            for _ in range(16)]
        for sleeper in sleepers:
            sleeper.start()
        time.sleep(1)
        latencies = probes_during(server.port, seconds)
        print(f"{'16 cells sleeping 40 s':28} worst probe {max(latencies):6.3f} s  failed "
              f"{sum(map(math.isinf, latencies)):3}/{len(latencies)}")
    with _started(flags) as server:
        attack = Attack(server.port, 20, *SLOWLORIS)
        print(f"{'SIGTERM, 20 trickling':28} stopped in {seconds_to_stop(server):6.3f} s")
        attack.stop()
    for name, code in LEFT_BEHIND.items():
        with _started(flags) as server:
            status, reply = execute(server.port, code)
            assert status == 200 and reply["error"] is None, reply
            print(f"{'SIGTERM, ' + name:28} stopped in {seconds_to_stop(server):6.3f} s")


def _quietly(fn, *args, **kwargs):
    """Run ``fn``, ignoring the connection errors a stopping server may cause."""
    try:
        fn(*args, **kwargs)
    except (OSError, http.client.HTTPException):
        pass


@contextmanager
def _started(flags):
    server = Server(TOKEN, flags)
    try:
        server.wait_until_listening()
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    measure(sys.argv[1:], seconds=12)
