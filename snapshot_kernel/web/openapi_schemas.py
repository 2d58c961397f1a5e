"""The component schemas of the OpenAPI document (``components/schemas``): the JSON Schemas
of request bodies, from ``bodies``' field tables, and of replies, with the limits and names
of the modules that enforce them; ``openapi`` puts them in the document."""

from ..errors import MAX_POSITIVE
from ..execution import STATUSES
from ..kernel import DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT
from .bodies import EXECUTE_FIELDS, FORMATS, INTERRUPT_FIELDS
from .openapi_transfers import imported
from .vocabulary import FLAG, NAME, TEXT, TIMESTAMP, WHOLE, mapping, nullable, obj, ref

INTERRUPT_REASONS = ("request", "timeout", "memory", "reset", "shutdown", "disconnect",
                     "restart", "force")
STREAMS = ("stdout", "stderr")

_JSON_TYPES = {(str,): "string", (int, float): "number", (int,): "integer", (bool,): "boolean"}


def schemas(max_body):
    """Every schema of the document, by name; request bodies over ``max_body`` bytes are
    refused (None: no limit is said)."""
    named = {
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
    named.update(_outputs())
    return named


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
