"""Portable states: export and import of a state holding a 400 MB array, against the disk.

    python benchmarks/portable.py            # a 400 MB float64 array, 5 rounds
    python benchmarks/portable.py --quick    # 40 MB: a smoke run

A program, not a test: it prints figures and ratios and exits 0 whatever they
are. Two servers on loopback (``harness.py``): ``source`` holds state ``big``,
a float64 array of random numbers, and ``target`` imports it, once with states
in memory (buffers in memfds) and once with ``--state-dir`` on a temporary
directory (buffers in files there). This process is the client.

  * export: GET /states/big/export, written to a file as it arrives, until the
    file is closed;
  * import: PUT /states/<name> from that file (a Content-Length, sent in 1 MiB
    blocks), until the reply; the imported state is deleted after each round;
  * baselines, in the same rounds: writing the array's bytes to a file of the
    same directory, and reading such a file back (``f.readinto`` of a bytearray).

Nothing is synced: the files stay in the page cache, as the exported archive and
the state directory's blobs do, so "disk speed" here is what writing to and
reading from the file system costs this machine. Figures are the median and the
best of ROUNDS; ratios are to the baselines' median and best.
"""

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time

from harness import TOKEN, running

ROUNDS = 5
BLOCK = 1 << 20
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 MB, not 400 MB")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    size = (40 if args.quick else 400) * 1000 * 1000
    with tempfile.TemporaryDirectory(prefix="portable-") as scratch:
        state_dir = os.path.join(scratch, "states")
        with running("product") as source, running("product") as memory, \
                running("product", ["--state-dir", state_dir]) as durable:
            source.execute(f"import numpy as np\nbig = np.random.default_rng(0).random("
                           f"{size // 8})", "initial", "big")
            figures = measure(source, {"memory": memory, "--state-dir": durable}, scratch,
                              size, args.rounds)
    report(figures, size)


def measure(source, targets, scratch, size, rounds):
    figures = {"write": [], "read": [], "export": []}
    figures.update({f"import ({kind})": [] for kind in targets})
    archive = os.path.join(scratch, "big.tar")
    payload = os.urandom(BLOCK) * (size // BLOCK) + os.urandom(size % BLOCK)
    for round_ in range(rounds):
        figures["write"].append(plain_write(os.path.join(scratch, "plain.bin"), payload))
        figures["read"].append(plain_read(os.path.join(scratch, "plain.bin"), size))
        figures["export"].append(export(source, archive))
        for kind, target in targets.items():
            figures[f"import ({kind})"].append(import_(target, f"big-{round_}", archive))
            target.request("DELETE", f"/states/big-{round_}")
        os.unlink(archive)
    return figures


def plain_write(path, payload):
    start = time.perf_counter()
    with open(path, "wb") as file:
        view = memoryview(payload)
        for offset in range(0, len(view), BLOCK):
            file.write(view[offset:offset + BLOCK])
    return time.perf_counter() - start


def plain_read(path, size):
    buffer = bytearray(size)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as file:
        view, done = memoryview(buffer), 0
        while done < size:
            done += file.readinto(view[done:done + BLOCK])
    return time.perf_counter() - start


def export(server, path):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    start = time.perf_counter()
    connection.request("GET", "/states/big/export", headers=AUTH)
    response = connection.getresponse()
    if response.status != 200:
        sys.exit(f"export: HTTP {response.status}: {response.read()[:300]!r}")
    with open(path, "wb") as file:
        while True:
            chunk = response.read(BLOCK)
            if not chunk:
                break
            file.write(chunk)
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def import_(server, name, path):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300,
                                            blocksize=BLOCK)
    start = time.perf_counter()
    with open(path, "rb") as file:
        connection.request("PUT", f"/states/{name}", body=file, headers={
            **AUTH, "Content-Length": str(os.path.getsize(path)),
            "Content-Type": "application/x-tar"})
        response = connection.getresponse()
        body = response.read()
    elapsed = time.perf_counter() - start
    connection.close()
    if response.status != 200:
        sys.exit(f"import: HTTP {response.status}: {body[:300]!r}")
    return elapsed


def report(figures, size):
    """Each figure's median and best, and its ratios to the baselines' (median to median,
    best to best: on a busy machine the best is what the work itself costs)."""
    medians = {what: statistics.median(times) for what, times in figures.items()}
    bests = {what: min(times) for what, times in figures.items()}
    print(f"a state holding a {size / 1e6:.0f} MB float64 array, {len(figures['write'])} rounds")
    print(f"  {'':22s} {'median':>8s} {'best':>8s} {'MB/s':>6s}   x plain write    x plain read")
    for what in figures:
        ratios = "  ".join(f"{medians[what] / medians[base]:5.2f} ({bests[what] / bests[base]:4.2f})"
                           for base in ("write", "read"))
        print(f"  {what:22s} {medians[what] * 1000:6.0f}ms {bests[what] * 1000:6.0f}ms "
              f"{size / bests[what] / 1e6:6.0f}   {ratios}")
    print("  (ratios: median to median, and in brackets best to best)")


if __name__ == "__main__":
    main()
