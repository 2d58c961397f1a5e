"""What the benchmarks of server processes share: the processes, their memory, printing.

``running(kind)`` starts the product (``python -m snapshot_kernel.main``, from
the checkout this file is in) or the fork baseline (``benchmarks/forkserver.py``)
on 127.0.0.1:0 in a new session, reads the chosen port from its stderr, and
kills its whole process group when the block ends, however it ends.
``server_memory`` is what ``bigdata.py`` counts as a server's memory; its
docstring says what and why.
"""

import http.client
import json
import statistics
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

TOKEN = "benchmark-token"
HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)  # servers import snapshot_kernel from here, not an install
COMMANDS = {
    "product": ([sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0"],
                "SNAPSHOT_KERNEL_TOKEN"),
    "fork": ([sys.executable, os.path.join(HERE, "forkserver.py"), "--bind", "127.0.0.1:0"],
             "FORKSERVER_TOKEN"),
}


def product_options(*options):
    """Start every product server of this run with ``options`` too (``--in-memory``)."""
    command, token_variable = COMMANDS["product"]
    COMMANDS["product"] = ([*command, *options], token_variable)


_LISTENING = re.compile(r"listening on http://(\S+):(\d+)")
STARTUP_TIMEOUT = 60.0
BUILD_TIMEOUT = 900.0
CELL_TIMEOUT = 300.0
SETTLE = 0.25  # seconds before reading memory
SLACK = 30.0  # seconds the client waits beyond a cell's own timeout before giving up
STOP_GRACE = 5.0
IDLE_RECONNECT = 5.0  # Cheroot drops keep-alive connections idle for 10 s


class ServerFailed(RuntimeError):
    """The server did not start, answered with an HTTP error, or a cell failed."""


# What a failed measurement can raise: it is reported, and the program goes on.
MEASURE_ERRORS = (ServerFailed, OSError, http.client.HTTPException, ValueError, KeyError)
FAILURES = []  # what failed in this run: ``finish`` then exits 1


def failure(exc):
    """A failed measurement's one-line description; the whole of it is recorded: the run goes
    on to its other figures but exits 1 (tests/test_benchmarks.py counts on that)."""
    text = f"{type(exc).__name__}: {exc}"
    FAILURES.append(text)
    return text.splitlines()[0][:100]


def finish():
    """End a benchmark's run: exit 1, naming them, if any measurement failed. Each is shown
    whole (a server that did not start, with its log), since a CI run is all there is to read."""
    if FAILURES:
        print(f"\n{len(FAILURES)} measurement(s) failed:")
        for text in FAILURES:
            print("   " + text.replace("\n", "\n      "))
        sys.exit(1)


class Server:
    """One server process in its own session, and a keep-alive connection to it."""

    def __init__(self, kind, options=(), poll=0.05):
        """Start a server of ``kind`` with extra command-line ``options``, looking for its
        port every ``poll`` seconds; ``started`` and ``listening`` are perf_counter times."""
        command, token_variable = COMMANDS[kind]
        self.kind = kind
        self.options = options
        # A file, so no pipe can fill and block it. The server writes it appending and this
        # process reads it through a descriptor of its own: sharing one, a seek to read moved
        # the server's write offset, and its next line overwrote the one naming its port.
        handle, self.log_path = tempfile.mkstemp(prefix="server-", suffix=".log")
        os.close(handle)
        env = {**os.environ, token_variable: TOKEN,  # not --token: ps shows command lines
               "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT,
                                                           os.environ.get("PYTHONPATH")]))}
        self.started = time.perf_counter()
        with open(self.log_path, "a") as writer:
            self.process = subprocess.Popen([*command, *options], stdin=subprocess.DEVNULL,
                                            stdout=writer, stderr=writer, env=env,
                                            start_new_session=True)
        self.pid = self.process.pid
        self.connection = None
        try:
            self.port = self._wait_for_port(poll)
        except BaseException:
            self.stop()  # a server that did not start is not left running
            raise
        self.listening = time.perf_counter()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=SLACK)
        self.last_used = time.monotonic()

    def _wait_for_port(self, poll):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            match = _LISTENING.search(self.log_text())
            if match:
                return int(match.group(2))
            if self.process.poll() is not None:
                break
            time.sleep(poll)
        code = self.process.poll()
        how = (f"it exited with {code}" if code is not None
               else f"it printed no port in {STARTUP_TIMEOUT:g} s")
        raise ServerFailed(f"{self.kind} server did not start ({how}; options "
                           f"{' '.join(self.options)}); its log:\n{self.log_text()}")

    def log_text(self):
        with open(self.log_path, errors="replace") as log:
            return log.read()

    def execute(self, code, state_name, new_state_name=None, timeout=CELL_TIMEOUT):
        """Seconds the round trip took, and the reply; ServerFailed if the cell failed."""
        body = {"code": code, "state_name": state_name, "timeout": timeout}
        if new_state_name is not None:
            body["new_state_name"] = new_state_name
        start = time.perf_counter()
        reply = self.request("POST", "/execute", body, timeout + SLACK)
        elapsed = time.perf_counter() - start
        if reply.get("error") is not None:
            error = reply["error"]
            raise ServerFailed(f"{self.kind}: the cell failed: {error['ename']}: "
                               f"{error['evalue']}\n{code}")
        return elapsed, reply

    def request(self, method, path, body=None, timeout=SLACK, expecting=200):
        """The JSON reply to one request, waiting at most ``timeout`` s for each read; its
        status must be ``expecting``."""
        if time.monotonic() - self.last_used > IDLE_RECONNECT:
            self.connection.close()  # reopened by the next request: it may have been dropped
        self.connection.timeout = timeout
        if self.connection.sock is not None:
            self.connection.sock.settimeout(timeout)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode("utf-8")
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        self.last_used = time.monotonic()
        if response.status != expecting:
            raise ServerFailed(f"{self.kind}: HTTP {response.status} for {method} {path}: "
                               f"{payload[:300]!r}")
        return json.loads(payload)

    def stop(self):
        """Kill the server and every process of its group (the fork server's states)."""
        if self.connection is not None:
            self.connection.close()
        _signal_group(self.pid, signal.SIGTERM)  # both servers stop their own work cleanly
        try:
            self.process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:  # it did not: SIGKILL below cannot be refused
            pass
        _signal_group(self.pid, signal.SIGKILL)  # stragglers, and the leader if still up
        self.process.wait()
        os.unlink(self.log_path)


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:  # nothing of the group is left
        pass


