"""The HTTP face of SnapshotKernel: token-checked Bottle routes, served by ``server``.

    python -m snapshot_kernel.main --bind 127.0.0.1:8080 --token SECRET

Every error is ``{"error": "..."}`` with Content-Type application/json, made in
``_json_error``; kernel exceptions map to statuses in ``KERNEL_ERROR_STATUS``.
An exception raised by a cell is not an HTTP error: it is a 200 whose ``error``
is set.
"""

import difflib
import functools
import hmac
import os
import shutil
import sys
import urllib.parse

import bottle

from . import errors
from .mcp import cli as mcp_cli
from .web import openapi
from .web.bodies import (DEFAULT_MAX_IMPORT, DEFAULT_PAGE, EXECUTE_FIELDS,
                         INTERRUPT_FIELDS, MAX_OFFSET, MAX_PAGE, MAX_POLL, BadRequest, BodyStream,
                         json_body, query_flag, query_number)
from .files import Workdir
from .states.store import StoreError
from .cli import (DEFAULT_MAX_BODY, DEFAULT_MAX_RUNNING, enter_workdir, journal_for, kernel_from,
                  parse_args, private_sandbox_dir, private_state_dir)
from .crashes import FORCED_EXIT
from .sandbox.confine import confine, protect_supervisor
from .supervisor import supervise
from .tree import drawn
from .web.fileroutes import add_file_routes
from .web.guards import KnownQueries, hold_while_replacing, reply_then_exit, shown_rule
from .web.process import SHUTDOWN_TIMEOUT, exit_now, say, serve_until_signalled
from .web.replies import reply_format, reply_parts
from .web.request import error_body
from .web.server import ANSWER_NOW, CLIENT_GONE, listening_socket, make_server
from .web.waiting import Slots, reply_while_client_waits

KERNEL_ERROR_STATUS = {
    errors.InvalidArgument: 400,
    errors.UnknownState: 404,
    errors.UnknownExecution: 404,
    errors.StateExists: 409,
    errors.ExecutionExists: 409,
    errors.ProtectedState: 409,
    errors.CannotReplace: 409,
    errors.UnknownFile: 404,
    errors.FileConflict: 409,
    errors.FileTooLarge: 413,
    errors.FileDenied: 403,
    errors.NoSpace: 507,
    errors.ResetMeanwhile: 409,
    errors.BadArchive: 400,
    errors.IncompatibleArchive: 422,
}


