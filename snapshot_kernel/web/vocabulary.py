"""The vocabulary of the OpenAPI document: schema pieces, error replies and operations, which
``openapi`` and ``openapi_transfers`` build the document from."""

from ..errors import MAX_NAME_LENGTH, NAME_PATTERN
from .server import RETRY_AFTER

# Every route can meet these: the transport's refusals, the token check, a bug.
COMMON_ERRORS = ("400", "401", "414", "431", "500", "501", "503", "505")
# And the routes that read a body, these.
BODY_ERRORS = ("400", "408", "411", "413")
# And the routes that touch files, these.
FILE_ERRORS = ("403", "404", "409")


# -- schema pieces -----------------------------------------------------------------------

def ref(name, kind="schemas"):
    return {"$ref": f"#/components/{kind}/{name}"}


def nullable(schema):
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties, required=None, **extra):
    """A closed object: ``required`` lists the keys always present (default: all)."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required,
            "additionalProperties": False, **extra}


def mapping(values, description):
    """An object whose keys are free and whose values follow ``values``."""
    return {"type": "object", "additionalProperties": values, "description": description}


TEXT = {"type": "string"}
WHOLE = {"type": "integer", "minimum": 0}
FLAG = {"type": "boolean"}
TIMESTAMP = {"type": "string", "format": "date-time"}
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH,
        "pattern": NAME_PATTERN, "examples": ["initial"],  # exactly what errors.check_name takes
        "description": f"1 to {MAX_NAME_LENGTH} characters, not '.' or '..', without '/', "
                       "'\\', control characters (U+0000-U+001F, U+007F-U+009F), line or "
                       "paragraph separators or lone surrogates, and not starting or ending "
                       "with whitespace"}


# -- responses ----------------------------------------------------------------------------

def json_reply(description, schema, headers=None):
    reply = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        reply["headers"] = headers
    return reply


def header(description, required=True):
    return {"description": description, "required": required, "schema": TEXT}


RETRY = {"Retry-After": header(f"seconds to wait: always {RETRY_AFTER}")}
ERRORS = {
    "400": ("BadRequest", "The request is malformed: the body, a field, a name, a query "
                          "parameter, or the HTTP itself. The message says which."),
    "401": ("Unauthorized", "The token is missing or wrong. Nothing was done."),
    "403": ("Forbidden", "The server's user may not read or write that file."),
    "404": ("NotFound", "No such state, execution or file (execution records are kept a "
                        "while after they end)."),
    "408": ("BodyTimeout", "The body stopped arriving for --request-timeout seconds."),
    "409": ("Conflict", "The name is taken, or the state is protected; for a file, the path "
                        "names a directory where a file is needed or the other way round, or "
                        "a directory to delete is not empty."),
    "422": ("Incompatible", "The archive is whole, but this server cannot load its state: "
                            "another CPython minor version, or a library it lacks or has in "
                            "another major version. Nothing was stored."),
    "411": ("LengthRequired", "A body sent with Transfer-Encoding and no Content-Length."),
    "413": ("BodyTooLarge", "The body is larger than --max-body (a file: --max-file)."),
    "414": ("UriTooLong", "The request line is longer than --max-header."),
    "431": ("HeadersTooLarge", "The request line and headers are longer than --max-header."),
    "499": ("ClientGone", "The client closed the connection before the request ran; nothing "
                          "was done (nobody reads this reply)."),
    "500": ("InternalError", "A bug in the server; its stderr has the traceback."),
    "501": ("NotImplemented", "A Transfer-Encoding other than chunked."),
    "503": ("Busy", "--max-running requests are waiting on cells, or --max-connections "
                    "connections are being served. Retry after Retry-After seconds."),
    "505": ("VersionNotSupported", "An HTTP version other than 1.x."),
    "507": ("InsufficientStorage", "The disk, or the server user's quota, is full. Nothing "
                                   "was stored."),
}
ERROR_HEADERS = {"401": {"WWW-Authenticate": header("`Bearer`")}, "503": RETRY}


def errors_of(*statuses):
    """The error replies of an operation: ``statuses`` and the ones every route can meet."""
    return {status: ref(ERRORS[status][0], "responses")
            for status in sorted({*statuses, *COMMON_ERRORS})}


# -- operations ----------------------------------------------------------------------------

def operation(operation_id, tag, summary, reply, *statuses, description=None, **extra):
    """One operation: its id, summary, 200 reply and error statuses, and ``extra`` fields."""
    op = {"operationId": operation_id, "tags": [tag], "summary": summary}
    if description:
        op["description"] = description
    op.update(extra)
    op["responses"] = {"200": reply, **errors_of(*statuses)}
    return op


def path_name(name, description):
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": ref("Name")}


def query(name, description, schema):
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema}


def body(name):
    return {"required": True, "content": {"application/json": {"schema": ref(name)}}}
