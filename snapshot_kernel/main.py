"""The HTTP face of SnapshotKernel: token-checked Bottle routes, served by ``server``.

    python -m snapshot_kernel.main --bind 127.0.0.1:8080 --token SECRET

Every error is ``{"error": "..."}`` with Content-Type application/json, made in
``_json_error``; kernel exceptions map to statuses in ``KERNEL_ERROR_STATUS``.
An exception raised by a cell is not an HTTP error: it is a 200 whose ``error``
is set.
"""

import argparse
import hmac
import json
import os
import re
import sys
import threading

import bottle

from . import kernel as k
from .server import (CLIENT_GONE, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEAD,
                     DEFAULT_REQUEST_TIMEOUT, RETRY_AFTER, error_body, exit_now, make_server,
                     serve_until_signalled)

TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"
DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_THREADS = 16
CONTROL_THREADS = 4  # workers /execute never takes, so that control requests always find one
DEFAULT_MAX_RUNNING = DEFAULT_THREADS - CONTROL_THREADS
DEFAULT_MAX_BODY = 10 * 1024 * 1024
MAX_JSON_DEPTH = 32  # request bodies are flat objects; this only has to stop a parse's recursion

KERNEL_ERROR_STATUS = {
    k.InvalidArgument: 400,
    k.UnknownState: 404,
    k.UnknownExecution: 404,
    k.StateExists: 409,
    k.ExecutionExists: 409,
    k.ProtectedState: 409,
}

# Request fields: name -> (JSON types accepted, required).
_TEXT, _NUMBER, _WHOLE = (str,), (int, float), (int,)
EXECUTE_FIELDS = {"code": (_TEXT, True), "state_name": (_TEXT, True),
                  "exec_id": (_TEXT, False), "new_state_name": (_TEXT, False),
                  "timeout": (_NUMBER, False), "max_output": (_WHOLE, False)}
INTERRUPT_FIELDS = {"exec_id": (_TEXT, True)}


def create_app(kernel, token, max_body=DEFAULT_MAX_BODY, max_running=DEFAULT_MAX_RUNNING):
    """A Bottle app serving ``kernel`` to clients that present ``token``.

    At most ``max_running`` requests to /execute are served at once; more are
    refused with a 503, so that they never wait on a worker that control
    requests (/interrupt, /executions, /reset, /states) need.
    """
    if not token:
        raise ValueError("a non-empty token is required")
    app = bottle.Bottle()
    app.default_error_handler = _json_error
    expected = token.encode("utf-8")
    app.add_hook("before_request", lambda: _authorize(expected))
    app.install(_map_kernel_errors)
    running = threading.BoundedSemaphore(max_running)

    @app.post("/execute")
    def execute():
        _take_execute_slot(running, max_running)
        try:
            body = _json_body(max_body, EXECUTE_FIELDS)
            _refuse_if_client_gone()
            return kernel.execute(body["code"], body["state_name"], body.get("exec_id"),
                                  body.get("new_state_name"), body.get("timeout"),
                                  body.get("max_output"))
        finally:
            running.release()

    @app.get("/executions")
    def list_executions():
        return {"executions": kernel.executions()}

    @app.get("/states")
    def list_states():
        return {"states": kernel.state_names()}

    @app.get("/states/<name>")
    def describe_state(name):
        return kernel.describe(name)

    @app.delete("/states/<name>")
    def delete_state(name):
        _refuse_if_client_gone()
        kernel.delete(name)
        return {"deleted": name}

    @app.post("/reset")
    def reset():
        _refuse_if_client_gone()
        return {"states": kernel.reset()}

    @app.post("/interrupt")
    def interrupt():
        exec_id = _json_body(max_body, INTERRUPT_FIELDS)["exec_id"]
        kernel.interrupt(exec_id)
        return {"interrupted": exec_id}

    return app


def _authorize(expected):
    """Refuse the request unless it carries the token, as a Bearer header or ?token=."""
    if not _token_matches(_presented_token(), expected):
        raise bottle.HTTPError(
            401, "missing or wrong token: send 'Authorization: Bearer <token>' or ?token=<token>",
            **{"WWW-Authenticate": "Bearer"})


