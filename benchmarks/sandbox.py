"""What the sandbox costs (issue 30): the default server, confined, against one started with
--no-sandbox, in the same run.

    python benchmarks/sandbox.py           # about a minute
    python benchmarks/sandbox.py --quick   # a smoke run

A program, not a test: it prints figures and targets and exits 0 whatever they are. Each
server is a process of its own on loopback (``harness.py``), with its states in the
crash-safe private directory (the default) and its workdir a new temporary directory; the
client is this process, one keep-alive connection per server, the two servers asked in
turn, round after round (the order reversed every other round). A time is the round trip
of one request as the client sees it:

  1 + 1        a tiny cell on ``initial``, storing nothing
  n += 1       a chain of states, each cell on the one before: a save to the crash-safe
               store per execute
  files        a cell that writes, reads and removes 200 small files in the workdir
               (Landlock checks each path it opens)
  subprocess   a cell that runs ``true`` 20 times (fork and exec under seccomp and Landlock)
  start        from starting the server to its first answer to GET /states (the sandbox
               is applied then, in each server process)

Median (min-max) in milliseconds, and the ratio of the medians, confined / --no-sandbox.
Targets: 1 + 1 and n += 1 within 1.1x.
"""

import statistics
import sys
import tempfile
import time

import harness
from harness import MEASURE_ERRORS, Server, heading, ms_range, verdict

KINDS = {"confined": [], "--no-sandbox": ["--no-sandbox"]}
TARGET = 1.1
FILES = ("import os\nfor i in range(200):\n    with open(f'f{i}', 'w') as f: f.write('x')\n"
         "    with open(f'f{i}') as f: f.read()\n    os.remove(f'f{i}')")
SUBPROCESS = "import subprocess\nfor _ in range(20): subprocess.run(['true'])"


def main(quick):
    rounds, heavy_rounds, starts = (20, 5, 2) if quick else (300, 30, 7)
    workdirs = {kind: tempfile.TemporaryDirectory() for kind in KINDS}
    servers = {kind: Server("product", [*flags, "--workdir", workdirs[kind].name])
               for kind, flags in KINDS.items()}
    try:
        rows = {"1 + 1": _alternate(servers, rounds, lambda s, i: s.execute("1 + 1", "initial")),
                "n += 1": _chain(servers, rounds),
                "files": _alternate(servers, heavy_rounds,
                                    lambda s, i: s.execute(FILES, "initial")),
                "subprocess": _alternate(servers, heavy_rounds,
                                         lambda s, i: s.execute(SUBPROCESS, "initial"))}
    finally:
        for server in servers.values():
            server.stop()
    rows["start"] = _starts(starts, workdirs)
    _print(rows)
    for workdir in workdirs.values():
        workdir.cleanup()


def _alternate(servers, rounds, run):
    """``{kind: [seconds]}`` of ``run(server, round)`` on each server in turn, after one
    warm-up each."""
    times = {kind: [] for kind in servers}
    for kind, server in servers.items():
        run(server, -1)
    for index in range(rounds):
        order = list(servers) if index % 2 == 0 else list(reversed(servers))
        for kind in order:
            times[kind].append(run(servers[kind], index)[0])
    return times


def _chain(servers, rounds):
    for server in servers.values():
        server.execute("n = 0", "initial", "chain-0")
    return _alternate(servers, rounds, lambda server, index: server.execute(
        "n += 1", f"chain-{max(index, 0)}", f"chain-{index + 1}" if index >= 0 else "warm"))


def _starts(count, workdirs):
    """``{kind: [seconds from starting the process to GET /states answering]}``."""
    times = {kind: [] for kind in KINDS}
    for index in range(count):
        for kind in (KINDS if index % 2 == 0 else list(reversed(list(KINDS)))):
            server = Server("product", [*KINDS[kind], "--workdir", workdirs[kind].name],
                            poll=0.005)
            try:
                server.request("GET", "/states")
                times[kind].append(time.perf_counter() - server.started)
            finally:
                server.stop()
    return times


def _print(rows):
    heading("the sandbox's cost", "confined (the default) against --no-sandbox, same run; "
                                  "ms: median (min-max)")
    print(f"   {'':<12} {'confined':>26} {'--no-sandbox':>26} {'ratio':>7}  target")
    for name, times in rows.items():
        ratio = statistics.median(times["confined"]) / statistics.median(times["--no-sandbox"])
        target = f"<= {TARGET}x {verdict(ratio <= TARGET)}" if name in ("1 + 1", "n += 1") \
            else ""
        print(f"   {name:<12} {ms_range(times['confined']):>26} "
              f"{ms_range(times['--no-sandbox']):>26} {ratio:6.2f}x  {target}")


if __name__ == "__main__":
    try:
        main("--quick" in sys.argv[1:])
    except MEASURE_ERRORS as exc:
        print(f"the measurement failed: {harness.failure(exc)}")
    harness.finish()
