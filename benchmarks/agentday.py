"""An agent's day on the server (issue 28), run as an agent runs it, against a fresh server.

    python benchmarks/agentday.py            # 200,000 rows, a 3,000 x 3,000 SVD: ~2 minutes
    python benchmarks/agentday.py --quick    # 20,000 rows, a 1,500 x 1,500 SVD

A program, not a test: it prints what it did and the figures of the issue's targets, and
exits 0 whatever they are. Through HTTP only (``snapshot_kernel.client``), on a server
started as a user starts it (``python -m snapshot_kernel.main``, the crash-safe default):
upload a CSV, explore it, make the usual mistakes, try three cleaning strategies in
branches, fit a model in each, plot the best, run a sweep as a job with checkpoints,
export and import a state, crash a cell on purpose, stop an SVD by force, then look at
the tree of states and clean it. The targets:

1. the text reply of ``df.describe()`` is at most 1.2x the characters of
   ``print(df.describe())``'s stdout;
2. the diff of a state and its exported-and-imported copy is empty;
3. a forced stop ends a cell in C within 2 s, every state kept;
4. ``GET /states`` shows the tree, and cleaning it takes one request per branch.
"""

import argparse
import csv
import io
import json
import os
import random
import tempfile
import time
import urllib.parse

import harness
from harness import heading, verdict
from snapshot_kernel.client import BadRequest, Client, ClientError, NotFound

DESCRIBE_RATIO = 1.2
FORCE_SECONDS = 2.0


def make_csv(path, rows, seed=28):
    """Sales: a date, a region, a price, a quantity, a discount with gaps, a score."""
    rng = random.Random(seed)
    regions = ["north", "south", "east", "west", "centre"]
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["order", "date", "region", "price", "quantity", "discount", "score"])
        for order in range(rows):
            day = f"2024-{1 + order * 12 // rows:02d}-{1 + order % 28:02d}"
            price = round(rng.lognormvariate(3, 0.6), 2)
            discount = "" if rng.random() < 0.08 else round(rng.random() * 0.3, 3)
            writer.writerow([order, day, rng.choice(regions), price, rng.randint(1, 20),
                             discount, round(rng.gauss(50, 15), 1)])


def text_of(kernel, code, state):
    """The text reply (format text) of ``code`` on ``state``, storing nothing."""
    conn = kernel._connection(60)[0]
    body = json.dumps({"code": code, "state_name": state, "format": "text",
                       "store": False}).encode()
    conn.request("POST", "/execute", body, {**kernel._headers, "Content-Type":
                                            "application/json"})
    response = conn.getresponse()
    return response.read().decode()


def explore(kernel):
    heading("Explore", "df.describe() as a model reads it, against print(df.describe())")
    loaded = kernel.execute("import pandas as pd\nimport numpy as np\n"
                            "df = pd.read_csv('sales.csv', parse_dates=['date'])\ndf.shape",
                            new_state_name="loaded")
    print(f"   loaded: {loaded['output'][0]['data']['text/plain']}")
    shown = text_of(kernel, "df.describe()", "loaded")
    printed = kernel.execute("print(df.describe())", "loaded", store=False)
    stdout = "".join(item["text"] for item in printed["output"] if item.get("name") == "stdout")
    ratio = len(shown) / len(stdout)
    print("   the text reply:\n" + "\n".join("   | " + line for line in shown.splitlines()))
    print(f"   {len(shown)} characters against {len(stdout)} printed: {ratio:.2f}x "
          f"(target <= {DESCRIBE_RATIO}x) {verdict(ratio <= DESCRIBE_RATIO)}")
    html = kernel.execute("df.describe()", "loaded", store=False)["output"][0]["data"]
    print(f"   (its HTML, which the text reply used to be: {len(html['text/html'])} characters)")
    head = kernel.execute("df.head()", "loaded", store=False)
    print(f"   df.head() stored nothing: state_name={head['state_name']}")
    return ratio


def mistakes(kernel, base_url, token):
    heading("Mistakes", "what a typo, a reused exec_id, raw JSON and an unknown parameter say")
    for attempt in (lambda: kernel.describe("loadd"),
                    lambda: kernel.execute("dff.shape", "loaded", store=False),
                    lambda: kernel.execute("1", "loaded", exec_id="twice", store=False)
                    and kernel.execute("1", "loaded", exec_id="twice", store=False)):
        try:
            reply = attempt()
            error = reply["error"]
            print(f"   {error['traceback'][-1].strip()}")
        except ClientError as exc:
            print(f"   {exc.status}: {exc.message}")
    conn = kernel._connection(30)[0]
    raw = b'{"code": "x = 1\ny = 2", "state_name": "loaded"}'
    for method, path, body in (("POST", "/execute", raw), ("GET", "/states?tre=1", None)):
        conn.request(method, path, body, kernel._headers)
        response = conn.getresponse()
        print(f"   {response.status}: {json.loads(response.read())['error']}")