def _presented_token():
    # The raw WSGI value: bottle's own accessor fails on bytes that are not UTF-8.
    header = bottle.request.environ.get("HTTP_AUTHORIZATION", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        try:
            return value.strip().encode("latin-1")  # WSGI passes header bytes as latin-1
        except UnicodeEncodeError:  # not a header a real client could send: no token
            return None
    query = bottle.request.query.getunicode("token")
    return query.encode("utf-8") if query else None


def _token_matches(presented, expected):
    return presented is not None and hmac.compare_digest(presented, expected)


def _json_error(error):
    """The one error body, ``{"error": message}`` as JSON, whatever the status."""
    bottle.response.content_type = "application/json"
    message = error.body if isinstance(error.body, str) and error.body else error.status_line
    if error.status_code == 500:
        message = "internal server error; the server log has the traceback"
    return error_body(message)


def _take_execute_slot(slots, limit):
    """Take one of ``limit`` slots for an /execute, or refuse it at once with a 503."""
    if not slots.acquire(blocking=False):
        raise bottle.HTTPError(503, f"{limit} executions are in progress, the most this server "
                                    "runs at once (--max-running); retry later",
                               **{"Retry-After": RETRY_AFTER})


def _refuse_if_client_gone():
    """Do nothing for a client that hung up while its request waited for a worker."""
    gone = bottle.request.environ.get(CLIENT_GONE)
    if gone is not None and gone():
        raise bottle.HTTPError("499 Client Closed Request",
                               "the client closed the connection before the request ran; "
                               "nothing was done")


def _map_kernel_errors(callback):
    """Bottle plugin: turn KernelError into the HTTP status of its class."""

    def wrapper(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except k.KernelError as exc:
            status = next(KERNEL_ERROR_STATUS[cls] for cls in type(exc).__mro__
                          if cls in KERNEL_ERROR_STATUS)
            raise bottle.HTTPError(status, str(exc)) from None

    return wrapper


def _json_body(max_body, fields):
    """The request body as a dict with exactly ``fields`` (name: required), or a 4xx."""
    body = _parse_json(_read_body(max_body))
    if not isinstance(body, dict):
        raise bottle.HTTPError(400, f"the body must be a JSON object, not {_json_type(body)}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise bottle.HTTPError(400, f"unknown field(s) {', '.join(unknown)}; "
                                    f"this route takes {', '.join(fields)}")
    for name, (types, required) in fields.items():
        value = body.get(name)
        if value is None and required:
            raise bottle.HTTPError(400, f"field {name!r} is required")
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            expected = " or ".join(sorted({_json_type(t()) for t in types}))
            raise bottle.HTTPError(400, f"field {name!r} must be {expected}, "
                                        f"not {_json_type(value)}")
    return body


def _read_body(max_body):
    length = bottle.request.content_length
    # The raw WSGI value: bottle's get_header fails on bytes that are not UTF-8.
    if length < 0 and bottle.request.environ.get("HTTP_TRANSFER_ENCODING"):
        raise bottle.HTTPError(411, "send the body with a Content-Length header")
    if length > max_body:
        raise bottle.HTTPError(413, f"the body is {length} bytes; the limit is {max_body}")
    try:
        return bottle.request.environ["wsgi.input"].read(length) if length > 0 else b""
    except OSError:  # a socket timeout or reset: the body stopped coming
        raise bottle.HTTPError(408, "the body stopped arriving before its Content-Length "
                                    "was reached") from None


def _parse_json(raw):
    if not raw.strip():
        raise bottle.HTTPError(400, "the body is empty; send a JSON object")
    if _nests_too_deep(raw):
        raise bottle.HTTPError(400, f"the body nests arrays and objects more than "
                                    f"{MAX_JSON_DEPTH} deep")
    try:
        return json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError both are
        raise bottle.HTTPError(400, f"the body is not valid JSON: {exc}") from None


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _nests_too_deep(raw):
    """True if ``raw``'s arrays and objects nest over MAX_JSON_DEPTH deep, strings aside.

    Checked before parsing because json.loads recurses once per level, and
    what a deep body then raises differs across CPython versions.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the common case, decided at C speed
    depth = 0
    for bracket in _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > MAX_JSON_DEPTH:
            return True
    return False


def _json_type(value):
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a whole number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# -- command line ---------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="snapshot-kernel",
        description="A branchable Python execution server. Cells run with this "
                    "process's rights: it is not a sandbox; bind it to loopback.")
    parser.add_argument("--bind", default=DEFAULT_BIND, type=_host_port,
                        help=f"HOST:PORT to listen on (default {DEFAULT_BIND}; port 0 picks one)")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                        help=f"the secret clients must send (default: ${TOKEN_ENV}, "
                             "which keeps it out of ps)")
    parser.add_argument("--threads", type=_positive_int, default=DEFAULT_THREADS,
                        help=f"HTTP worker threads, i.e. requests served at once "
                             f"(default {DEFAULT_THREADS})")
    parser.add_argument("--max-running", type=_positive_int, default=None,
                        help="/execute requests served at once; more are refused with a 503 "
                             f"(default: --threads minus {CONTROL_THREADS}, at least 1; "
                             "must be less than --threads)")
    parser.add_argument("--timeout", type=float, default=k.DEFAULT_TIMEOUT,
                        help="seconds a cell may run when its request names no timeout; "
                             f"0 for no limit (default {k.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--max-output", type=_positive_int, default=k.DEFAULT_OUTPUT_LIMIT,
                        help="characters kept of each output stream and of the last "
                             f"expression's repr (default {k.DEFAULT_OUTPUT_LIMIT})")
    parser.add_argument("--max-body", type=_positive_int, default=DEFAULT_MAX_BODY,
                        help=f"largest request body in bytes (default {DEFAULT_MAX_BODY})")
    _add_connection_limits(parser)
    args = parser.parse_args(argv)
    if not args.token:
        parser.error(f"no token: pass --token SECRET or set {TOKEN_ENV}")
    if args.max_running is None:
        args.max_running = max(1, args.threads - CONTROL_THREADS)
    if args.max_running >= args.threads:
        parser.error(f"--max-running ({args.max_running}) must be less than --threads "
                     f"({args.threads}), so that control requests always find a worker")
    return args


def _add_connection_limits(parser):
    parser.add_argument("--max-connections", type=_positive_int, default=DEFAULT_MAX_CONNECTIONS,
                        help="open connections at most; a new one displaces the one that has "
                             "waited longest for a request, or is refused with a 503 "
                             f"(default {DEFAULT_MAX_CONNECTIONS})")
    parser.add_argument("--max-header", type=_positive_int, default=DEFAULT_MAX_HEAD,
                        help="largest request line plus headers in bytes; more is a 414 or 431 "
                             f"(default {DEFAULT_MAX_HEAD})")
    parser.add_argument("--request-timeout", type=_positive_float,
                        default=DEFAULT_REQUEST_TIMEOUT,
                        help="seconds a client has to send a request line and headers, from "
                             "connecting or from the previous reply; also the longest pause "
                             f"allowed in a body (default {DEFAULT_REQUEST_TIMEOUT:g})")


def _host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv=None):
    args = parse_args(argv)
    kernel = k.SnapshotKernel(timeout=args.timeout or None, output_limit=args.max_output)
    app = create_app(kernel, args.token, args.max_body, args.max_running)
    server = make_server(app, args.bind, args.threads, args.max_connections, args.max_header,
                         args.request_timeout)
    server.prepare()
    host, port = server.bind_addr[:2]
    print(f"snapshot-kernel listening on http://{host}:{port}", file=sys.stderr, flush=True)
    serve_until_signalled(server, kernel.close)  # kernel.close: waiting requests answer at once
    exit_now()  # without joining what cells left running: threads, executors, child processes


if __name__ == "__main__":
    main()
