"""How the MCP server is served: on stdio, or as streamable HTTP at ``/mcp`` to clients
that send the token (``RequireToken``).

It does not import the ``mcp`` SDK: it serves the server ``server.create_server`` made,
and only ``server`` imports it. anyio, and uvicorn for HTTP, come with the ``mcp`` extra.
"""

import functools
import hmac
import json
import signal
import socket
import sys

import anyio

HTTP_PATH = "/mcp"
SHUTDOWN_GRACE = 2       # seconds open HTTP streams get when the server stops


def serve_stdio(server):
    """Serve on stdin and stdout until the host closes stdin or sends SIGINT."""
    # The SDK points fd 0 at /dev/null and fd 1 at stderr while it serves, so that what
    # cells and their subprocesses print cannot corrupt the protocol, but only if
    # sys.stdin and sys.stdout are the process's own: the kernel wrapped them, and wraps
    # them again before its next cell (capture.install).
    sys.stdin, sys.stdout = sys.__stdin__, sys.__stdout__
    try:
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:  # SIGINT: stop serving like at the end of stdin
        pass


def listen(bind):
    """A socket listening on ``(host, port)``; port 0 picks a free one."""
    host, port = bind
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def serve_http(server, listener, token):
    """Serve streamable HTTP at ``/mcp`` on ``listener`` to clients that send ``token``,
    until SIGINT or SIGTERM; the URL is printed on stderr first."""
    import uvicorn  # a dependency of the SDK's HTTP transport

    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if listener.family == socket.AF_INET6 else host
    app = RequireToken(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host),
                       token.encode("utf-8"))
    print(f"snapshot-kernel mcp listening on http://{shown}:{port}{HTTP_PATH}",
          file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE)
    http = uvicorn.Server(config)

    def stop(signum, frame):
        http.should_exit = True

    # uvicorn stops on these signals, then raises them again for the handlers it found:
    # with ours, the caller closes the kernel and exits 0, as the HTTP server does.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    anyio.run(functools.partial(http.serve, sockets=[listener]))


class RequireToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` is a 401."""

    def __init__(self, app, token):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _bearer_matches(scope, self.token):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "missing or wrong token: send 'Authorization: Bearer "
                                    "<token>'"}).encode("utf-8")
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _bearer_matches(scope, token):
    """Whether the request's Authorization header is ``Bearer <token>`` (bytes, constant time)."""
    header = dict(scope.get("headers") or ()).get(b"authorization", b"")
    scheme, _, value = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), token)