CLEANINGS = {
    "clean_drop": "df = df.dropna()",
    "clean_impute": "df = df.fillna({'discount': df['discount'].median()})",
    "clean_clip": ("df = df.fillna({'discount': 0.0})\n"
                   "df['price'] = df['price'].clip(upper=df['price'].quantile(0.99))"),
}
FIT = ("X = np.column_stack([df['price'], df['quantity'], df['discount'], "
       "np.ones(len(df))])\ny = df['score'].to_numpy()\n"
       "coef, *_ = np.linalg.lstsq(X, y, rcond=None)\n"
       "r2 = float(1 - ((y - X @ coef) ** 2).sum() / ((y - y.mean()) ** 2).sum())\nlr = 0.1\nr2")


def branches(kernel):
    heading("Branches", "three cleanings, a model fitted on each, the best plotted")
    scores = {}
    for name, code in CLEANINGS.items():
        kernel.execute(code, "loaded", new_state_name=name)
        fitted = kernel.execute(FIT, name, new_state_name=f"fit_{name[6:]}")
        scores[fitted["state_name"]] = float(fitted["output"][-1]["data"]["text/plain"])
        print(f"   {name}: r2 {scores[fitted['state_name']]:.3g}")
    diff = kernel.diff("loaded", "clean_drop")
    print(f"   diff loaded -> clean_drop: changed {sorted(diff['changed'])}, "
          f"df {diff['changed']['df']['before'].get('shape')} -> "
          f"{diff['changed']['df']['after'].get('shape')}")
    reread = kernel.execute("print(df.shape, r2)", "fit_drop", new_state_name="reread")
    print(f"   a cell that only reads: diff {kernel.diff('fit_drop', 'reread')['changed']}"
          f" ({reread['state_name']})")
    best = max(scores, key=scores.get)
    kernel.execute("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                   "daily = df.set_index('date')['price'].resample('D').sum()\n"
                   "fig, ax = plt.subplots()\ndaily.plot(ax=ax)\nplt.close(fig)", best,
                   new_state_name="plot")
    lost = kernel.describe("plot")["lost"]
    print(f"   plotted {best}: names lost at a crash {sorted(lost) or 'none'}")
    return best


def sweep(kernel, best):
    heading("Sweep", "a job with checkpoints, polled")
    code = ("results = {}\nfor i, alpha in enumerate([0.01, 0.1, 1.0, 10.0]):\n"
            "    A = X.T @ X + alpha * np.eye(X.shape[1])\n"
            "    results[alpha] = np.linalg.solve(A, X.T @ y)\n"
            "    checkpoint_every(2, progress=f'{i + 1}/4')\nlen(results)")
    kernel.execute(code, best, new_state_name="sweep", exec_id="sweep-job", wait=False)
    done = kernel.execution("sweep-job", wait=120)
    print(f"   {done['status']}, checkpoints "
          f"{[point['state_name'] for point in done['checkpoints']]}")


def portable(kernel):
    heading("Export and import", "target: the diff of a state and its imported copy is empty")
    archive = io.BytesIO()
    kernel.export_state("plot", archive)
    imported = kernel.import_state("plot_copy", archive.getvalue())
    diff = kernel.diff("plot", "plot_copy")
    empty = not (diff["added"] or diff["removed"] or diff["changed"])
    print(f"   {len(archive.getvalue()) / 1e6:.1f} MB, lost {imported['lost'] or 'none'}; "
          f"diff {'empty' if empty else diff} {verdict(empty)}")
    return empty


def crash(kernel):
    heading("A crash on purpose", "what its record keeps")
    reply = kernel.execute("print('about to crash', flush=True)\nimport os\nos._exit(3)",
                           "loaded", exec_id="crasher")
    print(f"   {reply['error']['ename']}: output {reply['output'][:-1]}")


def server_process(server):
    return [pid for pid in harness.tree_pids(server.pid)
            if pid != server.pid and harness._parent_pid(pid) == server.pid]


