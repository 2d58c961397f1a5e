"""GET /openapi.json: a valid OpenAPI 3.1 document of exactly the app's routes, which the
server's real replies match, successes and every error status a test can provoke."""

import http.client
import itertools
import json
import os
import re
import socket
import threading
import urllib.parse

import pytest
import webtest
from jsonschema import Draft202012Validator, ValidationError
from openapi_spec_validator import validate as validate_openapi
from referencing import Registry
from referencing.jsonschema import DRAFT202012

import helpers
from conftest import TOKEN
from helpers import WAIT, wait_until_running
from snapshot_kernel.web import bodies, openapi, vocabulary
from snapshot_kernel.errors import InvalidName, InvalidPath, KernelError, check_name
from snapshot_kernel.files import Workdir
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app
from snapshot_kernel.web.server import CLIENT_GONE
import archives
from test_server import Server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_BODY = 4096
MAX_FILE = 100
BINARY = ("application/x-tar",)
URI = "urn:snapshot-kernel:openapi"
SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


class Described:
    """The document, and the check of one real reply against what it says of that reply."""

    def __init__(self, document):
        self.document = document
        self.registry = Registry().with_resource(URI, DRAFT202012.create_resource(document))

    def operation(self, method, path):
        """``(template, operation)`` for a request; None if no operation describes it (an
        unknown route, or a method the route does not serve)."""
        path = urllib.parse.urlsplit(path).path
        for template, item in self.document["paths"].items():
            # A file's path spans segments; a listing's ends in '/', a file's does not.
            pattern = re.sub(r"{\w+}", "[^/]+", template.replace("{path}", ".*[^/]"))
            if re.fullmatch(pattern, path):
                return (template, item[method.lower()]) if method.lower() in item else None
        return None

    def check(self, method, path, status, content_type, headers, body):
        """Fail unless the document describes this reply: its status, its media type,
        its required headers, and its body against the schema."""
        found = self.operation(method, path)
        if found is None:  # no route: the one error shape, as in every error reply
            assert status in (404, 405), f"{method} {path}: {status} with no route"
            pointer = "/components/responses/BadRequest"
            reply = self.document["components"]["responses"]["BadRequest"]
        else:
            template, operation = found
            assert str(status) in operation["responses"], \
                f"{method} {template}: status {status} is not documented"
            pointer, reply = self._reply(method, template, str(status))
        mime = content_type.split(";")[0].strip()
        if mime not in reply["content"] and "*/*" in reply["content"]:
            mime = "*/*"
        assert mime in reply["content"], f"{method} {path} {status}: {mime} is not documented"
        for name, spec in reply.get("headers", {}).items():
            assert not spec["required"] or name.lower() in {h.lower() for h in headers}, \
                f"{method} {path} {status}: required header {name} is missing"
        if mime in BINARY:  # bytes: the schema says only their media type
            return
        instance = (json.loads(body) if mime == "application/json"
                    else body if mime == "*/*" else body.decode("utf-8"))
        self.validate(instance, f"{pointer}/content/{escape(mime)}/schema")

    def validate(self, instance, pointer):
        schema = {"$ref": f"{URI}#{urllib.parse.quote(pointer)}"}
        Draft202012Validator(schema, registry=self.registry).validate(instance)

    def _reply(self, method, template, status):
        pointer = f"/paths/{escape(template)}/{method.lower()}/responses/{status}"
        reply = self.document["paths"][template][method.lower()]["responses"][status]
        if "$ref" in reply:
            pointer = reply["$ref"][1:]
            reply = self.document["components"]["responses"][pointer.rsplit("/", 1)[1]]
        return pointer, reply


def escape(segment):
    """A JSON Pointer segment."""
    return segment.replace("~", "~0").replace("/", "~1")


def openapi_path(rule):
    """Bottle's ``/states/<name>`` as OpenAPI's ``/states/{name}``."""
    return re.sub(r"<(\w+)(?::[^>]*)?>", r"{\1}", rule)


# -- fixtures -------------------------------------------------------------------------

@pytest.fixture
def kernel():
    """One kernel (the document does not depend on conftest's copy modes)."""
    kernel = SnapshotKernel()
    yield kernel
    kernel.close()


