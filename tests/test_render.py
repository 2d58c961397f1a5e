"""render_text: what a model reads for a reply's outputs."""

import base64

import pytest

from snapshot_kernel.render import render_text


def out(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def result(data, metadata=None, kind="execute_result"):
    return {"output_type": kind, "data": data, "metadata": metadata or {}}


def display(data, metadata=None):
    return result(data, metadata, kind="display_data")


def error(traceback, ename="ZeroDivisionError", evalue="division by zero"):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": traceback}


def png(width, height, size):
    """A base64 PNG of ``size`` bytes whose header says ``width`` x ``height``."""
    header = (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR"
              + width.to_bytes(4, "big") + height.to_bytes(4, "big"))
    return base64.b64encode(header + bytes(size - len(header))).decode()


ZERO_DIVISION = error(["Traceback (most recent call last):\n",
                       '  File "<cell-4>", line 2, in <module>\n    1 / 0\n    ~~^~~\n',
                       "ZeroDivisionError: division by zero\n"])
LONG_CALL = "result = compute(" + ", ".join(f"argument_{i}" for i in range(30)) + ")"
LONG_PATH = "/very/long/site-packages/path/" * 8 + "module.py"
LONG_MESSAGE = "could not convert: " + "x" * 300

CASES = {
    "nothing": ([], ""),
    "one stream, bare": ([out("hello\n")], "hello\n"),
    "one result, bare": ([result({"text/plain": "42"})], "42"),
    "several, tagged": (
        [out("hello\n"), result({"text/plain": "42"})],
        "<stdout>\nhello\n</stdout>\n<execute_result>\n42\n</execute_result>"),
    "outputs in the order they happened, a stream's runs joined": (
        [out("warn\n", "stderr"), out("a\n"), out("b\n"), out("more\n", "stderr"), out("c")],
        "<stderr>\nwarn\n</stderr>\n<stdout>\na\nb\n</stdout>\n<stderr>\nmore\n</stderr>\n"
        "<stdout>\nc\n</stdout>"),
    "displays where they came, the result and error where they came": (
        [out("x\n"), display({"text/markdown": "# One"}), out("e\n", "stderr"),
         display({"text/plain": "two"}), out("y\n"), error(["Boom: no\n"], "Boom", "no")],
        '<stdout>\nx\n</stdout>\n<display_data mime="text/markdown">\n# One\n</display_data>\n'
        "<stderr>\ne\n</stderr>\n<display_data>\ntwo\n</display_data>\n<stdout>\ny\n</stdout>\n"
        "<error>\nBoom: no\n</error>"),
    "an empty piece does not split a stream": ([out("a\n"), out("", "stderr"), out("b\n")],
                                               "a\nb\n"),
    "markdown preferred": (
        [result({"text/plain": "p", "text/html": "<b>h</b>", "text/markdown": "**m**"})], "**m**"),
    "then plain text, not HTML (a DataFrame)": (
        [result({"text/plain": "   a\n0  1", "text/html": "<style>td {}</style><table/>"})],
        "   a\n0  1"),
    "html when plain is a default repr, without styles and scripts": (
        [result({"text/plain": "<pandas.io.formats.style.Styler object at 0x7f0a>",
                 "text/html": "<style type='text/css'>\n#T td {}\n</style>\n<table/>"
                              "<SCRIPT>x()</script>"})], "<table/>"),
    "html of an object whose repr names no address": (
        [result({"text/plain": "<IPython.core.display.HTML object>", "text/html": "<b>h</b>"})],
        "<b>h</b>"),
    "then javascript": ([result({"text/plain": "<a.B object>", "application/javascript": "f()"})],
                        "f()"),
    "then latex": ([result({"text/plain": "<a.B object>", "text/latex": "$x$"})], "$x$"),
    "a default repr when nothing else says more": (
        [result({"text/plain": "<a.B object>", "text/html": "<style>x</style>"})], "<a.B object>"),
    "mime attribute when not text/plain": (
        [out("a\n"), result({"text/plain": "<a.B object>", "text/html": "<i>h</i>"})],
        '<stdout>\na\n</stdout>\n<execute_result mime="text/html">\n<i>h</i>\n</execute_result>'),
    "empty outputs disappear": (
        [out(""), out("\x1b[0m", "stderr"), result({"application/json": {"a": 1}}),
         result({"text/plain": "kept"})], "kept"),
    "progress bar collapses to its last state": (
        [out("  0%|          | 0/3\r 33%|###       | 1/3\r100%|##########| 3/3\ndone\n")],
        "100%|##########| 3/3\ndone\n"),
    "carriage return overwrites like a terminal": ([out("Downloading 50%\rDone")],
                                                   "Doneloading 50%"),
    "erase-in-line after a carriage return": ([out("Downloading 50%\r\x1b[KDone\n")], "Done\n"),
    "backspaces applied": ([out("abc\b\bX\n")], "aXc\n"),
    "windows line endings": ([out("a\r\nb\r\n")], "a\nb\n"),
    "ANSI colours stripped": ([out("\x1b[1;31mError\x1b[0m: bad\n"),
                              result({"text/plain": "\x1b[32m'ok'\x1b[39m"})],
                             "<stdout>\nError: bad\n</stdout>\n<execute_result>\n'ok'\n</execute_result>"),
    "alternate screen dropped": ([out("before\n\x1b[?1049hfull-screen junk\x1b[?1049lafter\n")],
                                 "before\nafter\n"),
    "output-limit marker kept": (
        [out("head\n[... 500 characters of stdout omitted ...]\ntail\n")],
        "head\n[... 500 characters of stdout omitted ...]\ntail\n"),
    "notebook list-of-lines values": ([result({"text/plain": ["a\n", "b"]})], "a\nb"),
    "short traceback unchanged": (
        [ZERO_DIVISION],
        'Traceback (most recent call last):\n  File "<cell-4>", line 2, in <module>\n'
        "    1 / 0\n    ~~^~~\nZeroDivisionError: division by zero"),
    "long traceback lines cut, File lines and the message whole": (
        [error(["Traceback (most recent call last):",
                f'  File "{LONG_PATH}", line 9, in compute',
                f"    {LONG_CALL}",
                "    " + "^" * len(LONG_CALL),
                f"ValueError: {LONG_MESSAGE}"], "ValueError", LONG_MESSAGE)],
        f'Traceback (most recent call last):\n  File "{LONG_PATH}", line 9, in compute\n'
        f"    {LONG_CALL[:175]}…\nValueError: {LONG_MESSAGE}"),
    "Jupyter tracebacks: ANSI stripped, lines joined": (
        [error(["\x1b[0;31mKeyError\x1b[0m   Traceback", "\x1b[0;31mKeyError\x1b[0m: 'a'"],
               "KeyError", "'a'")],
        "KeyError   Traceback\nKeyError: 'a'"),
    "error without a traceback": ([error([], "KernelReset", "reset while running")],
                                  "KernelReset: reset while running"),
    "image with its size from metadata": (
        [display({"image/png": png(10, 10, 23 * 1024), "text/plain": "<Figure>"},
                 {"image/png": {"width": 640, "height": 480}})],
        "[image/png 640x480, 23 KB]"),
    "image size from the PNG header": ([display({"image/png": png(800, 600, 3000)})],
                                       "[image/png 800x600, 3 KB]"),
    "image without dimensions": ([display({"image/jpeg": base64.b64encode(bytes(700)).decode()})],
                                 "[image/jpeg, 700 B]"),
    "svg sized in bytes": ([display({"image/svg+xml": "<svg/>"})], "[image/svg+xml, 6 B]"),
    "an image's note before its plain text": (
        [display({"image/png": png(1, 1, 100), "text/plain": "<Figure size 1x1 with 1 Axes>"})],
        "[image/png 1x1, 100 B]"),
    "image among several outputs": (
        [out("plotting\n"), display({"image/png": png(64, 48, 2 * 1024 * 1024)})],
        "<stdout>\nplotting\n</stdout>\n"
        '<display_data mime="image/png">\n[image/png 64x48, 2.0 MB]\n</display_data>'),
}


@pytest.mark.parametrize("outputs, expected", CASES.values(), ids=CASES.keys())
def test_render_text(outputs, expected):
    assert render_text(outputs) == expected


def test_tb_maxlen_is_a_parameter():
    rendered = render_text([error(["  " + "y" * 30, "E: done"], "E", "done")], tb_maxlen=10)
    assert rendered == "  yyyyyyy…\nE: done"


def test_carets_under_a_short_line_are_kept():
    assert render_text([ZERO_DIVISION], tb_maxlen=12).splitlines()[3] == "    ~~^~~"