def forced_stop(kernel, server, size):
    heading("A forced stop", f"an SVD of {size} x {size} in LAPACK, which no interrupt reaches")
    states = kernel.states()["states"]
    kernel.execute(f"a = np.random.default_rng(0).normal(size=({size}, {size}))\n"
                   "print('decomposing', flush=True)\nu, s, vt = np.linalg.svd(a)", "loaded",
                   exec_id="svd", wait=False, store=False)
    deadline = time.monotonic() + 60
    while "decomposing" not in str(kernel.execution("svd")["output"]):
        if time.monotonic() > deadline:
            raise harness.ServerFailed("the SVD cell did not start")
        time.sleep(0.05)
    time.sleep(0.5)  # well into the SVD (over 3 s on this machine's two cores)
    if kernel.execution("svd")["status"] != "running":
        raise harness.ServerFailed(f"the SVD of {size} x {size} ended before the forced stop: "
                                   "a larger one is needed on this machine")
    [old] = server_process(server)
    asked = time.perf_counter()
    reply = kernel.interrupt("svd", force=True)
    answered = time.perf_counter() - asked
    while os.path.exists(f"/proc/{old}") and harness._parent_pid(old) == server.pid:
        if time.perf_counter() - asked > 60:
            raise harness.ServerFailed(f"the forced stop ({reply}) left the old process running")
        time.sleep(0.005)
    ended = time.perf_counter() - asked
    kernel.close()
    record = None
    while record is None:
        try:
            record = kernel.execution("svd")
        except (OSError, ClientError):  # the old process's connection
            if time.perf_counter() - asked > 60:
                raise
            kernel.close()
    reported = time.perf_counter() - asked
    kept = kernel.states()["states"] == states
    print(f"   {reply}: answered in {answered:.2f} s, the old process (and the SVD) ended "
          f"{ended:.2f} s, the new one reported it {record['status']} "
          f"({record['interrupt_reason']}) {reported:.2f} s after the request; output "
          f"{record['output'][:-1]}")
    print(f"   every state kept: {kept}; target: ended within {FORCE_SECONDS} s "
          f"{verdict(reply.get('replaced') and ended <= FORCE_SECONDS and kept)}")
    return ended, kept


def tidy(kernel, base_url, token):
    heading("The tree", "GET /states?format=text, then one DELETE per branch")
    names = kernel.states()["states"]
    query = urllib.parse.urlencode({"format": "text", "token": token})
    conn = kernel._connection(30)[0]
    conn.request("GET", f"/states?{query}", headers=kernel._headers)
    tree = conn.getresponse().read().decode()
    print(f"   {len(names)} states:\n" + "\n".join("   | " + line for line in tree.splitlines()))
    requests = 0
    for branch in ("clean_drop", "clean_clip", "plot_copy", "reread"):
        try:
            gone = kernel.delete(branch, descendants=True)
            requests += 1
            print(f"   DELETE /states/{branch}?descendants=true: {1 + len(gone['descendants'])}"
                  " states")
        except NotFound:
            pass
    print(f"   {requests} requests for {requests} branches; {len(kernel.states()['states'])} "
          "states left")
    return requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 rows, a smaller SVD")
    args = parser.parse_args()
    rows, size = (20_000, 2500) if args.quick else (200_000, 3000)
    with tempfile.TemporaryDirectory() as work:
        make_csv(os.path.join(work, "sales.csv"), rows)
        with harness.running("product", ["--workdir", work]) as server:
            base_url = f"http://127.0.0.1:{server.port}"
            kernel = Client(base_url, harness.TOKEN, timeout=600)
            kernel.upload("sales.csv", os.path.join(work, "sales.csv"))
            try:
                ratio = explore(kernel)
                mistakes(kernel, base_url, harness.TOKEN)
                best = branches(kernel)
                sweep(kernel, best)
                empty = portable(kernel)
                crash(kernel)
                ended, kept = forced_stop(kernel, server, size)
                requests = tidy(kernel, base_url, harness.TOKEN)
            except (harness.ServerFailed, OSError, ClientError, BadRequest) as exc:
                print(f"\nthe session failed: {harness.failure(exc)}\n"
                      f"{server.log_text()[-3000:]}")
                return
    print(f"\nTargets: describe {ratio:.2f}x {verdict(ratio <= DESCRIBE_RATIO)}; import diff "
          f"{'empty' if empty else 'not empty'} {verdict(empty)}; forced stop {ended:.2f} s, "
          f"states kept {kept} {verdict(ended <= FORCE_SECONDS and kept)}; cleaning "
          f"{requests} requests for {requests} branches")


if __name__ == "__main__":
    main()
    harness.finish()