@contextmanager
def running(kind, options=(), poll=0.05):
    """A started ``Server`` of ``kind`` ("product" or "fork"), stopped when the block ends."""
    server = Server(kind, options, poll)
    try:
        yield server
    finally:
        server.stop()


# -- memory ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Bytes: anonymous PSS and page tables of a process tree, and the system's Shmem."""

    anon: int
    page_tables: int
    shmem: int

    @property
    def total(self):
        return self.anon + self.page_tables + self.shmem

    def __sub__(self, other):
        return Memory(self.anon - other.anon, self.page_tables - other.page_tables,
                      self.shmem - other.shmem)


def settled_memory(server):
    """``server_memory`` after SETTLE seconds, so memory freed just after a reply is not counted."""
    time.sleep(SETTLE)
    return server_memory(server.pid)


def server_memory(pid):
    """The memory of the process tree rooted at ``pid``, as bigdata.py's docstring defines."""
    anon = page_tables = 0
    for each in tree_pids(pid):
        anon += _proc_kb(f"/proc/{each}/smaps_rollup", "Pss_Anon:")
        page_tables += _proc_kb(f"/proc/{each}/status", "VmPTE:")
    return Memory(anon * 1024, page_tables * 1024, _proc_kb("/proc/meminfo", "Shmem:") * 1024)


def tree_pids(root):
    """``root`` and all its descendants, from the parent pids in /proc/*/stat."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent_pid(entry)
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _parent_pid(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name in parentheses may hold spaces: split after the last ')'.
            return int(stat.read().rpartition(")")[2].split()[1])
    except (FileNotFoundError, ProcessLookupError):  # it ended while we listed /proc
        return None


def _proc_kb(path, key):
    """The ``kB`` figure on the line starting with ``key``; 0 for an ended or zombie process."""
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(key):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):  # it ended while we read it
        pass
    return 0


# -- replies and printing ----------------------------------------------------------------


def shown_text(reply):
    """What a reply shows: its stdout and the repr of its last expression."""
    parts = [item.get("text") or item.get("data", {}).get("text/plain", "")
             for item in reply["output"] if item["output_type"] in ("stream", "execute_result")]
    return "".join(parts)


def ms_range(times):
    """Milliseconds: ``median (min-max)``."""
    return (f"{statistics.median(times) * 1000:8.2f} "
            f"({min(times) * 1000:.1f}-{max(times) * 1000:.1f})")


def verdict(ok):
    return "PASS" if ok else "FAIL"


def heading(title, note):
    print(f"\n== {title}\n   {note}")
