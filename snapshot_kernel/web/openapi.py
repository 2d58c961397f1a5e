"""The OpenAPI 3.1 document of the HTTP API, served at GET /openapi.json.

Built from small pieces (their vocabulary is ``vocabulary``; the routes that move
bytes, files and archives, are ``openapi_transfers``): the JSON Schemas of bodies (``components/schemas``),
the replies that several routes share, errors above all
(``components/responses``), the two ways to send the token
(``components/securitySchemes``), and one operation per route. Request schemas
come from ``main``'s field tables, and limits and names from the modules that
enforce them, so the document follows the code; ``tests/test_openapi.py`` holds
the server's real replies against it.
"""

from importlib import metadata

from ..errors import MAX_POSITIVE
from ..execution import STATUSES
from ..files import DEFAULT_MAX_FILE
from ..kernel import DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT
from .bodies import (DEFAULT_MAX_IMPORT, DEFAULT_PAGE, EXECUTE_FIELDS, FORMATS, INTERRUPT_FIELDS,
                     MAX_OFFSET, MAX_PAGE, MAX_POLL)
from .openapi_transfers import export_state, file_paths, import_state, imported
from .vocabulary import (BODY_ERRORS, ERROR_HEADERS, ERRORS, FLAG, NAME, TEXT, TIMESTAMP, WHOLE,
                         body, header, json_reply, mapping, nullable, obj, operation, path_name,
                         query, ref)

INTERRUPT_REASONS = ("request", "timeout", "memory", "reset", "shutdown", "disconnect",
                     "restart", "force")
