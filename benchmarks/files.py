"""Files over HTTP against copying them on the same disk.

    python benchmarks/files.py              # 400 MB
    python benchmarks/files.py --size 50    # MB

A program, not a test: it prints figures and exits 0 whatever they are. A server
runs on loopback with a temporary --workdir (``harness.py``); the client is
``snapshot_kernel.client``. Each figure is the best of ROUNDS:

  * copy:     shutil.copyfile of the file to another on the same disk (the baseline);
  * upload:   Client.upload of the file (PUT /files/<path>, streamed);
  * download: Client.download into a local file (GET /files/<path>, streamed).

Ratios are to the copy. The server's peak resident memory (VmHWM) is read before and
after, so its growth says whether a file was ever held whole. MB is 1e6 bytes.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import harness

sys.path.insert(0, harness.CHECKOUT)
from snapshot_kernel.client import Client  # noqa: E402  (the checkout's, not an install's)

ROUNDS = 3
PIECE = 1 << 20


def best(action):
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=400, help="MB (default 400)")
    size = parser.parse_args().size * 1_000_000
    with tempfile.TemporaryDirectory() as scratch:
        work, here = os.path.join(scratch, "work"), os.path.join(scratch, "here")
        os.mkdir(work)
        os.mkdir(here)
        source = os.path.join(here, "source.bin")
        with open(source, "wb") as out:
            for _ in range(size // PIECE):
                out.write(os.urandom(PIECE))
            out.write(os.urandom(size % PIECE))
        with harness.running("product", ["--workdir", work, "--max-file", str(2 * size)]) \
                as server:
            client = Client(f"http://127.0.0.1:{server.port}", harness.TOKEN)
            client.list_files()  # the routes' code is loaded before the first reading
            before = peak_rss(server.pid)
            copy = best(lambda: shutil.copyfile(source, os.path.join(here, "copy.bin")))
            upload = best(lambda: client.upload("big.bin", source))
            download = best(lambda: client.download("big.bin", os.path.join(here, "got.bin")))
            grown = peak_rss(server.pid) - before
            client.close()
    mb = size / 1e6
    harness.heading("files", f"{mb:g} MB, best of {ROUNDS}")
    for name, seconds in (("copy", copy), ("upload", upload), ("download", download)):
        print(f"{name:>9}: {seconds:7.3f} s  {mb / seconds:8.1f} MB/s  "
              f"{seconds / copy:5.2f}x the copy")
    print(f"server peak memory grew by {grown / 1e6:.1f} MB ({grown / size:.1%} of the file)")


if __name__ == "__main__":
    main()
