"""How long an idle server takes to exit after SIGTERM (issue 29's target: 0.5 s).

    python benchmarks/stop.py            # ROUNDS stops per mode
    python benchmarks/stop.py --quick    # 3

A program, not a test: it prints figures and exits 0 whatever they are. Each server is
``python -m snapshot_kernel.main`` on loopback (``harness.py``), in each mode: the default
(a supervisor and a private state directory), ``--state-dir``, ``--in-memory`` and
``--no-supervisor``. It answers one ``1 + 1`` (its routes' code is loaded, as on a server in
use) and then sits idle for IDLE s, its connection closed; the time runs from just before
SIGTERM to the end of the process this program started (the supervisor, which waits for its
server process and removes its private directory). Each figure is the median (min-max);
PASS if every stop met the target.
"""

import argparse
import os
import signal
import tempfile
import time

import harness
from harness import heading, ms_range, verdict

ROUNDS = 20
IDLE = 0.5     # seconds between the last reply and the signal
TARGET = 0.5   # seconds


def stop_seconds(options):
    """Seconds from SIGTERM to the exit of an idle server started with ``options``."""
    server = harness.Server("product", options)
    try:
        server.execute("1 + 1", "initial")
        server.connection.close()
        time.sleep(IDLE)
        started = time.perf_counter()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(harness.STOP_GRACE * 2)
        return time.perf_counter() - started
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 stops per mode")
    rounds = 3 if parser.parse_args().quick else ROUNDS
    heading("SIGTERM to exit, an idle server", f"{rounds} stops per mode; target "
            f"{TARGET:g} s; milliseconds, median (min-max)")
    with tempfile.TemporaryDirectory() as scratch:
        modes = {"default": [], "--state-dir": ["--state-dir", os.path.join(scratch, "s")],
                 "--in-memory": ["--in-memory"], "--no-supervisor": ["--no-supervisor"]}
        for mode, options in modes.items():
            times = [stop_seconds(options) for _ in range(rounds)]
            print(f"   {mode:16s} {ms_range(times)}  {verdict(max(times) <= TARGET)}")


if __name__ == "__main__":
    main()
