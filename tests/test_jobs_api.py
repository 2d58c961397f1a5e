"""Jobs over HTTP, through WebTest: executions that hold no connection, their records
and full output, concise text for models, and a waiting client that hangs up."""

import threading

import pytest
import webtest

import helpers
from conftest import TOKEN
from helpers import WAIT, wait_until_running
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from snapshot_kernel.web.server import CLIENT_GONE


def test_an_execute_that_does_not_wait_answers_202_with_where_to_look(app, signal_name):
    code = f"import helpers\nprint('working')\nhelpers.{signal_name}.wait({WAIT})\n6 * 7"
    started = app.post_json("/execute", {"code": code, "state_name": "initial",
                                         "exec_id": "job", "wait": False})
    assert started.status_int == 202 and started.headers["Location"] == "/executions/job"
    assert started.json == {"exec_id": "job", "status": "running", "location": "/executions/job"}
    running = app.get("/executions/job").json
    assert running["status"] == "running" and running["reply"] is None
    getattr(helpers, signal_name).set()
    done = app.get("/executions/job?wait=10").json
    assert done["status"] == "completed"
    assert done["reply"]["output"][-1]["data"]["text/plain"] == "42"
    assert done["reply"]["state_name"] in app.get("/states").json["states"]
    assert app.get("/executions").json["finished"][0]["exec_id"] == "job"


def test_an_unknown_execution_is_404(app):
    response = app.get("/executions/nope", expect_errors=True)
    assert response.status_int == 404 and "no execution 'nope'" in response.json["error"]


BAD_QUERIES = ["/executions/x?wait=-1", "/executions/x?wait=1000", "/executions/x?wait=soon",
               "/executions/x/output?stream=stdin", "/executions/x/output?offset=-5",
               # Empty is not absent: GET /openapi.json says a number, or a stream's name.
               "/executions/x?wait=", "/executions/x/output?offset=",
               "/executions/x/output?limit=", "/executions/x/output?stream=",
               # Not UTF-8: Bottle's getunicode answers as if the parameter were absent.
               "/executions/x?wait=%FF", "/executions/x/output?stream=%FF",
               "/executions/x/output?offset=%FF"]


@pytest.mark.parametrize("path", BAD_QUERIES)
def test_a_bad_query_is_400(app, path):
    app.post_json("/execute", {"code": "1", "state_name": "initial", "exec_id": "x"})
    response = app.get(path, expect_errors=True)
    assert response.status_int == 400 and response.content_type == "application/json"


def test_the_full_output_pages_through_what_the_reply_cut(app):
    code = "for i in range(3000):\n    print(f'{i:05d}')"
    reply = app.post_json("/execute", {"code": code, "state_name": "initial", "exec_id": "loud",
                                       "max_output": 100}).json
    where = reply["truncated"]["stdout"]["location"]
    first = app.get(where + "&offset=0&limit=12").json
    assert first["text"] == "00000\n00001\n" and first["total"] == 18000
    rest = app.get(where + f"&offset={first['next_offset']}&limit=100000").json
    assert first["text"] + rest["text"] == "".join(f"{i:05d}\n" for i in range(3000))


TEXT_REQUESTS = {
    "format field": ({"format": "text"}, {}),
    "Accept header": ({}, {"HTTP_ACCEPT": "text/plain"}),
}


@pytest.mark.parametrize("fields, environ", TEXT_REQUESTS.values(), ids=TEXT_REQUESTS.keys())
def test_text_for_models(app, fields, environ):
    response = app.post_json("/execute", {"code": "print('hi')\n41 + 1", "state_name": "initial",
                                          "new_state_name": "t", **fields}, extra_environ=environ)
    assert response.content_type == "text/plain"
    assert response.text == ("<stdout>\nhi\n</stdout>\n<execute_result>\n42\n</execute_result>\n"
                             "[new state 't' (from 'initial')]")
    assert response.headers["X-State-Name"] == "t" and response.headers["X-Exec-Id"]


def test_text_of_a_failing_cell_names_the_error(app):
    response = app.post_json("/execute", {"code": "1 / 0", "state_name": "initial",
                                          "format": "text"})
    assert response.headers["X-Error-Name"] == "ZeroDivisionError"
    assert "X-State-Name" not in response.headers
    assert response.text.endswith("ZeroDivisionError: division by zero\n"
                                  "[ZeroDivisionError, no state stored ('initial' is unchanged)]")


def test_a_single_output_comes_back_bare(app):
    response = app.post_json("/execute", {"code": "6 * 7", "state_name": "initial",
                                          "new_state_name": "six", "format": "text"})
    assert response.text == "42\n[new state 'six' (from 'initial')]"


def text_reply(app, code, **fields):
    return app.post_json("/execute", {"code": code, "state_name": "initial", "format": "text",
                                      **fields}).text


def test_the_closing_line_gives_the_exact_route_that_pages_a_cut_stream(app):
    text = text_reply(app, "for i in range(1000):\n    print(i)", exec_id="a b?c%", max_output=40)
    route = text.splitlines()[-1].split("stdout was cut: GET ", 1)[1].split(" pages")[0]
    assert route == "/executions/a%20b%3Fc%25/output?stream=stdout"
    assert app.get(route + "&offset=0&limit=4").json["text"] == "0\n1\n"
    assert text.index("999\n") < text.index("[new state")


def test_the_closing_line_names_checkpoints_and_what_a_crash_would_lose(tmp_path):
    kernel = SnapshotKernel(state_dir=str(tmp_path))
    app = webtest.TestApp(create_app(kernel, TOKEN))
    app.authorization = ("Bearer", TOKEN)
    text = text_reply(app, "import threading\nlock = threading.Lock()\ncheckpoint()\n"
                           "checkpoint();", new_state_name="held")
    assert text == ("[new state 'held' (from 'initial'); checkpoints: 'held@1', 'held@2'; "
                    "not saved to the state directory, so a crash or restart loses: lock]")
    kernel.close()


def test_a_dataframe_reads_as_its_plain_table_not_its_html(app):
    import pandas
    frame = pandas.DataFrame({"a": [1.5, 2.0, 3.25], "b": ["x", "y", "z"]})
    text = text_reply(app, "import pandas\npandas.DataFrame({'a': [1.5, 2.0, 3.25], "
                           "'b': ['x', 'y', 'z']})", new_state_name="frame")
    assert text == repr(frame) + "\n[new state 'frame' (from 'initial')]"


def test_an_unknown_format_is_400(app):
    response = app.post_json("/execute", {"code": "1", "state_name": "initial", "format": "xml"},
                             expect_errors=True)
    assert response.status_int == 400 and "json, text" in response.json["error"]


def test_a_waiting_client_that_hangs_up_interrupts_its_cell(app, kernel, signal_name):
    gone = threading.Event()
    code = f"import helpers\nhelpers.{signal_name}.wait({WAIT})"
    replies = []
    thread = threading.Thread(target=lambda: replies.append(app.post_json(
        "/execute", {"code": code, "state_name": "initial", "exec_id": "hung"},
        extra_environ={CLIENT_GONE: gone.is_set}).json))
    thread.start()
    wait_until_running(kernel, "hung")
    gone.set()
    thread.join(WAIT)
    assert replies[0]["error"]["ename"] == "KeyboardInterrupt"
    assert kernel.execution("hung")["interrupt_reason"] == "disconnect"