@pytest.fixture
def held(signal_name):
    """``(code, event)``: a cell that waits for the event, which is set at teardown."""
    event = getattr(helpers, signal_name)
    yield f"import helpers\nhelpers.{signal_name}.wait({WAIT})", event
    event.set()


@pytest.fixture
def world(kernel, held, tmp_path):
    """An app (bodies up to MAX_BODY, files up to MAX_FILE) with states ``keep`` and the
    checkpoint ``done@1``, a finished execution ``done`` whose stdout was cut, a running
    one, ``held``, and a working directory holding ``notes.txt``, ``data/x.csv`` and the
    directory ``empty``."""
    (tmp_path / "data").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_bytes(b"hello")
    (tmp_path / "data" / "x.csv").write_bytes(b"a,b\n")
    kernel.execute("x = 1", "initial", new_state_name="keep")
    kernel.execute("import threading, numpy\nx = 'two'\nlock = threading.Lock()\n"
                   "a = numpy.zeros((2, 2))", "keep", new_state_name="valued")
    kernel.execute("lock = threading.Lock()", "valued", new_state_name="relocked")
    kernel.execute("checkpoint(progress='1/1')\nprint('x' * 300)", "initial", exec_id="done",
                   max_output=50)
    kernel.start(held[0], "initial", exec_id="held")
    wait_until_running(kernel, "held")
    app = webtest.TestApp(create_app(kernel, TOKEN, max_body=MAX_BODY,
                                     files=Workdir(tmp_path, MAX_FILE)))
    app.authorization = ("Bearer", TOKEN)
    return app


def described_by(app):
    return Described(app.get("/openapi.json").json)


def request(app, method, path, body=None, **environ):
    """Any request through WebTest; ``body`` is bytes as they are, or an object as JSON."""
    if body is None:  # no body at all: WebTest would send an empty one
        return app.request(path, method=method, environ=environ, expect_errors=True)
    if not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    return app.request(path, method=method, body=body, environ=environ, expect_errors=True)


def check(app, response, method, path):
    described_by(app).check(method, path, response.status_int, response.content_type or "",
                            response.headers, response.body)


# -- the document ---------------------------------------------------------------------

def test_the_document_is_valid_openapi_3_1(world):
    document = world.get("/openapi.json").json
    assert document["openapi"].startswith("3.1")
    validate_openapi(document)


def test_the_served_document_states_the_servers_body_and_file_limits(world):
    assert world.get("/openapi.json").json == openapi.document(MAX_BODY, MAX_FILE)
    assert f"over {MAX_BODY} bytes" in json.dumps(world.get("/openapi.json").json)
    assert f"({MAX_FILE} bytes on this server" in json.dumps(world.get("/openapi.json").json)


def test_every_route_is_described_and_nothing_else(world):
    document = world.get("/openapi.json").json
    routes = {(route.method.lower(), openapi_path(route.rule)) for route in world.app.routes}
    described = {(method, path) for path, item in document["paths"].items() for method in item}
    assert described == routes
    for path, item in document["paths"].items():
        for operation in item.values():
            in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert in_path == set(re.findall(r"{(\w+)}", path)), path


def operations(document):
    return [operation for item in document["paths"].values() for operation in item.values()]


def test_every_operation_on_a_file_path_is_fuzzed_with_positive_data_only():
    """Schemathesis cannot send a refused file path (it drops every value that would reach
    another route), so fuzzing one with negative data fails Hypothesis's filter_too_much
    health check on some seeds: CI failed so on delete_directory, left out of the list."""
    config = open(os.path.join(ROOT, ".ci", "schemathesis.toml")).read()
    positive = set()
    for block in config.split("[[operations]]")[1:]:
        if re.search(r'^phases\.fuzzing\.generation\.mode = "positive"', block, re.M):
            ids = re.search(r"^include-operation-id = (.+)$", block, re.M).group(1)
            positive.update(re.findall(r'"(\w+)"', ids))
    on_file_paths = {operation["operationId"]
                     for path, item in openapi.document(MAX_BODY, MAX_FILE)["paths"].items()
                     if "{path}" in path for operation in item.values()}
    assert on_file_paths == {"list_directory", "delete_directory", "read_file", "write_file",
                             "delete_file"}
    assert on_file_paths <= positive


