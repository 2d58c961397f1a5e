"""The command line of ``snapshot-kernel mcp``: the kernel for MCP hosts.

    snapshot-kernel mcp                                  # stdio, a kernel in this process
    snapshot-kernel mcp --transport http --bind 127.0.0.1:8000    # streamable HTTP at /mcp
    snapshot-kernel mcp --url http://127.0.0.1:8080      # front a running server

The token (``--token``, default ``$SNAPSHOT_KERNEL_TOKEN``) is the one the
server at ``--url`` wants, and the one MCP clients must send over HTTP. The SDK
is the ``mcp`` extra; this module does not import it, so ``--help`` and the
message saying what is missing work without it.
"""

import argparse
import importlib.metadata
import importlib.util
import os
import sys

from .. import cli
from .. import kernel as k
from .backends import BackendError, HttpBackend, KernelBackend
from ..web.process import exit_now
from ..states.store import StoreError

DEFAULT_BIND = "127.0.0.1:8000"
INSTALL = "pip install 'snapshot-kernel[mcp]' (Python 3.10 or later)"
# The flags that shape an embedded kernel: they mean nothing with --url.
KERNEL_FLAGS = ("timeout", "max_output", "state_dir", "max_memory", "keep_results",
                "max_image", "max_full_output", "copy_on_write", "workdir", "max_file")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="snapshot-kernel mcp",
        description="Serve snapshot-kernel to MCP hosts (tools execute_code, list_states, "
                    "get_state, diff_states, delete_state, interrupt, list_executions, "
                    "get_execution, read_output, read_file, write_file, list_files). Code "
                    "runs with this process's rights: it is not a sandbox.")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default), or streamable HTTP at http://HOST:PORT/mcp")
    parser.add_argument("--bind", type=cli._host_port, default=None,
                        help=f"with --transport http: HOST:PORT to listen on (default "
                             f"{DEFAULT_BIND}; port 0 picks one, printed on stderr)")
    parser.add_argument("--url", default=None,
                        help="front the snapshot-kernel server at this URL (e.g. "
                             "http://127.0.0.1:8080) instead of running a kernel here")
    parser.add_argument("--token", default=os.environ.get(cli.TOKEN_ENV),
                        help=f"the --url server's token, and what HTTP clients must send "
                             f"(default: ${cli.TOKEN_ENV}, which keeps it out of ps)")
    parser.add_argument("--timeout", type=float, default=k.DEFAULT_TIMEOUT,
                        help="seconds a cell may run when its call names no timeout; "
                             f"0 for no limit (default {k.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--max-output", type=cli._positive_int, default=k.DEFAULT_OUTPUT_LIMIT,
                        help="characters kept of each output stream and of the last "
                             f"expression's repr (default {k.DEFAULT_OUTPUT_LIMIT})")
    cli._add_kernel_options(parser)
    args = parser.parse_args(argv)
    _check(parser, args)
    return args


def _check(parser, args):
    """Refuse flag combinations that cannot mean what the user wants."""
    if args.transport == "http" and args.bind is None:
        args.bind = cli._host_port(DEFAULT_BIND)
    elif args.transport == "stdio" and args.bind is not None:
        parser.error("--bind is for --transport http")
    if (args.url is not None or args.transport == "http") and not args.token:
        parser.error(f"no token: pass --token SECRET or set {cli.TOKEN_ENV} (the --url "
                     "server's token; over HTTP, what MCP clients must send)")
    if args.url is not None:
        if not args.url.startswith(("http://", "https://")):
            parser.error(f"--url must start with http:// or https://, not {args.url!r}")
        given = [name for name in KERNEL_FLAGS if getattr(args, name) != parser.get_default(name)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            parser.error(f"{flags}: these shape a kernel run here; with --url, set them "
                         "on the server")


def sdk_missing():
    """Why the MCP SDK cannot be used here, or None if it can."""
    if importlib.util.find_spec("mcp") is None:
        return f"the MCP server needs the mcp package: {INSTALL}"
    version = importlib.metadata.version("mcp")
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) != 2:
        return f"the MCP server needs mcp 2.x, found {version}: {INSTALL}"
    return None


def main(argv):
    """``snapshot-kernel mcp ...``: serve until the host goes, then end the process."""
    args = parse_args(argv)
    missing = sdk_missing()
    if missing is not None:
        sys.exit(f"snapshot-kernel mcp: {missing}")
    from . import server as mcp_server  # imports the SDK: only now that it is known to be there
    from . import transports  # (anyio and uvicorn come with it)

    listener = _listen(transports, args.bind) if args.transport == "http" else None
    backend = _backend(args)
    server = mcp_server.create_server(backend)
    if listener is not None:
        transports.serve_http(server, listener, args.token)
    else:
        print(f"snapshot-kernel mcp serving on stdio ({_serving(args)})", file=sys.stderr,
              flush=True)
        transports.serve_stdio(server)
    backend.close()
    exit_now()  # without joining what cells left running, as the HTTP server does


def _listen(transports, bind):
    try:
        return transports.listen(bind)
    except OSError as exc:  # taken, or not an address of this machine
        reason = os.strerror(exc.errno) if exc.errno else exc  # create_server adds the address
        sys.exit(f"snapshot-kernel mcp: cannot listen on {bind[0]}:{bind[1]} ({reason})")


def _backend(args):
    if args.url is None:
        files = cli.enter_workdir(args)
        try:
            return KernelBackend(cli.kernel_from(args), files)
        except StoreError as exc:
            sys.exit(f"snapshot-kernel mcp: {exc}")
    backend = HttpBackend(args.url, args.token)
    try:
        backend.states()
    except BackendError as exc:  # say so now; the tools will say it again on each call
        print(f"snapshot-kernel mcp: warning: {exc}", file=sys.stderr, flush=True)
    return backend


def _serving(args):
    return f"fronting {args.url}" if args.url else "a kernel in this process"