def create_app(kernel, token, max_body=DEFAULT_MAX_BODY, max_running=DEFAULT_MAX_RUNNING,
               files=None, max_import=DEFAULT_MAX_IMPORT, sandbox=None):
    """A Bottle app serving ``kernel``, and the ``files`` of a ``Workdir`` (by default
    the kernel's workdir, where its cells run, or the current directory), to clients
    that present ``token``; GET /openapi.json says what the ``sandbox`` (a
    ``sandbox.confine.Confinement``; None: none) confines.

    At most ``max_running`` requests that wait on a cell (a waiting /execute, a
    long poll) or move a file's bytes are served at once; more are refused with
    a 503, so that they never hold a worker that control requests (/interrupt,
    /executions, /reset, /states) need. ``"wait": false`` executions hold no worker.
    JSON bodies are at most ``max_body`` bytes, archives to import ``max_import``.
    """
    if not token:
        raise ValueError("a non-empty token is required")
    app = bottle.Bottle()
    app.default_error_handler = _json_error
    expected = token.encode("utf-8")
    app.add_hook("before_request", hold_while_replacing)
    app.add_hook("before_request", lambda: _authorize(expected))
    app.add_hook("before_request", _route_the_path_sent)
    app.install(_map_kernel_errors)
    app.install(KnownQueries())
    waiting = Slots(max_running, bottle.HTTPError)
    files = Workdir(kernel.server.workdir or os.getcwd()) if files is None else files

    @app.post("/execute")
    def execute():
        body = json_body(bottle.request.environ, max_body, EXECUTE_FIELDS)
        form = _reply_format(body.get("format"))
        if body.get("wait") is False:
            return _started(kernel.start(*_execute_arguments(body)))
        with waiting.slot() as release:
            _refuse_if_client_gone()
            environ = bottle.request.environ
            answer_now = environ.get(ANSWER_NOW)
            if answer_now is None:  # another WSGI server (WebTest): the cell runs on a cell thread
                run = kernel.start(*_execute_arguments(body))
                gone = environ.get(CLIENT_GONE)
                return _rendered(reply_while_client_waits(kernel, run.exec_id, gone), form)

            def abandoned(reply):  # the cell holds this worker: answer from the caller's thread
                release()
                answer_now("200 OK", *reply_parts(reply, form))

            return _rendered(kernel.execute_here(*_execute_arguments(body),
                                                 client_gone=environ.get(CLIENT_GONE),
                                                 on_abandon=abandoned), form)

    @app.get("/executions")
    def list_executions():
        return {"executions": kernel.executions(), "finished": kernel.finished_executions()}

    @app.get("/executions/<exec_id>", query=("wait",))
    def get_execution(exec_id):
        wait = _query_number("wait", 0.0, MAX_POLL)
        if not wait:
            return kernel.execution(exec_id)
        with waiting.slot():
            return kernel.execution(exec_id, wait)

    @app.get("/executions/<exec_id>/output", query=("stream", "offset", "limit"))
    def get_output(exec_id):
        stream = _query_text("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            raise bottle.HTTPError(400, "stream must be stdout or stderr")
        offset = _query_number("offset", 0, MAX_OFFSET, whole=True)
        limit = _query_number("limit", DEFAULT_PAGE, MAX_PAGE, whole=True) or DEFAULT_PAGE
        return kernel.output(exec_id, stream, offset, limit)

    @app.get("/states", query=("tree", "format"))
    def list_states():
        tree, form = _query_flag("tree"), _reply_format(_query_text("format"))
        if form == "text":
            bottle.response.content_type = "text/plain; charset=utf-8"
            return drawn(kernel.state_tree()).encode("utf-8", "backslashreplace")
        if tree:
            return {"states": kernel.state_tree()}
        return {"states": kernel.state_names()}

    @app.get("/states/<name>")
    def describe_state(name):
        return kernel.describe(name)

    @app.get("/states/<name>/export")
    def export_state(name):
        writer, _ = kernel.export_state(name)
        bottle.response.content_type = "application/x-tar"
        bottle.response.set_header("Content-Length", str(writer.size))
        bottle.response.set_header("Content-Disposition", _attachment(f"{name}.tar"))
        return writer.chunks()

    @app.put("/states/<name>")
    def import_state(name):
        _refuse_if_client_gone()
        return kernel.import_state(name, BodyStream(bottle.request.environ, max_import))

    @app.delete("/states/<name>", query=("descendants",))
    def delete_state(name):
        descendants = _query_flag("descendants")
        _refuse_if_client_gone()
        below = kernel.delete(name, descendants)
        return {"deleted": name, "descendants": below} if descendants else {"deleted": name}

    @app.post("/reset")
    def reset():
        _refuse_if_client_gone()
        return {"states": kernel.reset()}

    @app.post("/interrupt")
    def interrupt():
        body = json_body(bottle.request.environ, max_body, INTERRUPT_FIELDS)
        exec_id = body["exec_id"]
        if not body.get("force"):
            kernel.interrupt(exec_id)
            return {"interrupted": exec_id}
        if kernel.stop_by_force(exec_id):  # the interrupt reached it after all
            return {"interrupted": exec_id, "replaced": False}
        reply_then_exit({"interrupted": exec_id, "replaced": True}, FORCED_EXIT)

    @app.get("/states/<name>/diff/<other>")
    def diff_states(name, other):
        return kernel.diff(name, other)

    add_file_routes(app, files, waiting)

    @app.get("/openapi.json")
    def openapi_document():
        return openapi.document(max_body, files.max_file, max_import, sandbox)

    return app


def _execute_arguments(body):
    return (body["code"], body["state_name"], body.get("exec_id"), body.get("new_state_name"),
            body.get("timeout"), body.get("max_output"), body.get("store") is not False)


def _started(run):
    location = f"/executions/{urllib.parse.quote(run.exec_id, safe='')}"
    bottle.response.status = 202
    bottle.response.set_header("Location", location)
    return {"exec_id": run.exec_id, "status": "waiting" if run.waiting else "running",
            "location": location}


def _reply_format(requested):
    return reply_format(requested, bottle.request.environ.get("HTTP_ACCEPT", ""))


def _rendered(reply, form):
    """The reply as JSON, or as concise text with the names in headers."""
    if form == "json":
        return reply
    headers, body = reply_parts(reply, form)
    for header, value in headers:
        bottle.response.set_header(header, value)
    return body


def _attachment(filename):
    """A Content-Disposition for a download named ``filename`` (RFC 6266: any characters)."""
    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\%' else "_"
                         for c in filename)
    quoted = urllib.parse.quote(filename, safe="")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quoted}"