def test_operation_ids_are_unique_snake_case_and_summaries_short(world):
    found = operations(world.get("/openapi.json").json)
    ids = [operation["operationId"] for operation in found]
    assert len(set(ids)) == len(ids)
    assert all(SNAKE_CASE.fullmatch(operation_id) for operation_id in ids), ids
    assert all(0 < len(operation["summary"]) < 300 for operation in found)


def test_every_operation_names_both_auth_forms_and_the_errors_of_every_route(world):
    document = world.get("/openapi.json").json
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["token_query"] == {**schemes["token_query"], "type": "apiKey", "in": "query",
                                      "name": "token"}
    assert document["security"] == [{"bearer": []}, {"token_query": []}]
    for operation in operations(document):
        assert "security" not in operation  # none is public
        assert set(vocabulary.COMMON_ERRORS) <= set(operation["responses"]), operation["operationId"]


def test_every_field_of_a_cut_stream_says_what_it_counts(world):
    truncated = world.get("/openapi.json").json["components"]["schemas"]["Truncated"]
    assert all(field["description"] for field in truncated["properties"].values())
    assert "kept for paging" in truncated["properties"]["kept_characters"]["description"]


def test_agent_hosts_md_lists_every_operation_id(world):
    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "agent-hosts.md"),
                encoding="utf-8").read()
    listed = re.search(r"names it as\s+a tool: (.*?)\. `tests/test_openapi\.py`", page, re.S)
    assert listed, "agent-hosts.md no longer lists the operationIds where this test looks"
    names = re.findall(r"`(\w+)`", listed.group(1))
    ids = [operation["operationId"] for operation in operations(world.get("/openapi.json").json)]
    assert sorted(names) == sorted(ids)


def test_each_operation_documents_exactly_the_query_parameters_its_route_takes(world):
    document = world.get("/openapi.json").json
    for route in world.app.routes:
        operation = document["paths"][openapi_path(route.rule)][route.method.lower()]
        documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert documented == set(route.config.get("query", ())), operation["operationId"]


def test_the_request_schemas_are_main_s_field_tables(world):
    schemas = world.get("/openapi.json").json["components"]["schemas"]
    for name, fields in (("ExecuteRequest", bodies.EXECUTE_FIELDS),
                         ("InterruptRequest", bodies.INTERRUPT_FIELDS)):
        assert set(schemas[name]["properties"]) == set(fields)
        assert schemas[name]["required"] == [field for field, (_, need) in fields.items() if need]
        assert schemas[name]["additionalProperties"] is False


# -- real replies through WebTest ------------------------------------------------------

GOOD = {"code": "x = 2", "state_name": "keep"}
RICH = ("import sys\nprint('out')\nprint('err', file=sys.stderr)\ndisplay(3)\n"
        "class H:\n    def _repr_html_(self):\n        return '<b>h</b>'\nH()")

def archive_of(name, damaged=False, python=None):
    """A body made from the app: the archive of state ``name``, damaged, or made by another
    CPython (whole otherwise)."""

    def make(app):
        data = app.get(f"/states/{name}/export").body
        if python is not None:
            return archives.rewritten(data, {"python": python})
        return archives.flipped(data, "state.pickle") if damaged else data

    return make


