"""Rich output as Jupyter's inline mode shows it: mime bundles, display(), and figures."""

import base64

import pytest

from helpers import WAIT, in_background, ok, result, stdout, wait_until_running
from snapshot_kernel.kernel import SnapshotKernel


def items(reply, kind):
    return [item for item in reply["output"] if item["output_type"] == kind]


class Rich:
    SOURCE = ("class Rich:\n"
              "    def __repr__(self): return 'Rich()'\n"
              "    def _repr_html_(self): return '<b>rich</b>'\n"
              "    def _repr_markdown_(self): return '**rich**'\n"
              "    def _repr_latex_(self): return r'$\\rho$'\n"
              "    def _repr_json_(self): return {'rich': True}\n"
              "    def _repr_svg_(self): return '<svg/>'\n"
              "    def _repr_png_(self): return b'\\x89PNG fake'\n")


def test_the_last_expression_gives_every_mime_its_repr_methods_give(kernel):
    reply = ok(kernel, Rich.SOURCE + "Rich()")
    assert items(reply, "execute_result")[0]["data"] == {
        "text/plain": "Rich()", "text/html": "<b>rich</b>", "text/markdown": "**rich**",
        "text/latex": "$\\rho$", "application/json": {"rich": True}, "image/svg+xml": "<svg/>",
        "image/png": base64.b64encode(b"\x89PNG fake").decode()}


def test_a_mimebundle_method_and_a_failing_repr_method(kernel):
    code = ("class B:\n"
            "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
            "        return {'text/html': '<i>b</i>'}, {'text/html': {'isolated': True}}\n"
            "    def _repr_markdown_(self): raise ValueError('no markdown')\n"
            "B()")
    reply = ok(kernel, code)
    shown = items(reply, "execute_result")[0]
    assert shown["data"]["text/html"] == "<i>b</i>" and "text/markdown" not in shown["data"]
    assert shown["metadata"] == {"text/html": {"isolated": True}}
    assert "_repr_markdown_ failed: ValueError: no markdown" in "".join(
        item["text"] for item in items(reply, "stream"))


def test_display_shows_objects_in_order_with_printed_text(kernel):
    reply = ok(kernel, Rich.SOURCE + "print('before')\ndisplay(Rich(), 42)\nprint('after')")
    kinds = [(item["output_type"], item.get("text") or item["data"]["text/plain"])
             for item in reply["output"]]
    assert kinds == [("stream", "before\n"), ("display_data", "Rich()"),
                     ("display_data", "42"), ("stream", "after\n")]


def test_a_state_may_define_its_own_display(kernel):
    parent = ok(kernel, "def display(x):\n    print('mine', x)")["state_name"]
    assert stdout(ok(kernel, "display(1)", parent)) == "mine 1\n"


def test_text_items_are_cut_to_the_output_limit(kernel):
    reply = ok(kernel, "class H:\n    def _repr_html_(self): return 'x' * 1000\nH()",
               max_output=100)
    html = items(reply, "execute_result")[0]["data"]["text/html"]
    assert len(html) < 200 and "characters omitted" in html


def test_underscore_holds_the_last_result_in_the_state_it_made(kernel):
    first = ok(kernel, "6 * 7")["state_name"]
    assert result(ok(kernel, "_ + 1", first)) == "43"
    assert result(ok(kernel, "x = 1", first)) is None


# -- pandas ---------------------------------------------------------------------------------

def test_a_frame_as_last_expression_gives_html_and_text(kernel):
    pytest.importorskip("pandas")
    reply = ok(kernel, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    data = items(reply, "execute_result")[0]["data"]
    assert "<table" in data["text/html"] and data["text/plain"].split() == ["a", "0", "1", "1", "2"]


# -- figures --------------------------------------------------------------------------------

@pytest.fixture
def pyplot():
    pytest.importorskip("matplotlib")
    return "import matplotlib.pyplot as plt\n"


def png_size(item):
    return item["metadata"]["image/png"]["width"], item["metadata"]["image/png"]["height"]


def test_a_cell_that_plots_shows_its_figure_and_closes_it(kernel, pyplot):
    reply = ok(kernel, pyplot + "plt.plot([1, 3, 2])\nprint('drawn')")
    [figure] = items(reply, "display_data")
    assert base64.b64decode(figure["data"]["image/png"]).startswith(b"\x89PNG")
    assert figure["data"]["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    assert 300 < png_size(figure)[0] < 700
    assert stdout(ok(kernel, "print(plt.get_fignums())", reply["state_name"])) == "[]\n"


def test_show_displays_at_once_and_later_figures_come_after(kernel, pyplot):
    code = pyplot + "plt.plot([1])\nplt.show()\nprint('between')\nplt.figure()\nplt.plot([2]);"
    reply = ok(kernel, code)
    kinds = [item["output_type"] for item in reply["output"]]
    assert kinds == ["display_data", "stream", "display_data"]


def test_an_empty_figure_shows_as_text_only(kernel, pyplot):
    reply = ok(kernel, pyplot + "fig = plt.figure()")
    assert items(reply, "display_data")[0]["data"] == {"text/plain": "<Figure size 640x480 with 0 Axes>"}


def test_a_failing_cell_still_shows_its_figures(kernel, pyplot):
    reply = kernel.execute(pyplot + "plt.plot([1, 2])\n1 / 0", "initial")
    assert reply["error"]["ename"] == "ZeroDivisionError"
    assert len(items(reply, "display_data")) == 1


def test_images_over_the_image_limit_become_a_note(pyplot):
    kernel = SnapshotKernel(image_limit=100)
    reply = ok(kernel, pyplot + "plt.plot([1, 2])")
    data = items(reply, "display_data")[0]["data"]
    assert "image/png" not in data
    assert "bytes omitted: larger than the 100-byte image limit (--max-image)" in data["text/plain"]


def test_two_cells_plotting_at_once_each_get_their_own_figures(kernel, pyplot, signal_name):
    ok(kernel, pyplot)
    slow = in_background(kernel, pyplot + f"import helpers\nplt.figure()\nplt.plot([1])\n"
                                         f"helpers.{signal_name}.wait({WAIT})\n"
                                         "print(plt.get_fignums())", exec_id="slow")
    wait_until_running(kernel, "slow")
    fast = ok(kernel, pyplot + "plt.plot([2])\nplt.plot([3])\nprint(plt.get_fignums())")
    import helpers
    getattr(helpers, signal_name).set()
    assert stdout(fast) == "[1]\n" and len(items(fast, "display_data")) == 1
    assert stdout(slow()) == "[1]\n" and len(items(slow(), "display_data")) == 1


def test_threads_started_by_a_cell_share_its_figures(kernel, pyplot):
    code = (pyplot + "import threading\n"
            "t = threading.Thread(target=lambda: plt.plot([1, 2]))\nt.start(); t.join()\n"
            "print(len(plt.get_fignums()))")
    reply = ok(kernel, code)
    assert stdout(reply) == "1\n" and len(items(reply, "display_data")) == 1


def test_pyplot_outside_cells_is_left_alone(kernel, pyplot):
    import matplotlib.pyplot as plt
    ok(kernel, pyplot + "plt.plot([1])")
    figure = plt.figure()
    try:
        assert plt.get_fignums() == [figure.number]
    finally:
        plt.close(figure)