def _query_flag(name):
    return query_flag(name, _query_text(name))


def _query_number(name, default, highest, whole=False):
    return query_number(name, _query_text(name), default, highest, whole)


def _query_text(name, default=None):
    """Query parameter ``?name=`` as text; ``default`` if absent, a 400 if not UTF-8
    (Bottle's ``getunicode`` answers ``default`` then, as if it had not been sent)."""
    value = bottle.request.query.get(name)
    if value is None:
        return default
    try:
        return value.encode("latin-1").decode("utf-8")  # Bottle decodes the query as latin-1
    except UnicodeError:
        raise BadRequest(400, f"?{name}= is not UTF-8 once its %-escapes are decoded") from None


def _authorize(expected):
    """Refuse the request unless it carries the token, as a Bearer header or ?token=."""
    if not _token_matches(_presented_token(), expected):
        raise bottle.HTTPError(
            401, "missing or wrong token: send 'Authorization: Bearer <token>' or ?token=<token>",
            **{"WWW-Authenticate": "Bearer"})


def _route_the_path_sent():
    """Route the path the client sent. Bottle drops the bytes of a path that are not UTF-8
    (``decode("utf8", "ignore")``) and routes what is left, so ``DELETE /states/a%FFb``
    would delete ``ab``: such a path is refused. Cheroot leaves '%2F' encoded in PATH_INFO
    (to tell it from '/'), where other servers and WebTest decode it: here it is a '/' too,
    so ``/files/`` plus ``quote(path, safe="")`` names the file ``path``, and the checks
    on a path see the one sent. A literal '%' is '%25'."""
    environ = bottle.request.environ
    try:
        environ["bottle.raw_path"].encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise bottle.HTTPError(400, "the request's path is not UTF-8 once its %-escapes are "
                                    "decoded; names and paths here are UTF-8") from None
    uri = environ.get("REQUEST_URI", "")
    if "%2f" in uri.lower():
        sent = urllib.parse.unquote(urllib.parse.urlsplit(uri).path, errors="strict")
        environ["PATH_INFO"] = sent[len(environ.get("SCRIPT_NAME", "")):]


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
    elif error.status_code == 405 and "Allow" in error.headers:  # from Bottle's router
        message = (f"{bottle.request.method} is not allowed on {bottle.request.path}; "
                   f"use {' or '.join(error.headers['Allow'].split(','))}")
    elif error.status_code == 404 and message.startswith("Not found: "):  # ditto: no route
        message = _no_route(bottle.request.path, bottle.request.app.routes)
    return error_body(message)