# (method, path, body, environ, status): each reply is checked against the document.
REPLIES = {
    "execute": ("POST", "/execute", {**GOOD, "new_state_name": "two"}, {}, 200),
    "execute rich outputs": ("POST", "/execute", {**GOOD, "code": RICH}, {}, 200),
    "execute a cell that raises": ("POST", "/execute", {**GOOD, "code": "1 / 0"}, {}, 200),
    "execute with checkpoints, cut": ("POST", "/execute", {
        **GOOD, "code": "checkpoint()\nprint('y' * 500)", "max_output": 20, "exec_id": "cut",
        "timeout": 30}, {}, 200),
    "execute as text": ("POST", "/execute", {**GOOD, "format": "text"}, {}, 200),
    "execute as text for Accept": ("POST", "/execute", GOOD, {"HTTP_ACCEPT": "text/plain"}, 200),
    "execute as text, a lone surrogate": ("POST", "/execute", {
        **GOOD, "code": "print(chr(0xd800))", "format": "text"}, {}, 200),
    "execute without waiting": ("POST", "/execute", {**GOOD, "wait": False}, {}, 202),
    "execute, not JSON": ("POST", "/execute", b"{", {}, 400),
    "execute, unknown field": ("POST", "/execute", {**GOOD, "cod": 1}, {}, 400),
    "execute, bad name": ("POST", "/execute", {**GOOD, "new_state_name": "a/b"}, {}, 400),
    "execute, bad timeout": ("POST", "/execute", {**GOOD, "timeout": -1}, {}, 400),
    "execute, unknown state": ("POST", "/execute", {**GOOD, "state_name": "nope"}, {}, 404),
    "execute, name taken": ("POST", "/execute", {**GOOD, "new_state_name": "keep"}, {}, 409),
    "execute, id running": ("POST", "/execute", {**GOOD, "exec_id": "held"}, {}, 409),
    "execute, chunked": ("POST", "/execute", None, {"HTTP_TRANSFER_ENCODING": "chunked",
                                                    "SERVER_PROTOCOL": "HTTP/1.0"}, 411),
    "execute, too large": ("POST", "/execute", {**GOOD, "code": "#" * MAX_BODY}, {}, 413),
    "execute, client gone": ("POST", "/execute", GOOD, {CLIENT_GONE: lambda: True}, 499),
    "execute, no token": ("POST", "/execute", GOOD, {"HTTP_AUTHORIZATION": "Bearer no"}, 401),
    "executions": ("GET", "/executions", None, {}, 200),
    "a finished execution": ("GET", "/executions/done", None, {}, 200),
    "a running execution": ("GET", "/executions/held?wait=0.05", None, {}, 200),
    "an execution, bad wait": ("GET", "/executions/done?wait=soon", None, {}, 400),
    "an unknown execution": ("GET", "/executions/nope", None, {}, 404),
    "output": ("GET", "/executions/done/output?stream=stdout&offset=10&limit=20", None, {}, 200),
    "output, a fraction": ("GET", "/executions/done/output?offset=0.5", None, {}, 400),
    "output, a whole float": ("GET", "/executions/done/output?offset=1.0&limit=2e1", None, {},
                              200),
    "output, bad stream": ("GET", "/executions/done/output?stream=stdin", None, {}, 400),
    "output, unknown execution": ("GET", "/executions/nope/output", None, {}, 404),
    "interrupt": ("POST", "/interrupt", {"exec_id": "held"}, {}, 200),
    "interrupt, no exec_id": ("POST", "/interrupt", {}, {}, 400),
    "interrupt by force, no supervisor": ("POST", "/interrupt", {"exec_id": "held",
                                                                "force": True}, {}, 409),
    "interrupt by force, bad force": ("POST", "/interrupt", {"exec_id": "held", "force": 1},
                                      {}, 400),
    "interrupt, unknown": ("POST", "/interrupt", {"exec_id": "done"}, {}, 404),
    "interrupt, too large": ("POST", "/interrupt", {"exec_id": "x" * MAX_BODY}, {}, 413),
    "states": ("GET", "/states", None, {}, 200),
    "states, a tree": ("GET", "/states?tree=true", None, {}, 200),
    "states, a tree drawn": ("GET", "/states?format=text", None, {}, 200),
    "states, a tree drawn for Accept": ("GET", "/states", None, {"HTTP_ACCEPT": "text/plain"},
                                        200),
    "states, bad tree": ("GET", "/states?tree=yes", None, {}, 400),
    "states, bad tree drawn": ("GET", "/states?tree=%05&format=text", None, {}, 400),
    "states, unknown query": ("GET", "/states?tre=1", None, {}, 400),
    "execute, no state stored": ("POST", "/execute", {**GOOD, "store": False}, {}, 200),
    "execute, no state stored, named": ("POST", "/execute", {**GOOD, "store": False,
                                                             "new_state_name": "n"}, {}, 400),
    "execute, id kept": ("POST", "/execute", {**GOOD, "exec_id": "done"}, {}, 409),
    "a state": ("GET", "/states/keep", None, {}, 200),
    "a checkpoint": ("GET", "/states/done%401", None, {}, 200),
    "an unknown state": ("GET", "/states/nope", None, {}, 404),
    "a state by query token": ("GET", "/states/initial", None,
                               {"HTTP_AUTHORIZATION": "", "QUERY_STRING": f"token={TOKEN}"}, 200),
    "delete": ("DELETE", "/states/keep", None, {}, 200),
    "delete initial": ("DELETE", "/states/initial", None, {}, 409),
    "delete with descendants": ("DELETE", "/states/keep?descendants=true", None, {}, 200),
    "delete, bad descendants": ("DELETE", "/states/keep?descendants=all", None, {}, 400),
    "delete unknown": ("DELETE", "/states/nope", None, {}, 404),
    "delete, client gone": ("DELETE", "/states/keep", None, {CLIENT_GONE: lambda: True}, 499),
    "a diff": ("GET", "/states/initial/diff/keep", None, {}, 200),
    "a diff of values": ("GET", "/states/keep/diff/valued", None, {}, 200),
    "a diff, not compared": ("GET", "/states/valued/diff/relocked", None, {}, 200),
    "a diff, unknown state": ("GET", "/states/keep/diff/nope", None, {}, 404),
    "list files": ("GET", "/files/", None, {}, 200),
    "list a directory": ("GET", "/files/data/", None, {}, 200),
    "list a file": ("GET", "/files/notes.txt/", None, {}, 409),
    "list nothing": ("GET", "/files/nope/", None, {}, 404),
    "read a file": ("GET", "/files/notes.txt", None, {}, 200),
    "read a file below": ("GET", "/files/data/x.csv", None, {}, 200),
    "read a directory": ("GET", "/files/data", None, {}, 409),
    "read nothing": ("GET", "/files/nope", None, {}, 404),
    "read outside": ("GET", "/files/../x", None, {}, 400),
    "write a file": ("PUT", "/files/new/y.bin", b"\x00\xff", {}, 200),
    "write a directory": ("PUT", "/files/data", b"x", {}, 409),
    "write too much": ("PUT", "/files/big", b"x" * (MAX_FILE + 1), {}, 413),
    "write outside": ("PUT", "/files/%2Fetc%2Fx", b"x", {}, 400),
    "write, chunked": ("PUT", "/files/x", None, {"HTTP_TRANSFER_ENCODING": "chunked",
                                                 "SERVER_PROTOCOL": "HTTP/1.0"}, 411),
    "delete a file": ("DELETE", "/files/notes.txt", None, {}, 200),
    "delete a full directory": ("DELETE", "/files/data", None, {}, 409),
    "delete nothing": ("DELETE", "/files/nope", None, {}, 404),
    "delete a directory": ("DELETE", "/files/empty/", None, {}, 200),
    "delete a full directory by its '/'": ("DELETE", "/files/data/", None, {}, 409),
    "delete no directory": ("DELETE", "/files/nope/", None, {}, 404),
    "write a directory by its '/'": ("PUT", "/files/data/", b"x", {}, 405),
    "reset": ("POST", "/reset", None, {}, 200),
    "reset, client gone": ("POST", "/reset", None, {CLIENT_GONE: lambda: True}, 499),
    "the document": ("GET", "/openapi.json", None, {}, 200),
    "the document, no token": ("GET", "/openapi.json", None, {"HTTP_AUTHORIZATION": ""}, 401),
    "export": ("GET", "/states/keep/export", None, {}, 200),
    "export, unknown state": ("GET", "/states/nope/export", None, {}, 404),
    "import": ("PUT", "/states/moved", archive_of("keep"), {}, 200),
    "import, name taken": ("PUT", "/states/keep", archive_of("keep"), {}, 409),
    "import, bad name": ("PUT", "/states/%20a", archive_of("keep"), {}, 400),
    "import, not an archive": ("PUT", "/states/moved", b"{}", {}, 400),
    "import, damaged": ("PUT", "/states/moved", archive_of("keep", damaged=True), {}, 400),
    "import, another CPython": ("PUT", "/states/moved", archive_of("keep", python="cpython-2.7"),
                                {}, 422),
    "import, client gone": ("PUT", "/states/moved", archive_of("keep"),
                            {CLIENT_GONE: lambda: True}, 499),
    "a wrong method": ("PATCH", "/states/keep", None, {}, 405),
    "an unknown route": ("GET", "/nowhere", None, {}, 404),
}


