"""The HTTP face of SnapshotKernel: token-checked Bottle routes on multi-threaded Cheroot.

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
import signal
import sys

import bottle
import cheroot.wsgi

from . import kernel as k

TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"
DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_THREADS = 16
DEFAULT_MAX_BODY = 10 * 1024 * 1024

KERNEL_ERROR_STATUS = {
    k.InvalidName: 400,
    k.UnknownState: 404,
    k.UnknownExecution: 404,
    k.StateExists: 409,
    k.ExecutionExists: 409,
    k.ProtectedState: 409,
}

EXECUTE_FIELDS = {"code": True, "state_name": True, "exec_id": False, "new_state_name": False}
INTERRUPT_FIELDS = {"exec_id": True}


def create_app(kernel, token, max_body=DEFAULT_MAX_BODY):
    """A Bottle app serving ``kernel`` to clients that present ``token``."""
    if not token:
        raise ValueError("a non-empty token is required")
    app = bottle.Bottle()
    app.default_error_handler = _json_error
    expected = token.encode("utf-8")
    app.add_hook("before_request", lambda: _authorize(expected))
    app.install(_map_kernel_errors)

    @app.post("/execute")
    def execute():
        body = _json_body(max_body, EXECUTE_FIELDS)
        return kernel.execute(body["code"], body["state_name"], body.get("exec_id"),
                              body.get("new_state_name"))

    @app.get("/states")
    def list_states():
        return {"states": kernel.state_names()}

    @app.get("/states/<name>")
    def describe_state(name):
        return kernel.describe(name)

    @app.delete("/states/<name>")
    def delete_state(name):
        kernel.delete(name)
        return {"deleted": name}

    @app.post("/reset")
    def reset():
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
    header = bottle.request.get_header("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip().encode("latin-1")  # WSGI hands headers over as latin-1
    query = bottle.request.query.getunicode("token")
    return query.encode("utf-8") if query else b""


def _token_matches(presented, expected):
    return hmac.compare_digest(presented, expected)


def _json_error(error):
    """The one error body: ``{"error": message}`` as JSON, whatever the status."""
    bottle.response.content_type = "application/json"
    message = error.body if isinstance(error.body, str) and error.body else error.status_line
    if error.status_code == 500:
        message = "internal server error; the server log has the traceback"
    return json.dumps({"error": message})


def _map_kernel_errors(callback):
    """Bottle plugin: turn KernelError into the HTTP status of its class."""

    def wrapper(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except k.KernelError as exc:
            raise bottle.HTTPError(KERNEL_ERROR_STATUS[type(exc)], str(exc)) from None

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
    for name, required in fields.items():
        value = body.get(name)
        if value is None and required:
            raise bottle.HTTPError(400, f"field {name!r} is required")
        if value is not None and not isinstance(value, str):
            raise bottle.HTTPError(400, f"field {name!r} must be a string, "
                                        f"not {_json_type(value)}")
    return body


def _read_body(max_body):
    length = bottle.request.content_length
    if length < 0 and "chunked" in bottle.request.get_header("Transfer-Encoding", "").lower():
        raise bottle.HTTPError(411, "send the body with a Content-Length header")
    if length > max_body:
        raise bottle.HTTPError(413, f"the body is {length} bytes; the limit is {max_body}")
    return bottle.request.body.read() if length > 0 else b""


def _parse_json(raw):
    if not raw.strip():
        raise bottle.HTTPError(400, "the body is empty; send a JSON object")
    try:
        return json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError both are
        raise bottle.HTTPError(400, f"the body is not valid JSON: {exc}") from None


def _json_type(value):
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
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
    parser.add_argument("--max-body", type=_positive_int, default=DEFAULT_MAX_BODY,
                        help=f"largest request body in bytes (default {DEFAULT_MAX_BODY})")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error(f"no token: pass --token SECRET or set {TOKEN_ENV}")
    return args


def _host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def make_server(app, bind, threads):
    """A Cheroot server for ``app``; call ``prepare()`` to bind it."""
    return cheroot.wsgi.Server(bind, app, numthreads=threads,
                               server_name="snapshot-kernel")


def _stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt  # the main thread runs the serve loop; it stops the server


def main(argv=None):
    args = parse_args(argv)
    server = make_server(create_app(k.SnapshotKernel(), args.token, args.max_body),
                         args.bind, args.threads)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    server.prepare()
    host, port = server.bind_addr[:2]
    print(f"snapshot-kernel listening on http://{host}:{port}", file=sys.stderr, flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        print("snapshot-kernel shutting down", file=sys.stderr, flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