def _no_route(path, routes):
    """What a 404 for an unknown route says: the nearest route, and all of them."""
    rules = [shown_rule(route.rule) for route in routes]
    served = [f"{route.method} {rule}" for route, rule in zip(routes, rules)]
    nearest = difflib.get_close_matches(path, rules, 1, 0.5)
    hint = [each for each, rule in zip(served, rules) if nearest and rule == nearest[0]]
    return (f"no route {path!r}" + (f"; did you mean {' or '.join(hint)}?" if hint else ".")
            + f" The routes: {', '.join(served)} (GET /openapi.json describes them).")


def _refuse_if_client_gone():
    """Do nothing for a client that hung up while its request waited for a worker."""
    gone = bottle.request.environ.get(CLIENT_GONE)
    if gone is not None and gone():
        raise bottle.HTTPError("499 Client Closed Request",
                               "the client closed the connection before the request ran; "
                               "nothing was done")


def _map_kernel_errors(callback):
    """Bottle plugin: turn KernelError into the HTTP status of its class, and a
    request the checks refused (``bodies.BadRequest``) into its status."""

    def wrapper(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except BadRequest as exc:
            raise bottle.HTTPError(exc.status, str(exc)) from None
        except errors.KernelError as exc:
            status = next(KERNEL_ERROR_STATUS[cls] for cls in type(exc).__mro__
                          if cls in KERNEL_ERROR_STATUS)
            raise bottle.HTTPError(status, str(exc)) from None

    return wrapper


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["mcp"]:  # snapshot-kernel mcp ...: the MCP front (mcp/cli.py)
        return mcp_cli.main(argv[1:])
    args = parse_args(argv)
    files = enter_workdir(args)
    try:
        listener = listening_socket(args.bind)
    except OSError as exc:
        sys.exit(f"snapshot-kernel: cannot listen on {args.bind[0]}:{args.bind[1]} ({exc})")
    sandbox_dir = private_sandbox_dir(args)
    if args.no_supervisor:
        journal, stop = journal_for(args, supervised=False)
        serve(args, listener, files, stop, journal)
    private = private_state_dir(args)
    journal, stop = journal_for(args, supervised=True)
    if sandbox_dir is not None:
        protect_supervisor()
    # The supervisor kills a server process still there 0.1 s after it should have exited
    # (serve_until_signalled), and so within the 5 s a stop may take, whatever a cell holds.
    try:
        with listener:
            status = supervise(functools.partial(serve, args, listener, files),
                               SHUTDOWN_TIMEOUT - 0.4, journal, stop)
    finally:  # only the supervisor gets here: a server process ends in os._exit
        for directory in (private, sandbox_dir):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
    sys.exit(status)


def serve(args, listener, files, crash=None, journal=None):
    """Serve on ``listener`` (and ``files``, the working directory) until SIGINT or
    SIGTERM, then end the process; told how the last server (process) ended
    (``crash``), noting executions in ``journal`` (``cli.journal_for``)."""
    sandbox = confine(args, files.root, listener)  # first: before this process starts a thread
    try:
        kernel = kernel_from(args, crash, journal)
    except StoreError as exc:
        sys.exit(f"snapshot-kernel: {exc}")
    app = create_app(kernel, args.token, args.max_body, args.max_running, files,
                     args.max_import, sandbox)
    server = make_server(app, args.bind, args.threads, args.max_connections, args.max_header,
                         args.request_timeout, listener)
    server.prepare()
    sandbox.seal()  # it listens: no socket may from now on, before any cell runs
    if journal is not None:
        journal.ready()
    host, port = server.bind_addr[:2]
    say(f"snapshot-kernel listening on http://{host}:{port}")
    sandbox.say()
    serve_until_signalled(server, kernel.close)  # kernel.close: waiting requests answer at once
    exit_now()  # without joining what cells left running: threads, executors, child processes


if __name__ == "__main__":
    main()