@pytest.mark.parametrize("method, path, body, environ, status", REPLIES.values(), ids=REPLIES)
def test_a_real_reply_matches_the_document(world, method, path, body, environ, status):
    if callable(body):
        body = body(world)
    response = request(world, method, path, body, **environ)
    assert response.status_int == status, response.body
    check(world, response, method, path)


def test_a_refused_archive_is_a_400_the_import_operation_declares_itself(world):
    """Any bytes of the archive's media type match the body's schema, so the refusal of a
    schema-valid body is declared by the operation, not only among every route's errors."""
    response = request(world, "PUT", "/states/moved", b"not an archive")
    assert response.status_int == 400 and "not a state archive" in response.json["error"]
    declared = world.get("/openapi.json").json["paths"]["/states/{name}"]["put"]["responses"]
    assert "not a state archive" in declared["400"]["description"]


# A path of each template, for requests with every method.
CONCRETE = {"{name}": "keep", "{other}": "initial", "{exec_id}": "done", "{path}": "data"}
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")


def test_a_method_the_document_does_not_list_is_a_405_allowing_the_listed_ones(world):
    """What schemathesis's unsupported_method and allow_header_conformance check."""
    for template, item in world.get("/openapi.json").json["paths"].items():
        path = re.sub(r"{\w+}", lambda found: CONCRETE[found.group()], template)
        listed = {method.upper() for method in item}
        for method in set(METHODS) - listed:
            response = request(world, method, path, b"x" if method in ("PUT", "POST") else None)
            assert response.status_int == 405, (method, path, response.body)
            assert set(response.headers["Allow"].split(",")) == listed, (method, path)
            check(world, response, method, path)