STREAMS = ("stdout", "stderr")
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
        "components": {"schemas": _schemas(max_body),
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


# -- schemas ---------------------------------------------------------------------------------

_JSON_TYPES = {(str,): "string", (int, float): "number", (int,): "integer", (bool,): "boolean"}


def _schemas(max_body):
    schemas = {
        "Error": obj({"error": {**TEXT, "description": "what is wrong and how to fix it"}}),
        "Name": NAME,
        "ExecuteRequest": {**_request(EXECUTE_FIELDS, _execute_fields(), max_body, {
            "code": "import math\nx = 41\nx + 1", "state_name": "initial"}),
            # store false names no state to store: a new_state_name with it is a 400
            "if": {"properties": {"store": {"const": False}}, "required": ["store"]},
            "then": {"properties": {"new_state_name": {"type": "null"}}}},
        "InterruptRequest": _request(INTERRUPT_FIELDS, {
            "exec_id": {**ref("Name"), "description": "the running execution"},
            "force": {"default": False, "description": "true: if the interrupt has not stopped "
                      "the cell within 0.5 s (a long call in C), replace the server process "
                      "(every acknowledged state survives); the cell is reported stopped, "
                      "other running cells crashed. Not with --in-memory or "
                      "--no-supervisor (409)."}}, max_body, {"exec_id": "nap"}),
        "CellError": obj({"ename": TEXT, "evalue": TEXT,
                          "traceback": {"type": "array", "items": TEXT}},
                         description="An exception the cell raised, or one the kernel decided "
                                     "(KeyboardInterrupt, TimeoutError, KernelReset, ...)."),
        "Checkpoint": obj({"state_name": TEXT, "progress": nullable(TEXT),
                           "timestamp": TIMESTAMP}),
        "Truncated": obj({
            "characters": {**WHOLE, "description": "characters the stream had in all"},
            "kept_characters": {**WHOLE, "description": "characters of it kept for paging: "
                                "all of them unless capped"},
            "capped": {**FLAG, "description": "the kept text reached --max-full-output, so "
                                              "what came later is not kept"},
            "location": {**TEXT, "description": "GET it to page through the stream's whole "
                                                "text"}}),
        "ExecutionReply": _reply(),
        "Imported": imported(),
        "Started": obj({"exec_id": TEXT, "status": {"enum": ["running", "waiting"]},
                        "location": TEXT}),
        "Crash": obj({"cause": {**TEXT, "description": "how the server process died, e.g. "
                                                      "'was killed by SIGSEGV (Segmentation "
                                                      "fault)'"},
                      "signal": {**nullable(TEXT), "description": "SIGSEGV, SIGABRT, SIGKILL, "
                                                                  "...; null for an exit"},
                      "exit_status": nullable({"type": "integer"}),
                      "likely_out_of_memory": {**FLAG, "description": "a SIGKILL while the "
                                               "kernel's count of OOM kills rose"}}),
        "ExecutionSummary": obj(_summary(), _SUMMARY_ALWAYS, description=_CRASHED),
        "Execution": obj({**_summary(), "output": {"type": "array", "items": ref("Output")},
                          "reply": nullable(ref("ExecutionReply"))},
                         [*_SUMMARY_ALWAYS, "output", "reply"],
                         description="`reply` is null while the execution runs. " + _CRASHED),
        "ExecutionList": obj({"executions": _list_of("ExecutionSummary"),
                              "finished": _list_of("ExecutionSummary")}),
        "OutputPage": obj({"exec_id": TEXT, "stream": {"enum": list(STREAMS)}, "offset": WHOLE,
                           "text": TEXT, "next_offset": WHOLE, "total": WHOLE,
                           "complete": FLAG, "capped": FLAG}),
        "StateList": obj({"states": {"type": "array", "items": TEXT,
                                     "description": "in creation order"}}),
        "StateTree": obj({"states": _list_of("TreeEntry")},
                         description="Depth first from the roots: a state's children (in "
                                     "creation order) follow it, one `depth` deeper."),
        "TreeEntry": _tree_entry(),
        "State": _state(),
        "Deleted": obj({"deleted": TEXT, "descendants": {
            "type": "array", "items": TEXT,
            "description": "with ?descendants=true: the states made from it that went with "
                           "it, in creation order"}}, ["deleted"]),
        "Interrupted": obj({"interrupted": TEXT, "replaced": {
            **FLAG, "description": "with force: true if the server process is being replaced "
                                   "(GET /executions/<exec_id> reports the cell once the new "
                                   "one serves), false if the interrupt stopped it"}},
            ["interrupted"]),
        "States": obj({"states": {"type": "array", "items": {"const": "initial"}}}),
        "StateDiff": _diff(),
        "FileStored": obj({"name": {**TEXT, "description": "the path, normalized"},
                           "size": {**WHOLE, "description": "bytes"}}),
        "FileListing": obj({"files": {"type": "array", "items": obj({
            "name": TEXT, "size": {**WHOLE, "description": "bytes; 0 for a directory"},
            "mtime": TIMESTAMP, "is_dir": FLAG}), "description": "sorted by name"}}),
    }
    schemas.update(_outputs())
    return schemas


def _list_of(name):
    return {"type": "array", "items": ref(name)}


def _request(fields, about, max_body, example):
    """The schema of a JSON body with exactly ``fields`` (``main``'s table), described."""
    properties = {name: _field(types, needed, about[name])
                  for name, (types, needed) in fields.items()}
    required = [name for name, (_, needed) in fields.items() if needed]
    limit = f" A body over {max_body} bytes is refused (413)." if max_body else ""
    return obj(properties, required, examples=[example],
               description="Unknown fields are refused (400); an optional field that is null "
                           "is left out. The body is read as JSON whatever its Content-Type "
                           f"says.{limit}")


def _field(types, needed, about):
    """One request field: its JSON type, or null too if it may be left out."""
    schema = {"type": _JSON_TYPES[types], **about}
    description = schema.pop("description")
    return {**(schema if needed else nullable(schema)), "description": description}


def _execute_fields():
    return {
        "code": {"description": "The cell: Python, with notebook syntax (`!cmd`, `%pip`, "
                                "`%time`, ...)."},
        "state_name": {**ref("Name"), "description": "The source state."},
        "new_state_name": {**ref("Name"), "description": "The new state's name; by default "
                                                         "`state-N`."},
        "exec_id": {**ref("Name"), "description": "Your id for the execution; by default a "
                                                  "random hex string."},
        "timeout": {"minimum": 0, "exclusiveMaximum": MAX_POSITIVE,
                    "description": "Seconds before the cell is interrupted, 0 for no limit (as "
                                   "--timeout 0); by default the server's --timeout "
                                   f"({DEFAULT_TIMEOUT:g} unless set)."},
        "max_output": {"minimum": 1, "exclusiveMaximum": MAX_POSITIVE,
                       "description": "Characters kept per output stream and per text item; "
                                      f"by default the server's --max-output "
                                      f"({DEFAULT_OUTPUT_LIMIT} unless set)."},
        "wait": {"default": True, "description": "false: answer 202 at once and run the cell "
                                                 "without holding the connection."},
        "format": {"enum": list(FORMATS), "default": "json",
                   "description": "text: the reply is the outputs as one concise text for a "
                                  "model (so is an `Accept: text/plain` request)."},
        "store": {"default": True,
                  "description": "false: run the cell for its outputs and store no state "
                                 "(its reply and record as usual, state_name null); not with "
                                 "new_state_name (400)."},
    }


_TEXTS = {"type": "array", "items": TEXT}


def _reply():
    return obj({
        "output": {"type": "array", "items": ref("Output")},
        "state_name": {**nullable(TEXT), "description": "the new state; null if the cell failed"},
        "error": nullable(ref("CellError")),
        "exec_id": TEXT,
        "parent": {**TEXT, "description": "the source state"},
        "checkpoints": _list_of("Checkpoint"),
        "waited": obj({"seconds": {"type": "number", "minimum": 0}, "for": _TEXTS,
                       "settings": _TEXTS},
                      description="there if the cell waited before it ran: for which executions, "
                                  "and the process-wide settings that kept them apart; its "
                                  "timeout started after the wait"),
        "truncated": mapping(ref("Truncated"), "the streams the reply shows only part of"),
        "lost": mapping(TEXT, "names of the new state, inherited ones included, that could "
                              "not be saved (unless --in-memory) or were not exported, and "
                              "why: as GET /states/<name> lists them"),
    }, ["output", "state_name", "error", "exec_id", "parent"],
        description="A cell that raised is still a 200: `error` is set and no state is stored.")


_CRASHED = ("`crash` is there when `status` is `crashed`: the server process died while the "
            "execution ran (a supervisor started a new one).")


def _summary():
    return {"exec_id": TEXT, "status": {"enum": list(STATUSES)}, "state_name": TEXT,
            "new_state_name": nullable(TEXT), "started": TIMESTAMP,
            "elapsed": {"type": "number", "minimum": 0, "description": "seconds"},
            "timeout": nullable({"type": "number"}), "interrupted": FLAG,
            "interrupt_reason": nullable({"enum": list(INTERRUPT_REASONS)}), "stuck": FLAG,
            "thread_id": nullable({"type": "integer"}), "progress": nullable(TEXT),
            "checkpoints": _list_of("Checkpoint"),
            "waiting": nullable(obj({
                "for": {**_TEXTS, "description": "the executions it waits for"},
                "settings": {**_TEXTS, "description": "the process-wide settings that keep "
                                                     "them apart, by name (`module "
                                                     "attributes: json.dumps`)"}},
                description="while `status` is `waiting`: another branch's cell holds a "
                            "setting that is one per process; the timeout starts once it "
                            "runs")),
            "crash": ref("Crash")}


_SUMMARY_ALWAYS = [name for name in _summary() if name != "crash"]


def _state():
    variable = obj({"type": TEXT, "repr": TEXT})
    return obj({
        "name": TEXT, "timestamp": TIMESTAMP, "parent": nullable(TEXT),
        "code": {**TEXT, "description": "the code that made it"},
        "variables": mapping(variable, "each name's type and repr (cut to 2,000 characters)"),
        "shared": mapping(TEXT, "names whose values are, or hold, something shared by "
                                "reference, and why"),
        "lost": mapping(TEXT, "unless --in-memory: names that would not survive a crash"),
        "approx_bytes": WHOLE, "shared_bytes": WHOLE,
        "checkpoint": {"const": True}, "progress": nullable(TEXT),
    }, ["name", "timestamp", "parent", "code", "variables", "shared", "lost", "approx_bytes",
        "shared_bytes"], description="`checkpoint` and `progress` appear on checkpoints only.")


def _tree_entry():
    return obj({
        "name": TEXT,
        "parent": {**nullable(TEXT), "description": "as the state records it; a root (depth "
                   "0) whose parent is not null had its parent deleted"},
        "depth": WHOLE, "timestamp": TIMESTAMP,
        "first_line": {**TEXT, "description": "the first line of its code that is not blank, "
                                              "cut to 80 characters"},
        "approx_bytes": {**WHOLE, "description": "what it holds that its parent does not"},
        "children": {**WHOLE, "description": "states made from it"},
        "checkpoint": {"const": True}},
        ["name", "parent", "depth", "timestamp", "first_line", "approx_bytes", "children"],
        description="`checkpoint` appears on checkpoints only.")


def _diff():
    variable = obj({"type": TEXT,
                    "shape": {"type": "array", "items": WHOLE,
                              "description": "an array's or a frame's"},
                    "length": {**WHOLE, "description": "a string's or a container's"},
                    "repr": TEXT}, ["type", "repr"])
    return obj({
        "from": TEXT, "to": TEXT,
        "added": mapping(variable, "names only the second state has"),
        "removed": mapping(variable, "names only the first state has"),
        "changed": mapping(obj({"before": variable, "after": variable, "not_compared": {
            **TEXT, "description": "why the two values could not be compared (a bound on the "
                                   "diff's work, an object with no value to compare): listed "
                                   "in case it changed"}}, ["before", "after"]),
            "names the two states hold different values under, compared by what they hold"),
    })


def _outputs():
    """Jupyter-shaped output items, told apart by ``output_type``."""
    bundle = {"data": mapping({}, "mime type: value (`text/plain` always; images base64)"),
              "metadata": {"type": "object"}}
    kinds = {"StreamOutput": ("stream", {"name": {"enum": list(STREAMS)}, "text": TEXT}),
             "DisplayData": ("display_data", bundle),
             "ExecuteResult": ("execute_result", bundle),
             "ErrorOutput": ("error", {"ename": TEXT, "evalue": TEXT,
                                       "traceback": {"type": "array", "items": TEXT}})}
    schemas = {name: obj({"output_type": {"const": kind}, **fields})
               for name, (kind, fields) in kinds.items()}
    schemas["Output"] = {"oneOf": [ref(name) for name in kinds],
                         "discriminator": {"propertyName": "output_type", "mapping": {
                             kind: ref(name)["$ref"] for name, (kind, _) in kinds.items()}}}
    return schemas


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
