"""The OpenAPI 3.1 document of the HTTP API, served at GET /openapi.json.

Built from small pieces (their vocabulary is ``vocabulary``; the JSON Schemas of bodies,
``components/schemas``, are ``openapi_schemas``; the routes that move bytes, files and
archives, are ``openapi_transfers``): the replies that several routes share, errors above all
(``components/responses``), the two ways to send the token
(``components/securitySchemes``), and one operation per route. Request schemas
come from ``main``'s field tables, and limits and names from the modules that
enforce them, so the document follows the code; ``tests/test_openapi.py`` holds
the server's real replies against it.
"""

from importlib import metadata

from ..files import DEFAULT_MAX_FILE
from .bodies import DEFAULT_MAX_IMPORT, DEFAULT_PAGE, FORMATS, MAX_OFFSET, MAX_PAGE, MAX_POLL
from .openapi_schemas import STREAMS, schemas
from .openapi_transfers import export_state, file_paths, import_state
from .vocabulary import (BODY_ERRORS, ERROR_HEADERS, ERRORS, TEXT, body, header, json_reply,
                         operation, path_name, query, ref)

DESCRIPTION = """A Python execution server whose states you can branch. A state is an \
immutable snapshot of a namespace; `execute_code` runs code on a private copy of one and, if \
the code succeeds, stores the result as a new state. `initial` is the empty state.

Every route needs the token, as `Authorization: Bearer <token>` or as `?token=<token>`. \
Every 4xx and 5xx reply is `{"error": "<what is wrong and how to fix it>"}` as JSON, and a \
refused request changes nothing. A route asked with a method it does not serve answers 405 \
with an `Allow` header, its error naming the methods to use; an unknown route answers 404, \
its error naming the nearest route and listing them all.

{sandbox}

Files: `/files/<path>` is a file of the server's working directory (`--workdir`), \
`/files/<path>/` and `/files/` list a directory. A path that could leave that directory \
(`..`, absolute, through a symbolic link, with a NUL byte) is a 400."""


UNCONFINED = "Sandbox: none; code runs with the rights of the process that serves it."


def document(max_body=None, max_file=DEFAULT_MAX_FILE, max_import=DEFAULT_MAX_IMPORT,
             sandbox=None):
    """The OpenAPI document of a server that refuses JSON bodies over ``max_body`` bytes,
    files over ``max_file`` and archives over ``max_import``, and whose cells the
    ``sandbox`` confines (a ``sandbox.confine.Confinement``; None: nothing does)."""
    info = {"title": "snapshot-kernel", "version": _version(),
            "description": DESCRIPTION.replace(
                "{sandbox}", UNCONFINED if sandbox is None else sandbox.description())}
    if sandbox is not None:
        info["x-sandbox"] = sandbox.report()
    return {
        "openapi": "3.1.0",
        "info": info,
        "tags": [{"name": "executions", "description": "Run code, follow and stop runs."},
                 {"name": "states", "description": "The stored states."},
                 {"name": "files", "description": "The files of the working directory."},
                 {"name": "meta", "description": "This document."}],
        "security": [{"bearer": []}, {"token_query": []}],
        "paths": {**_paths(max_import), **file_paths(max_file)},
        "components": {"schemas": schemas(max_body),
                       "responses": _responses(),
                       "securitySchemes": SECURITY_SCHEMES},
    }


def _version():
    try:
        return metadata.version("snapshot-kernel")
    except metadata.PackageNotFoundError:  # run from a source tree
        return "0+unknown"


SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "`Authorization: Bearer <token>`, the server's --token."},
    "token_query": {"type": "apiKey", "in": "query", "name": "token",
                    "description": "`?token=<token>`, for clients that cannot set headers."},
}


def _responses():
    return {name: json_reply(description, ref("Error"), ERROR_HEADERS.get(status))
            for status, (name, description) in ERRORS.items()}


# -- routes ----------------------------------------------------------------------------------