# Bodies of POST /execute: the server takes those the schema accepts (and then answers
# 200, 202, 404 or 409), and refuses the others with a 400.
BODIES = {
    "the example": {"code": "import math\nx = 41\nx + 1", "state_name": "initial"},
    "every field": {**GOOD, "new_state_name": "n", "exec_id": "e", "timeout": 5.5,
                    "max_output": 10, "wait": True, "format": "text"},
    "optional fields null": {**GOOD, **dict.fromkeys(["new_state_name", "exec_id", "timeout",
                                                      "max_output", "wait", "format"])},
    "not waiting": {**GOOD, "wait": False},
    "an unknown state": {**GOOD, "state_name": "nope"},
    "a taken name": {**GOOD, "new_state_name": "keep"},
    "no code": {"state_name": "initial"},
    "code null": {**GOOD, "code": None},
    "code a number": {**GOOD, "code": 1},
    "an unknown field": {**GOOD, "codes": "x"},
    "a zero timeout (no limit)": {**GOOD, "timeout": 0},
    "a negative timeout": {**GOOD, "timeout": -1},
    "a huge timeout": {**GOOD, "timeout": 1e10},
    "a fractional max_output": {**GOOD, "max_output": 1.5},
    "a whole max_output written as a float": {**GOOD, "max_output": 100.0},
    "wait a string": {**GOOD, "wait": "no"},
    "an unknown format": {**GOOD, "format": "xml"},
    "a name with a slash": {**GOOD, "new_state_name": "a/b"},
    "a name with a leading space": {**GOOD, "new_state_name": " a"},
    "a name with a control character": {**GOOD, "exec_id": "a\tb"},
    "a name too long": {**GOOD, "exec_id": "n" * 129},
    "an empty name": {**GOOD, "exec_id": ""},
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES)
def test_the_server_takes_the_bodies_the_schema_accepts(world, body):
    valid = True
    try:
        described_by(world).validate(body, "/components/schemas/ExecuteRequest")
    except ValidationError:
        valid = False
    status = request(world, "POST", "/execute", body).status_int
    assert status in ((200, 202, 404, 409) if valid else (400,)), (valid, status)


NAMES = ["initial", "a b", "caf\u00e9 \u2615", "50% off?#", "n" * 128, "", "n" * 129, "a/b",
         "a\\b", " a", "a ", "a\x00", "x\ny", "tab\there", "\x85", ".", "..", "...", ".a",
         # Found by fuzzing: the document allowed an unassigned code point, the kernel did not.
         "\U0005a1cb", "\ue000", "a\u200db", "\U0001f468\u200d\U0001f469", "a\u00a0b",
         "\u00a0a", "a\u3000", "a\ufeff", "\u2028", "a\u2029b"]


