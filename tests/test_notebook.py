"""A data-science notebook, cell by cell through the HTTP API, against one Python process.

The cells are what a tutorial does with numpy, pandas and matplotlib: build
data, clean it, group it, plot it, fit a line, keep objects in arrays and
frames. Each cell runs on the state the previous one stored, and every fifth
one also on a branch of that state (then the notebook goes on from either,
by turns). What each cell prints and its last value's text must be what the
same cells print in one plain namespace, and each cell shows as many figures
as Jupyter's inline backend would (the figures pyplot has open when it ends).
"""

import base64
import contextlib
import io

import pytest

pytest.importorskip("pandas")
plt = pytest.importorskip("matplotlib.pyplot")

CELLS = [
    "import numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
    "rng = np.random.default_rng(42)",
    "n = 200\nheights = rng.normal(170, 8, n).round(1)\nweights = (heights - 100) * 0.9 + "
    "rng.normal(0, 5, n)\nheights[:5]",
    "df = pd.DataFrame({'height': heights, 'weight': weights.round(1),\n"
    "                   'group': rng.choice(['a', 'b', 'c'], n)})\ndf.head()",
    "df.describe().round(2)",
    "df.loc[df.height > 185, 'tall'] = True\ndf['tall'] = df['tall'].fillna(False).astype(bool)\n"
    "df.tall.sum()",
    "summary = df.groupby('group').agg(mean_height=('height', 'mean'), count=('weight', 'size'))\n"
    "summary.round(2)",
    "plt.hist(df.height, bins=20)\nplt.title('heights');",
    "fig, axes = plt.subplots(1, 2, figsize=(8, 3))\naxes[0].scatter(df.height, df.weight, s=4)\n"
    "axes[1].boxplot([df[df.group == g].weight for g in 'abc'])\nfig.tight_layout()",
    "axes[0].set_title('weight by height')\nprint(axes.shape, axes[0].figure is fig, "
    "len(fig.axes))",
    "slope, intercept = np.polyfit(df.height, df.weight, 1)\nprint(round(slope, 3), "
    "round(intercept, 1))",
    "residuals = df.weight - (slope * df.height + intercept)\nview = residuals.values[:10]\n"
    "float(np.abs(residuals).mean().round(3))",
    "df['bmi'] = (df.weight / (df.height / 100) ** 2).round(1)\ndf.sort_values('bmi').tail(3)",
    "pivot = df.pivot_table(index='group', columns='tall', values='bmi', aggfunc='mean')\n"
    "pivot.round(2)",
    "records = df.head(3).to_dict('records')\nrecords[0]['note'] = ['first']\nprint(records[0])",
    "matrix = np.arange(12).reshape(3, 4)\ncol = matrix[:, 1]\ncol[:] = -1\nprint(matrix)",
    "class Person:\n    def __init__(self, row):\n        self.height = row.height\n"
    "    def describe(self):\n        return f'{self.height} cm'\n"
    "people = np.array([Person(row) for row in df.head(4).itertuples()], dtype=object)\n"
    "print([p.describe() for p in people])",
    "print(isinstance(people[0], Person), people[1].describe())",
    "df['group'] = df['group'].astype('category')\nprint(df.dtypes.astype(str).to_dict())",
    "counts = df.group.value_counts().sort_index()\ncounts.plot(kind='bar')\n"
    "plt.ylabel('people');",
    "dates = pd.date_range('2024-01-01', periods=6, freq='W')\n"
    "ts = pd.Series(np.arange(6) ** 2, index=dates)\nts.resample('MS').sum()",
    "ts.index.names = ['week']\nprint(ts.index.names, ts.iloc[-1])",
    "merged = summary.reset_index().merge(pivot.reset_index(), on='group')\n"
    "merged.columns.tolist()",
    "print(view[:3].round(2), np.shares_memory(view, residuals.values))",
    "fig",
    "weights.sort()\nprint(weights[:3].round(1), df.weight.iloc[:3].tolist())",
]
BRANCH_EVERY = 5


def plain_python(cells):
    """Per cell: ``(stdout, last value's repr or None, figures shown)`` in one namespace,
    figures counted and closed at each cell's end as the inline backend does."""
    import ast
    namespace, results = {"__name__": "__main__"}, []
    for code in cells:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None and code.rstrip().endswith(";"):
                tree.body.append(last)
                last = None
            exec(compile(tree, "<cell>", "exec"), namespace)
            value = (eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
                     if last is not None else None)
        shown = 1 if value is not None and isinstance(value, plt.Figure) else 0
        shown += len(plt.get_fignums())
        plt.close("all")
        results.append((out.getvalue(), None if value is None else repr(value), shown))
    return results


def through_server(app, cells):
    """The same per cell through POST /execute, branching every fifth cell."""
    results, state = [], "initial"
    for number, code in enumerate(cells):
        reply = app.post_json("/execute", {"code": code, "state_name": state}).json
        assert reply["error"] is None, "".join(reply["error"]["traceback"])
        if number % BRANCH_EVERY == BRANCH_EVERY - 1:
            twin = app.post_json("/execute", {"code": code, "state_name": state}).json
            assert _seen(twin) == _seen(reply)
            reply = twin if number % (2 * BRANCH_EVERY) == BRANCH_EVERY - 1 else reply
        state = reply["state_name"]
        results.append(_seen(reply))
    return results


def _seen(reply):
    stdout = "".join(item["text"] for item in reply["output"]
                     if item["output_type"] == "stream" and item["name"] == "stdout")
    result = next((item["data"]["text/plain"] for item in reply["output"]
                   if item["output_type"] == "execute_result"), None)
    images = [item for item in reply["output"] if item["output_type"] in
              ("display_data", "execute_result") and "image/png" in item["data"]]
    for item in images:
        assert base64.b64decode(item["data"]["image/png"]).startswith(b"\x89PNG")
    return stdout, result, len(images)


def test_the_notebook_shows_what_one_python_process_shows(app):
    expected = plain_python(CELLS)
    for number, (got, want) in enumerate(zip(through_server(app, CELLS), expected), 1):
        assert got == want, f"cell {number}:\n{CELLS[number - 1]}"