def _paths(max_import):
    state = [path_name("name", "the state's name")]
    execution = [path_name("exec_id", "the execution's id")]
    return {
        "/execute": {"post": _execute()},
        "/executions": {"get": operation(
            "list_executions", "executions", "List running executions, and finished ones "
            "still kept (latest first).", json_reply("Summaries.", ref("ExecutionList")))},
        "/executions/{exec_id}": {"get": operation(
            "get_execution", "executions", "An execution's status, output so far, progress "
            "and checkpoints; once it has ended, its reply. ?wait=S waits for the reply first.",
            json_reply("The execution.", ref("Execution")), "404",
            parameters=execution + [query("wait", "seconds to wait for the reply",
                                          {"type": "number", "minimum": 0,
                                           "maximum": MAX_POLL})],
            description="A waiting request counts towards --max-running (503 past it).")},
        "/executions/{exec_id}/output": {"get": _read_output(execution)},
        "/interrupt": {"post": operation(
            "interrupt", "executions", "Interrupt a running execution: KeyboardInterrupt in "
            "its code; it stores no state, its checkpoints stay. With force, a cell an "
            "interrupt cannot reach is stopped by replacing the server process.",
            json_reply("The interrupt was sent.", ref("Interrupted")), "404", "409",
            *BODY_ERRORS, requestBody=body("InterruptRequest"),
            description="409: force on a server that cannot replace its process "
                        "(--in-memory, --no-supervisor).")},
        "/states": {"get": _list_states()},
        "/states/{name}": {
            "get": operation("get_state", "states", "Describe a state: parent, code, time, "
                             "and each variable's type and repr.",
                             json_reply("The state.", ref("State")), "404", parameters=state),
            "delete": operation("delete_state", "states", "Delete a state; with "
                                "?descendants=true, every state made from it too. States made "
                                "from it that stay keep what they use of it; 'initial' cannot "
                                "be deleted (409).",
                                json_reply("Deleted.", ref("Deleted")), "404", "409", "499",
                                parameters=state + [query(
                                    "descendants", "true: also delete every state made from "
                                    "it, at any depth", {"type": "boolean", "default": False})]),
            "put": import_state(state, max_import)},
        "/states/{name}/export": {"get": export_state(state)},
        "/states/{name}/diff/{other}": {"get": operation(
            "diff_states", "states", "What a branch did: the names the second state adds, "
            "removes and holds other values under than the first (compared by what they "
            "hold), with type, shape or length and repr on each side.",
            json_reply("The difference.", ref("StateDiff")), "404",
            parameters=[path_name("name", "the first state (before)"),
                        path_name("other", "the second state (after)")])},
        "/reset": {"post": operation(
            "reset_kernel", "states", "Drop every state but a fresh 'initial', and interrupt "
            "running executions (their replies say KernelReset).",
            json_reply("The states left.", ref("States")), "499")},
        "/openapi.json": {"get": operation(
            "get_openapi", "meta", "This OpenAPI 3.1 document.",
            json_reply("The document.", {"type": "object"}))},
    }


def _list_states():
    reply = json_reply("The names, or with ?tree=true each state's place and facts.",
                       {"anyOf": [ref("StateList"), ref("StateTree")]})
    reply["content"]["text/plain"] = {"schema": {**TEXT, "description": "with format=text or "
                                                 "Accept: text/plain: the tree drawn, a state "
                                                 "a line"}}
    return operation(
        "list_states", "states", "List the states' names in creation order; with ?tree=true "
        "each one's parent, depth, time, first line of code, size and number of children.",
        reply, parameters=[
            query("tree", "true: each state's entry in the tree, not only its name",
                  {"type": "boolean", "default": False}),
            query("format", "text: the tree drawn as text (so does Accept: text/plain)",
                  {"enum": list(FORMATS), "default": "json"})])


def _execute():
    text = {"schema": {**TEXT, "description": "with format text or Accept: text/plain: the "
                                              "outputs as one concise text, names in headers"}}
    reply = json_reply("The reply, whether or not the cell raised.", ref("ExecutionReply"),
                       {"X-Exec-Id": header("with text: the exec_id", False),
                        "X-State-Name": header("with text: the new state, if one was stored",
                                               False),
                        "X-Parent": header("with text: the source state", False),
                        "X-Error-Name": header("with text: the error's ename, if any", False)})
    reply["content"]["text/plain"] = text
    started = json_reply("wait was false: the cell runs on; GET the Location for its record.",
                         ref("Started"), {"Location": header("/executions/<exec_id>")})
    op = operation(
        "execute_code", "executions", "Run code on a copy of a state; if it succeeds, store "
        "the result as a new state (the source never changes). Behaves like a notebook cell.",
        reply, "404", "409", "499", *BODY_ERRORS, requestBody=body("ExecuteRequest"),
        description="404: no such source state. 409: new_state_name exists, or exec_id is "
                    "running. A waiting request counts towards --max-running (503 past it).")
    replies = op["responses"]
    op["responses"] = {"200": replies.pop("200"), "202": started, **replies}
    reply["links"] = {**links_to_execution(), **links_to_state()}
    started["links"] = links_to_execution()
    return op


def links_to_execution():
    """What a client can do next with the exec_id of a reply."""
    exec_id = "$response.body#/exec_id"
    return {"get_execution": {"operationId": "get_execution", "parameters": {"exec_id": exec_id}},
            "read_output": {"operationId": "read_output", "parameters": {"exec_id": exec_id}}}


def links_to_state():
    """What a client can do next with the new state a reply names."""
    name = "$response.body#/state_name"
    return {"get_state": {"operationId": "get_state", "parameters": {"name": name}},
            "delete_state": {"operationId": "delete_state", "parameters": {"name": name}}}


def _read_output(execution):
    return operation(
        "read_output", "executions", "Page through the whole text of an execution's stdout "
        "or stderr, which its reply may show only part of.",
        json_reply("A page.", ref("OutputPage")), "404",
        parameters=execution + [
            query("stream", "the stream", {"enum": list(STREAMS), "default": "stdout"}),
            query("offset", "the first character", {"type": "integer", "minimum": 0,
                                                    "maximum": MAX_OFFSET, "default": 0}),
            query("limit", "characters at most (0: the default)",
                  {"type": "integer", "minimum": 0, "maximum": MAX_PAGE,
                   "default": DEFAULT_PAGE})])