@pytest.mark.parametrize("name", NAMES, ids=[repr(name)[:20] for name in NAMES])
def test_the_name_schema_accepts_the_names_the_kernel_accepts(world, name):
    """But for lone surrogates, which only the description names (see errors.py). (No
    name ends in a newline here: Python's ``$`` matches before one, JSON Schema's
    ECMA-262 ``$`` does not; a newline is refused anywhere anyway.)"""
    try:
        check_name(name)
        accepted = True
    except InvalidName:
        accepted = False
    try:
        described_by(world).validate(name, "/components/schemas/Name")
        valid = True
    except ValidationError:
        valid = False
    assert valid == accepted


def paths_over(alphabet, longest):
    """Every string of 1 to ``longest`` characters drawn from ``alphabet``."""
    return ["".join(chars) for length in range(1, longest + 1)
            for chars in itertools.product(alphabet, repeat=length)]


def test_the_path_schemas_accept_exactly_the_paths_the_server_takes(world, tmp_path):
    """Every path of up to 6 characters over 'a', '.', '/' and NUL, against the document's
    schema for reading and deleting (valid unless the server refuses it with a 400 before
    touching the disk) and for writing (valid unless PUT refuses it so). Found by fuzzing:
    the schema took any string, so a schema-valid path could be a 400."""
    described = described_by(world)
    reading, writing = (next(param["schema"] for param in
                             described.document["paths"]["/files/{path}"][method]["parameters"]
                             if param["name"] == "path") for method in ("delete", "put"))
    workdir = Workdir(tmp_path)
    for path in paths_over("a./\x00", 6):
        for schema, attempt in ((reading, workdir.open), (writing, lambda path: workdir.store(
                path, iter([b"x"])))):
            try:
                attempt(path)
                taken = True
            except InvalidPath:
                taken = False
            except KernelError:  # taken, then not there, or of the wrong kind
                taken = True
            assert Draft202012Validator(schema).is_valid(path) == taken, \
                (path, schema["pattern"])


def test_a_state_that_could_not_be_saved_lists_what_it_lost(tmp_path):
    kernel = SnapshotKernel(state_dir=str(tmp_path))
    app = webtest.TestApp(create_app(kernel, TOKEN))
    app.authorization = ("Bearer", TOKEN)
    body = {"code": "import threading\nlock = threading.Lock()", "state_name": "initial",
            "new_state_name": "locked"}
    reply = request(app, "POST", "/execute", body)
    assert reply.json["lost"]
    check(app, reply, "POST", "/execute")
    described = request(app, "GET", "/states/locked")
    assert described.json["lost"]
    check(app, described, "GET", "/states/locked")
    kernel.close()


DISK_FAILURES = {"403": PermissionError(13, "Permission denied"),
                 "507": OSError(28, "No space left on device")}


@pytest.mark.parametrize("status, error", DISK_FAILURES.items(), ids=list(DISK_FAILURES))
def test_what_the_disk_refuses_is_described(world, monkeypatch, status, error):
    def fail(*args):
        raise error

    monkeypatch.setattr(os, "replace", fail)
    response = request(world, "PUT", "/files/x", b"x")
    monkeypatch.undo()
    assert response.status_int == int(status)
    check(world, response, "PUT", "/files/x")


def test_a_request_past_max_running_is_a_described_503(kernel, held):
    app = webtest.TestApp(create_app(kernel, TOKEN, max_running=1))
    app.authorization = ("Bearer", TOKEN)
    waiting = threading.Thread(target=request, args=(app, "POST", "/execute",
                                                     {"code": held[0], "state_name": "initial",
                                                      "exec_id": "hold"}))
    waiting.start()
    wait_until_running(kernel, "hold")
    for method, path, body in (("POST", "/execute", GOOD),
                               ("GET", "/executions/hold?wait=1", None)):
        response = request(app, method, path, body)
        assert response.status_int == 503
        check(app, response, method, path)
    held[1].set()
    waiting.join(WAIT)


# -- real replies on a socket: what Cheroot and the head gate answer ------------------

