"""Branches at once, over HTTP, on the server as README starts it: with a 2 s job running on
one branch, how long a short cell on another branch takes to answer, and whether it reads
what it reads alone.

    python benchmarks/branches.py [--quick]

A program, not a test: it prints figures and exits 0 whatever they are. The baseline is the
same short cell on the same state with nothing else running, in the same run. Each pair is
a state the job runs on and a state the short cell runs on, that differ in one kind of
setting (or two): the ones an agent's session makes. scikit-learn is used where it is
installed (its import sets environment variables and warnings filters).
"""

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time

from harness import Server

JOB_SECONDS = 2.0
SETUP = ("import os, random, warnings, time\nimport numpy as np\nimport pandas as pd\n"
         "df = pd.DataFrame({'a': np.arange(1000.0)})")
SHORT = ("import os, random, warnings\nimport numpy as np\nimport pandas as pd\n"
         "print(os.getcwd(), os.environ.get('SK_B'), warnings.filters[:1], random.random(),\n"
         "      np.random.rand(), pd.get_option('display.max_rows'), df.shape)")
PAIRS = {  # name: (the job's branch cell, the short cell's branch cell), both on SETUP's state
    "siblings": ("x = 1", "x = 2"),
    "before and after an import": ("import json", None),  # the short cell: from initial
    "scikit-learn": ("import sklearn" if importlib.util.find_spec("sklearn") else "import json",
                     "x = 2"),
    "cwd": ("os.chdir(DIR)", "x = 2"),
    "environ": ("os.environ['SK_B'] = 'job'", "x = 2"),
    "warnings": ("warnings.filterwarnings('ignore')", "x = 2"),
    "seeds": ("random.seed(1)\nnp.random.seed(1)", "random.seed(2)\nnp.random.seed(2)"),
    "pandas options": ("pd.set_option('display.max_rows', 5)", "x = 2"),
    "cwd and environ": ("os.chdir(DIR)\nos.environ['SK_B'] = 'job'", "x = 2"),
}


def measure(server, name, job_cell, short_cell, repeats):
    directory = tempfile.mkdtemp()
    job_state, short_state = f"{name}-job", f"{name}-short"
    server.execute(job_cell.replace("DIR", repr(directory)), "data", job_state)
    if short_cell is None:  # from before the import: a state that never imported anything
        short_state, short_code = "initial", "print(1 + 1)"
    else:
        server.execute(short_cell, "data", short_state)
        short_code = SHORT
    alone_seconds, alone = [], None
    for _ in range(repeats):
        seconds, reply = server.execute(short_code, short_state)
        alone_seconds.append(seconds)
        alone = _printed(reply)
    beside_seconds, same = [], True
    for number in range(repeats):
        exec_id = f"{name}-{number}"
        server.request("POST", "/execute", {"code": f"time.sleep({JOB_SECONDS})",
                                            "state_name": job_state, "wait": False,
                                            "exec_id": exec_id}, expecting=202)
        time.sleep(0.1)  # the job is running
        seconds, reply = server.execute(short_code, short_state)
        beside_seconds.append(seconds)
        same = same and _printed(reply) == alone
        server.request("GET", f"/executions/{exec_id}?wait=10")
    return statistics.median(alone_seconds), statistics.median(beside_seconds), same


def _printed(reply):
    return "".join(item.get("text", "") for item in reply["output"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one measurement per pair")
    repeats = 1 if parser.parse_args().quick else 5
    print(f"python {sys.version.split()[0]}; a {JOB_SECONDS:.0f} s job on one branch, a short "
          "cell on another; medians of the round trip")
    server = Server("product")
    try:
        server.execute(SETUP, "initial", "data")
        print(f"   {'pair':28} {'alone':>8} {'beside':>8}  reads the same")
        for name, (job_cell, short_cell) in PAIRS.items():
            alone, beside, same = measure(server, name.replace(" ", "-"), job_cell, short_cell,
                                          repeats)
            print(f"   {name:28} {alone * 1e3:6.0f} ms {beside * 1e3:6.0f} ms  {same}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
