"""The HTTP API through WebTest: the token check, the one JSON error shape, the replies."""

import base64
import json
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

import pytest
import webtest

import helpers
from conftest import TOKEN
from snapshot_kernel.main import create_app
from snapshot_kernel.web.server import CLIENT_GONE


def wire(text):
    """``text`` as a WSGI server hands over its UTF-8 bytes: one latin-1 char a byte (PEP 3333)."""
    return text.encode("utf-8").decode("latin-1")


def send(client, method, path, body=None, **environ):
    """Any request; ``body`` is bytes as they are, or an object sent as JSON."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    return client.request(path, method=method, body=body or b"", environ=environ,
                          expect_errors=True)


def assert_json_error(response, status):
    assert response.status_int == status, response.body
    assert response.content_type == "application/json"
    assert isinstance(response.json["error"], str) and response.json["error"]


def execute(app, code, state_name="initial", **fields):
    return app.post_json("/execute", dict(code=code, state_name=state_name, **fields)).json


def state_names(app):
    return app.get("/states").json["states"]


@pytest.fixture
def kept(kernel):
    """A state ``keep`` (x = 1), made without HTTP; returns its description."""
    kernel.execute("x = 1", "initial", new_state_name="keep")
    return kernel.describe("keep")


# -- the token ------------------------------------------------------------------------

ROUTES = [
    ("GET", "/states", None),
    ("GET", "/states/keep", None),
    ("DELETE", "/states/keep", None),
    ("POST", "/execute", {"code": "y = 2", "state_name": "keep", "new_state_name": "new"}),
    ("POST", "/reset", None),
    ("POST", "/interrupt", {"exec_id": "some-run"}),
    ("GET", "/executions", None),
    ("GET", "/no-such-route", None),
]


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_every_route_without_a_token_is_401_and_changes_nothing(anonymous, kernel, kept,
                                                                method, path, body):
    response = send(anonymous, method, path, body)
    assert_json_error(response, 401)
    assert "Bearer" in response.headers["WWW-Authenticate"]
    assert kernel.state_names() == ["initial", "keep"]
    assert kernel.describe("keep") == kept


def test_an_execute_without_a_token_runs_nothing(anonymous, kernel, tmp_path):
    marker = tmp_path / "ran"
    response = send(anonymous, "POST", "/execute",
                    {"code": f"open({str(marker)!r}, 'w').close()", "state_name": "initial"})
    assert_json_error(response, 401)
    assert not marker.exists()
    assert kernel.state_names() == ["initial"]


def test_an_interrupt_without_a_token_leaves_the_cell_running(anonymous, kernel, tmp_path):
    started = tmp_path / "started"
    code = f"open({str(started)!r}, 'w').close()\nwhile True: pass"
    replies = []
    runner = threading.Thread(target=lambda: replies.append(
        kernel.execute(code, "initial", exec_id="spin")), daemon=True)
    runner.start()
    deadline = time.monotonic() + 10
    while not started.exists():
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.01)
    assert_json_error(send(anonymous, "POST", "/interrupt", {"exec_id": "spin"}), 401)
    runner.join(0.3)
    assert runner.is_alive()
    kernel.interrupt("spin")
    runner.join(10)
    assert replies[0]["error"]["ename"] == "KeyboardInterrupt"


WRONG_TOKENS = {
    "wrong bearer": {"HTTP_AUTHORIZATION": "Bearer wrong"},
    "bearer prefix of the token": {"HTTP_AUTHORIZATION": "Bearer " + wire(TOKEN[:-1])},
    "bearer token plus a char": {"HTTP_AUTHORIZATION": "Bearer " + wire(TOKEN + "x")},
    "bearer without a value": {"HTTP_AUTHORIZATION": "Bearer "},
    "basic scheme": {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(TOKEN.encode()).decode()},
    "bearer outside latin-1": {"HTTP_AUTHORIZATION": "Bearer " + wire("wrong-\u20ac")},
    "bearer not utf-8": {"HTTP_AUTHORIZATION": "Bearer \xff\xfe"},
    "wrong query": {"QUERY_STRING": "token=wrong"},
    "empty query": {"QUERY_STRING": "token="},
}


@pytest.mark.parametrize("environ", WRONG_TOKENS.values(), ids=WRONG_TOKENS)
def test_a_wrong_token_is_401(anonymous, environ):
    response = send(anonymous, "GET", "/states", **environ)
    assert_json_error(response, 401)
    assert "Bearer" in response.headers["WWW-Authenticate"]


RIGHT_TOKENS = {
    "bearer sent as utf-8": {"HTTP_AUTHORIZATION": "Bearer " + wire(TOKEN)},
    "lower-case bearer scheme": {"HTTP_AUTHORIZATION": "bearer " + wire(TOKEN)},
    "query": {"QUERY_STRING": "token=" + urllib.parse.quote(TOKEN)},
}


@pytest.mark.parametrize("environ", RIGHT_TOKENS.values(), ids=RIGHT_TOKENS)
def test_the_token_is_accepted_as_bearer_or_query(anonymous, environ):
    response = send(anonymous, "GET", "/states", **environ)
    assert response.status_int == 200, response.body
    assert response.json == {"states": ["initial"]}


def test_the_token_fixture_client_is_accepted(app):
    assert app.get("/states").json == {"states": ["initial"]}


def test_a_non_ascii_token_is_compared_as_utf8(kernel):
    token = "s\u00e9cret-\u20ac"
    client = webtest.TestApp(create_app(kernel, token))
    accepted = send(client, "GET", "/states", HTTP_AUTHORIZATION="Bearer " + wire(token))
    assert accepted.status_int == 200, accepted.body
    by_query = send(client, "GET", "/states", QUERY_STRING="token=s%C3%A9cret-%E2%82%AC")
    assert by_query.status_int == 200, by_query.body
    assert_json_error(send(client, "GET", "/states", HTTP_AUTHORIZATION="Bearer s\u00e9cret-"), 401)


# -- errors ---------------------------------------------------------------------------

GOOD = {"code": "x = 1", "state_name": "initial"}
BAD_NAMES = ["", "a/b", "a\\b", "x\n", "tab\there", "\u0000", ".", "..", " lead", "trail ",
             "n" * 129, "a\u2028b", "\ud800", "\u3000lead", "trail\ufeff"]

BAD_REQUESTS = [
    pytest.param("/execute", b"{not json", "JSON", id="not-json"),
    pytest.param("/execute", b'{"code": "x = 1\ny = 2", "state_name": "initial"}',
                 "must be sent escaped, as \\n", id="raw-newline-in-a-string"),
    pytest.param("/execute", b"\xff\xfe", "JSON", id="not-utf8"),
    pytest.param("/execute", b'["code", "state_name"]', "array", id="array"),
    pytest.param("/execute", b"null", "null", id="json-null"),
    pytest.param("/execute", b"", "empty", id="empty"),
    pytest.param("/execute", b"  \n", "empty", id="blank"),
    pytest.param("/execute", b"[" * 1000 + b"]" * 1000, "deep", id="nested-1000-deep"),
    pytest.param("/execute", b'{"code": ' + b"[" * 33 + b"]" * 33 + b"}", "deep",
                 id="field-nested-33-deep"),
    pytest.param("/execute", {"state_name": "initial"}, "'code'", id="missing-code"),
    pytest.param("/execute", {"code": "x = 1"}, "'state_name'", id="missing-state_name"),
    pytest.param("/execute", {**GOOD, "code": None}, "'code'", id="code-null"),
    pytest.param("/execute", {**GOOD, "code": 1}, "'code'", id="code-number"),
    pytest.param("/execute", {**GOOD, "code": ["x = 1"]}, "'code'", id="code-list"),
    pytest.param("/execute", {**GOOD, "state_name": 0}, "'state_name'", id="state_name-number"),
    pytest.param("/execute", {**GOOD, "cod": "x"}, "cod", id="unknown-field"),
    pytest.param("/execute", {**GOOD, "new_state_name": 5}, "new_state_name", id="new-number"),
    pytest.param("/execute", {**GOOD, "exec_id": True}, "exec_id", id="exec_id-boolean"),
    *(pytest.param("/execute", {**GOOD, "new_state_name": name}, "new_state_name",
                   id=f"new_state_name={name!r}"[:40]) for name in BAD_NAMES),
    *(pytest.param("/execute", {**GOOD, "exec_id": name}, "exec_id",
                   id=f"exec_id={name!r}"[:40]) for name in BAD_NAMES),
    pytest.param("/interrupt", {}, "'exec_id'", id="interrupt-missing-exec_id"),
    pytest.param("/interrupt", b"", "empty", id="interrupt-empty"),
    pytest.param("/interrupt", {"exec_id": 1}, "'exec_id'", id="interrupt-exec_id-number"),
    pytest.param("/interrupt", {"exec_id": "a", "code": "x"}, "code", id="interrupt-unknown"),
]


@pytest.mark.parametrize("path, body, hint", BAD_REQUESTS)
def test_a_bad_request_is_400_naming_the_problem_and_stores_nothing(app, path, body, hint):
    response = send(app, "POST", path, body)
    assert_json_error(response, 400)
    assert hint in response.json["error"]
    assert state_names(app) == ["initial"]


NOT_FOUND = [
    pytest.param("POST", "/execute", {"code": "x = 1", "state_name": "nope"}, id="execute"),
    pytest.param("GET", "/states/nope", None, id="describe"),
    pytest.param("DELETE", "/states/nope", None, id="delete"),
    pytest.param("POST", "/interrupt", {"exec_id": "nope"}, id="interrupt"),
    pytest.param("GET", "/no-such-route", None, id="route"),
]


@pytest.mark.parametrize("method, path, body", NOT_FOUND)
def test_an_unknown_name_or_route_is_404(app, method, path, body):
    assert_json_error(send(app, method, path, body), 404)
    assert state_names(app) == ["initial"]


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/states/clean_imput", None), ("DELETE", "/states/clean_imput", None),
    ("GET", "/states/clean_imput/diff/initial", None), ("GET", "/states/clean_imput/export", None),
    ("POST", "/execute", {"code": "1", "state_name": "clean_imput"})])
def test_a_misspelt_state_name_is_404_suggesting_the_nearest(app, method, path, body):
    execute(app, "x = 1", new_state_name="clean_impute")
    execute(app, "x = 2", new_state_name="unrelated")
    response = send(app, method, path, body)
    assert_json_error(response, 404)
    assert response.json["error"] == ("no state named 'clean_imput'; did you mean "
                                      "'clean_impute'? GET /states lists them")
    assert state_names(app) == ["initial", "clean_impute", "unrelated"]


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/states/base%20", None), ("DELETE", "/states/%20base", None),
    ("GET", "/states/base%09/diff/initial", None),
    ("POST", "/execute", {"code": "1", "state_name": "base "}),
    ("GET", "/executions/job%20", None), ("GET", "/executions/job%20/output", None),
    ("POST", "/interrupt", {"exec_id": " job"})])
def test_a_name_with_whitespace_at_an_end_is_400_not_404_as_no_state_can_have_it(
        app, method, path, body):
    execute(app, "x = 1", new_state_name="base")
    response = send(app, method, path, body)
    assert_json_error(response, 400)
    assert "start or end with whitespace" in response.json["error"]
    assert state_names(app) == ["initial", "base"]


def test_an_exec_id_whose_record_is_kept_is_refused_and_the_record_stays(app):
    first = execute(app, "print('first')", exec_id="job")
    response = send(app, "POST", "/execute", {"code": "print('second')", "state_name": "initial",
                                              "exec_id": "job"})
    assert_json_error(response, 409)
    assert response.json["error"] == (
        "execution 'job' has ended and its record is still kept (GET /executions/job); sending "
        "it again would replace that record: pick another exec_id")
    assert app.get("/executions/job").json["reply"] == first
    assert app.get("/executions/job/output").json["text"] == "first\n"
    assert state_names(app) == ["initial", first["state_name"]]


def test_a_path_that_is_not_utf8_is_400_and_names_no_other_state(app):
    # Bottle drops the bytes that do not decode: this DELETE would have deleted "ab".
    execute(app, "x = 1", new_state_name="ab")
    for method, path in [("DELETE", "/states/a%FFb"), ("GET", "/states/a%FFb"),
                         ("GET", "/states/ab%C3"), ("POST", "/exec%FFute")]:
        response = send(app, method, path)
        assert_json_error(response, 400)
        assert "not UTF-8" in response.json["error"]
    assert state_names(app) == ["initial", "ab"]


@pytest.mark.parametrize("method, path", [("GET", "/execute"), ("PATCH", "/states/initial"),
                                          ("POST", "/states"), ("GET", "/reset"),
                                          ("GET", "/interrupt"), ("POST", "/states/initial/export")])
def test_a_wrong_method_is_405_with_allow(app, method, path):
    response = send(app, method, path)
    assert_json_error(response, 405)
    allowed = response.headers["Allow"].split(",")
    assert allowed and all(each in response.json["error"] for each in allowed)
    assert response.json["error"].startswith(f"{method} is not allowed on {path}; use ")


@pytest.mark.parametrize("path, nearest", [("/exec", "POST /execute"),
                                           ("/state/initial", "GET /states/{name}"),
                                           ("/execution", "GET /executions")])
def test_an_unknown_route_is_404_naming_the_nearest_and_every_route(app, path, nearest):
    error = send(app, "GET", path).json["error"]
    assert f"no route {path!r}; did you mean {nearest}" in error
    assert "POST /execute, GET /executions, GET /executions/{exec_id}" in error
    assert "GET /openapi.json" in error


def test_an_existing_new_state_name_is_409_and_the_state_stays_as_it_was(app):
    execute(app, "x = 1", new_state_name="taken")
    before = app.get("/states/taken").json
    response = send(app, "POST", "/execute",
                    {"code": "x = 2\ny = 3", "state_name": "initial", "new_state_name": "taken"})
    assert_json_error(response, 409)
    assert app.get("/states/taken").json == before
    assert state_names(app) == ["initial", "taken"]


def test_initial_cannot_be_overwritten_or_deleted(app):
    overwrite = send(app, "POST", "/execute", {**GOOD, "new_state_name": "initial"})
    assert_json_error(overwrite, 409)
    assert_json_error(send(app, "DELETE", "/states/initial"), 409)
    assert app.get("/states/initial").json["variables"] == {}


def test_brackets_inside_strings_do_not_count_towards_the_depth_limit(app):
    code = 'x = 1  # ' + '"[{\\' * 100  # quotes and backslashes too, which JSON escapes
    assert execute(app, code)["error"] is None


def test_a_body_over_the_limit_is_413(kernel):
    client = webtest.TestApp(create_app(kernel, TOKEN, max_body=64))
    client.authorization = ("Bearer", TOKEN)
    body = {"code": "x = 1" + " " * 64, "state_name": "initial"}
    response = send(client, "POST", "/execute", body)
    assert_json_error(response, 413)
    assert state_names(client) == ["initial"]


# -- executing ------------------------------------------------------------------------


def test_execute_replies_with_output_result_and_the_new_state(app):
    reply = execute(app, "print('hi')\n1 + 1", exec_id="run-1")
    assert reply == {
        "output": [{"output_type": "stream", "name": "stdout", "text": "hi\n"},
                   {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {}}],
        "state_name": reply["state_name"], "error": None, "exec_id": "run-1",
        "parent": "initial"}
    assert state_names(app) == ["initial", reply["state_name"]]


def test_execute_without_exec_id_generates_a_fresh_one(app):
    first, second = execute(app, "x = 1"), execute(app, "x = 1")
    assert isinstance(first["exec_id"], str) and first["exec_id"]
    assert first["exec_id"] != second["exec_id"]


def test_new_state_name_names_the_stored_state(app):
    reply = execute(app, "x = 1", new_state_name="mine")
    assert reply["state_name"] == "mine"
    assert app.get("/states/mine").json["code"] == "x = 1"


def test_stderr_is_its_own_stream_item(app):
    reply = execute(app, "import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert reply["output"] == [{"output_type": "stream", "name": "stdout", "text": "out\n"},
                               {"output_type": "stream", "name": "stderr", "text": "err\n"}]


def test_a_cell_runs_on_a_copy_of_its_state(app):
    execute(app, "xs = [1]", new_state_name="a")
    reply = execute(app, "xs.append(2)\nxs", "a", new_state_name="b")
    assert reply["output"][-1]["data"] == {"text/plain": "[1, 2]"}
    assert reply["parent"] == "a"
    assert app.get("/states/a").json["variables"]["xs"]["repr"] == "[1]"


def test_an_exception_in_the_cell_is_a_200_with_the_error_and_no_state(app):
    reply = execute(app, "print('before')\n1 / 0")
    error = reply["error"]
    assert reply["state_name"] is None
    assert (error["ename"], error["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert all(isinstance(line, str) for line in error["traceback"])
    assert "ZeroDivisionError" in error["traceback"][-1]
    assert reply["output"] == [{"output_type": "stream", "name": "stdout", "text": "before\n"},
                               {"output_type": "error", **error}]
    assert state_names(app) == ["initial"]


def test_a_syntax_error_is_a_200_with_the_error_and_no_state(app):
    reply = execute(app, "print('never')\nx = (")
    assert reply["state_name"] is None
    assert reply["error"]["ename"] == "SyntaxError"
    assert reply["output"] == [{"output_type": "error", **reply["error"]}]
    assert state_names(app) == ["initial"]


def test_a_json_body_sent_as_a_form_like_curl_does_works(app):
    response = app.post("/execute", json.dumps({"code": "6 * 7", "state_name": "initial"}),
                        content_type="application/x-www-form-urlencoded")
    assert response.json["output"] == [{"output_type": "execute_result",
                                        "data": {"text/plain": "42"}, "metadata": {}}]


# -- states ---------------------------------------------------------------------------


def test_states_are_listed_in_creation_order(app):
    for name in ["b", "a", "c"]:
        execute(app, "x = 1", new_state_name=name)
    assert state_names(app) == ["initial", "b", "a", "c"]


def test_a_state_describes_its_origin_and_variables(app):
    execute(app, "x = 1\ns = 'hi'\ndef f(): pass", new_state_name="s1")
    state = app.get("/states/s1").json
    assert set(state) == {"name", "timestamp", "parent", "code", "variables", "shared",
                          "approx_bytes", "shared_bytes", "lost"}
    assert isinstance(state["approx_bytes"], int)
    assert (state["name"], state["parent"]) == ("s1", "initial")
    assert state["code"] == "x = 1\ns = 'hi'\ndef f(): pass"
    age = datetime.now(timezone.utc) - datetime.fromisoformat(state["timestamp"])
    assert timedelta(0) <= age < timedelta(minutes=1)
    assert state["variables"] == {"x": {"type": "int", "repr": "1"},
                                  "s": {"type": "str", "repr": "'hi'"},
                                  "f": {"type": "function",
                                        "repr": state["variables"]["f"]["repr"]}}
    assert state["shared"] == {}


def test_initial_has_no_parent_and_no_variables(app):
    state = app.get("/states/initial").json
    assert (state["parent"], state["code"], state["variables"]) == (None, "", {})


def test_a_value_that_cannot_be_copied_is_listed_as_shared(app):
    execute(app, "import threading\nlock = threading.Lock()", new_state_name="locked")
    shared = app.get("/states/locked").json["shared"]
    assert list(shared) == ["lock"]
    assert isinstance(shared["lock"], str) and shared["lock"]


AWKWARD_VALUES = [
    pytest.param("class Bad:\n    def __repr__(self):\n        raise ValueError('no')\nv = Bad()",
                 id="repr-raises"),
    pytest.param("class Big:\n    def __repr__(self):\n        return 'x' * 10**6\nv = Big()",
                 id="repr-huge"),
    pytest.param("v = 'x' * 10**6", id="huge-str"),
    pytest.param("v = list(range(10**6))", id="huge-list"),
    pytest.param("v = 1\nglobals()[1] = 'a name that is not a str'", id="non-str-global-name"),
]


@pytest.mark.parametrize("code", AWKWARD_VALUES)
def test_an_awkward_value_still_describes_in_a_few_thousand_chars(app, code):
    execute(app, code, new_state_name="awkward")
    response = app.get("/states/awkward")
    assert len(response.json["variables"]["v"]["repr"]) <= 5000
    assert len(response.body) <= 10000


def test_a_cell_value_whose_repr_raises_is_still_a_result(app):
    reply = execute(app, "class Bad:\n    def __repr__(self):\n        raise ValueError\nBad()")
    assert reply["error"] is None
    assert isinstance(reply["output"][-1]["data"]["text/plain"], str)


@pytest.mark.parametrize("name", ["caf\u00e9 au lait \u2615", "50% off?#", "a+b",
                                  "\u00e9" * 128, "\U0005a1cb", "\ue000 private",
                                  "\U0001f468\u200d\U0001f469", "non\u00a0breaking"])
def test_a_name_with_spaces_or_non_ascii_round_trips_through_the_url(app, name):
    execute(app, "x = 1", new_state_name=name)
    assert state_names(app) == ["initial", name]
    assert app.get("/states/" + urllib.parse.quote(name)).json["name"] == name


def test_delete_drops_the_state(app):
    execute(app, "x = 1", new_state_name="doomed")
    assert app.delete("/states/doomed").json == {"deleted": "doomed"}
    assert_json_error(send(app, "GET", "/states/doomed"), 404)
    assert state_names(app) == ["initial"]


def test_reset_leaves_only_a_fresh_initial(app):
    execute(app, "x = 1", new_state_name="old")
    assert app.post("/reset").json == {"states": ["initial"]}
    assert_json_error(send(app, "GET", "/states/old"), 404)
    assert state_names(app) == ["initial"]


# -- requests the connection decides ---------------------------------------------------

GONE_ROUTES = [
    pytest.param("POST", "/execute", {"code": "y = 2", "state_name": "keep"}, id="execute"),
    pytest.param("POST", "/reset", None, id="reset"),
    pytest.param("DELETE", "/states/keep", None, id="delete"),
]


@pytest.mark.parametrize("method, path, body", GONE_ROUTES)
def test_a_request_whose_client_has_gone_does_nothing(app, kernel, kept, method, path, body):
    response = send(app, method, path, body, **{CLIENT_GONE: lambda: True})
    assert_json_error(response, 499)
    assert kernel.state_names() == ["initial", "keep"]
    assert kernel.describe("keep") == kept


def test_an_execute_past_max_running_is_503_with_retry_after(kernel, signal_name):
    client = webtest.TestApp(create_app(kernel, TOKEN, max_running=1))
    client.authorization = ("Bearer", TOKEN)
    code = f"import helpers\nhelpers.{signal_name}.wait(10)"
    first = threading.Thread(target=execute, args=(client, code), kwargs={"exec_id": "hold"})
    first.start()
    helpers.wait_until_running(kernel, "hold")
    response = send(client, "POST", "/execute", GOOD)
    assert_json_error(response, 503)
    assert response.headers["Retry-After"] == "1" and "--max-running" in response.json["error"]
    assert client.get("/executions").json["executions"][0]["exec_id"] == "hold"
    getattr(helpers, signal_name).set()
    first.join(10)
    assert execute(client, "x = 1")["error"] is None  # the slot is free again


def test_transfer_encoding_without_content_length_is_411_whatever_its_bytes(app):
    response = app.request("/execute", method="POST", expect_errors=True,
                           environ={"SERVER_PROTOCOL": "HTTP/1.0",
                                    "HTTP_TRANSFER_ENCODING": "\xff\xfe"})
    assert_json_error(response, 411)