HEAD = f"Host: x\r\nAuthorization: Bearer {TOKEN}\r\n"
SOCKET_REPLIES = {
    "a state": ("GET", "/states/initial", f"GET /states/initial HTTP/1.1\r\n{HEAD}\r\n", 200),
    "an illegal header line": ("GET", "/states", f"GET /states HTTP/1.1\r\n{HEAD}oops\r\n\r\n",
                               400),
    "a long request line": ("GET", "/states", "GET /states?" + "a" * 3000 + " HTTP/1.1\r\n\r\n",
                            414),
    "long headers": ("GET", "/states", f"GET /states HTTP/1.1\r\nX: {'a' * 3000}\r\n\r\n", 431),
    "a body that stops": ("POST", "/execute", f"POST /execute HTTP/1.1\r\n{HEAD}"
                                              "Content-Length: 100\r\n\r\n{", 408),
    "an archive that stops": ("PUT", "/states/x", f"PUT /states/x HTTP/1.1\r\n{HEAD}"
                                                  "Content-Length: 100000\r\n\r\nmeta", 408),
    "gzip": ("POST", "/execute", f"POST /execute HTTP/1.1\r\n{HEAD}"
                                 "Transfer-Encoding: gzip\r\n\r\n", 501),
    "HTTP/2.0": ("GET", "/states", f"GET /states HTTP/2.0\r\n{HEAD}\r\n", 505),
}


@pytest.fixture(scope="module")
def server():
    running = Server(TOKEN, ["--max-header", "2048", "--request-timeout", "0.5"])
    running.wait_until_listening()
    yield running
    running.stop()


@pytest.mark.parametrize("method, path, raw, status", SOCKET_REPLIES.values(),
                         ids=SOCKET_REPLIES)
def test_a_reply_on_a_socket_matches_the_document(server, method, path, raw, status):
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
        sock.sendall(raw.encode("latin-1"))
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
    assert response.status == status, body
    described = Described(json.loads(_get(server, "/openapi.json")))
    described.check(method, path, status, response.getheader("Content-Type"),
                    dict(response.getheaders()), body)


def _get(server, path):
    connection = server.connect()
    connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    return connection.getresponse().read()


def test_every_documented_status_is_provoked_by_a_test_but_500(world):
    """A status no test provokes may be one the server never answers."""
    document = world.get("/openapi.json").json
    documented = {status for operation in operations(document)
                  for status in operation["responses"]}
    provoked = {str(case[-1]) for case in (*REPLIES.values(), *SOCKET_REPLIES.values())}
    provoked.add("503")  # test_a_request_past_max_running_is_a_described_503
    provoked.update(DISK_FAILURES)  # test_what_the_disk_refuses_is_described
    assert documented - provoked == {"500"}


# -- the checks can fail ---------------------------------------------------------------

WRONG_REPLIES = {
    "an undocumented status": ("GET", "/states", 418, "application/json", {}, b'{"error": "x"}'),
    "a field of the wrong type": ("GET", "/states", 200, "application/json", {},
                                  b'{"states": [1]}'),
    "an undocumented field": ("GET", "/states", 200, "application/json", {},
                              b'{"states": [], "extra": 1}'),
    "a missing field": ("DELETE", "/states/a", 200, "application/json", {}, b"{}"),
    "an error of another shape": ("GET", "/states/a", 404, "application/json", {},
                                  b'{"message": "x"}'),
    "an undocumented media type": ("GET", "/states", 200, "text/html", {}, b"<p>"),
    "a 202 without Location": ("POST", "/execute", 202, "application/json", {},
                               b'{"exec_id": "a", "status": "running", "location": "/x"}'),
    "an unknown output type": ("POST", "/execute", 200, "application/json", {}, json.dumps({
        "output": [{"output_type": "nonsense"}], "state_name": None, "error": None,
        "exec_id": "a", "parent": "initial"}).encode()),
    "a bad status": ("GET", "/executions", 200, "application/json", {}, json.dumps({
        "executions": [], "finished": [{"exec_id": "a", "status": "sleeping"}]}).encode()),
}


@pytest.mark.parametrize("reply", WRONG_REPLIES.values(), ids=WRONG_REPLIES)
def test_a_reply_the_document_does_not_describe_fails_the_check(world, reply):
    with pytest.raises((AssertionError, ValidationError)):
        described_by(world).check(*reply)
