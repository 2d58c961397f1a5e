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
import threading

import bottle
import cheroot.wsgi

from . import kernel as k

TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"
DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_THREADS = 16
DEFAULT_MAX_BODY = 10 * 1024 * 1024

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
                              body.get("new_state_name"), body.get("timeout"),
                              body.get("max_output"))

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
    if length < 0 and "chunked" in bottle.request.get_header("Transfer-Encoding", "").lower():
        raise bottle.HTTPError(411, "send the body with a Content-Length header")
    if length > max_body:
        raise bottle.HTTPError(413, f"the body is {length} bytes; the limit is {max_body}")
    return bottle.request.environ["wsgi.input"].read(length) if length > 0 else b""


def _parse_json(raw):
    if not raw.strip():
        raise bottle.HTTPError(400, "the body is empty; send a JSON object")
    try:
        return json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError both are
        raise bottle.HTTPError(400, f"the body is not valid JSON: {exc}") from None


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
    parser.add_argument("--timeout", type=float, default=k.DEFAULT_TIMEOUT,
                        help="seconds a cell may run when its request names no timeout; "
                             f"0 for no limit (default {k.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--max-output", type=_positive_int, default=k.DEFAULT_OUTPUT_LIMIT,
                        help="characters kept of each output stream and of the last "
                             f"expression's repr (default {k.DEFAULT_OUTPUT_LIMIT})")
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


def serve_until_signalled(server, kernel):
    """Serve in a thread until SIGINT or SIGTERM, then stop cleanly.

    The handlers only set an event: raising from a handler can interrupt the
    main thread inside a queue operation and lose a worker's wake-up, which
    made stop() wait forever.
    """
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    serving = threading.Thread(target=server.serve, name="snapshot-kernel serve", daemon=True)
    serving.start()
    while serving.is_alive() and not stopping.wait(0.5):
        pass
    print("snapshot-kernel shutting down", file=sys.stderr, flush=True)
    kernel.close()  # running cells would otherwise keep their workers, and stop(), waiting
    server.stop()


def main(argv=None):
    args = parse_args(argv)
    kernel = k.SnapshotKernel(timeout=args.timeout or None, output_limit=args.max_output)
    server = make_server(create_app(kernel, args.token, args.max_body), args.bind, args.threads)
    server.prepare()
    host, port = server.bind_addr[:2]
    print(f"snapshot-kernel listening on http://{host}:{port}", file=sys.stderr, flush=True)
    serve_until_signalled(server, kernel)


if __name__ == "__main__":
    main()
