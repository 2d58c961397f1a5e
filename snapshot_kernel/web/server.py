"""The Cheroot seam: a WSGI server that idle, slow or hostile clients cannot tie up.

Stock Cheroot hands each new connection to a worker thread, which then blocks
reading the request: 16 idle sockets, or slowloris clients sending a header
byte at a time, hold every worker. Here the selector thread that Cheroot runs
for kept-alive connections also reads each request's head (the request line
and the headers) without blocking, into the connection's own read buffer, and
a worker gets the connection only once the whole head is there. Hence:

- a head must arrive within ``request_timeout`` s of the connection opening
  (or of the previous reply on it), or the connection is closed;
- a head over ``max_head`` bytes is refused (414, 431) once that many bytes
  have come, so a connection never costs more than ``max_head`` of buffer;
- at most ``max_connections`` are open: a new one displaces the connection
  that has waited longest for a head, or gets a 503 if none is waiting;
- a reply that leaves part of the request body unread closes the connection, so
  a refused body is never parsed as the next request. Before closing, the rest
  is read and dropped for up to ``request.REFUSED_BODY_SECONDS``, so that a
  client that sends its whole body before it reads (Python's http.client,
  requests) hears the refusal, not a reset; except after a 401 (a body without
  the token is never read), a refusal of the body itself (408, 411, 413) or a
  503 (which keeps workers free);
- ``Expect: 100-continue`` is answered when the app first reads the body, not
  as soon as the head has come (Cheroot's way), so a request refused unread
  (a 409 for an import onto a taken name) never has its body sent.

A worker may be held by the request it serves for longer than its client should
wait: the app runs a cell on the worker itself, and the cell can hang. The app
then answers from another thread through ``environ[ANSWER_NOW]``: the reply is
written and the connection closed at once, a worker joins the pool in place of
the held one, and the held worker, once its request ends, writes nothing and
leaves the pool as it was.

Cheroot's own refusals (a malformed request line or header, an unknown
Transfer-Encoding, an HTTP version other than 1.x) carry the API's JSON error
body. How one request is answered is ``request.Request``'s; this module holds the
connections and the server. It and ``request`` are the only modules that import
Cheroot.
"""

import functools
import re
import select
import selectors
import socket
import threading
import time

import cheroot.server
import cheroot.wsgi

from .request import EXPECT_HELD, WORKER, ContinueOnRead, Request, error_response

CLIENT_GONE = "snapshot_kernel.client_gone"  # environ key: a callable, true once the client left
ANSWER_NOW = "snapshot_kernel.answer_now"    # environ key: Request.answer_now
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_HEAD = 16 * 1024
DEFAULT_REQUEST_TIMEOUT = 10.0
WORKER_STOP_TIMEOUT = 2.0    # seconds Cheroot waits for busy workers before closing their sockets
RETRY_AFTER = "1"            # seconds, sent with every 503

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_WAITING, _READY, _GONE = "waiting", "ready", "gone"
# Refusals whose body is not read to its end: without the token; of the body itself (it
# stopped, its end cannot be told, it is too large); a 503, which keeps workers free.
_BODY_LEFT_UNREAD = ("401", "408", "411", "413", "499", "503")


class Connection(cheroot.server.HTTPConnection):
    """A client connection that holds one of the server's slots until it is closed."""

    RequestHandlerClass = Request

    def __init__(self, server, sock, makefile):
        self.rbufsize = server.max_head  # the head gate gathers a whole head in this buffer
        super().__init__(server, sock, makefile)
        self.last_used = time.time()  # the first request's deadline counts from the accept
        self.admitted = False

    def head_status(self):
        """Read what has arrived without blocking: ready, waiting, gone, or an error status."""
        self.socket.settimeout(0)
        try:
            buffered = self.rfile.peek(self.rbufsize)
            if _HEAD_END.search(buffered, 0, self.rbufsize):
                return _READY
            if len(buffered) >= self.rbufsize and b"\n" not in buffered:
                return "414 URI Too Long"
            if len(buffered) >= self.rbufsize:
                return "431 Request Header Fields Too Large"
            return _GONE if _at_eof(self.socket) else _WAITING
        except OSError:  # reset by the client
            return _GONE

    def close(self):
        _discard_input(self.socket)  # unread input would make close() reset the connection,
        super().close()              # and a reset can destroy the reply before it is read
        if self.admitted:
            self.admitted = False
            self.server.slots.release()


def _at_eof(sock):
    """True if the peer has closed its side; ``sock`` must be non-blocking."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False


def _discard_input(sock, limit=1 << 20):
    """Drop up to ``limit`` bytes that have arrived and not been read; never blocks."""
    try:
        sock.settimeout(0)
        while limit > 0 and sock.recv(min(limit, 65536)):
            limit -= 65536
    except OSError:  # nothing more to read now (BlockingIOError), reset, or already closed
        pass


def client_gone(sock):
    """True once the client has closed or reset ``sock`` (or the server closed it, after
    a reply); never blocks."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
    except ValueError:  # closed: its fd is -1
        return True
    if not poller.poll(0):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:  # reset
        return True


class Gateway(cheroot.wsgi.Gateway_10):
    """WSGI 1.0, plus ``environ[CLIENT_GONE]`` and ``environ[ANSWER_NOW]``, a body that
    asks for ``100 Continue`` when first read, and no keep-alive after a refusal."""

    def get_environ(self):
        held = self.req.inheaders.pop(EXPECT_HELD, None)
        environ = super().get_environ()
        environ[CLIENT_GONE] = functools.partial(client_gone, self.req.conn.socket)
        environ[ANSWER_NOW] = self.req.answer_now
        if held is not None:
            self.req.continue_held = True
            environ["HTTP_EXPECT"] = held.decode("latin-1")
            environ["wsgi.input"] = ContinueOnRead(environ["wsgi.input"], self.req)
        return environ

    def respond(self):
        try:
            super().respond()
        finally:
            if not self.req.claim(WORKER):  # another worker stood in while this one was held
                self.req.server.requests.shrink(1)

    def start_response(self, status, headers, exc_info=None):
        unread = _body_unread(self.req)
        if unread or status.startswith("401"):
            self.req.close_connection = True
            # A client still holding its body back never sends it: nothing to read then.
            self.req.drain = (unread and not self.req.continue_held
                              and not status.startswith(_BODY_LEFT_UNREAD))
        return super().start_response(status, headers, exc_info)


def _body_unread(req):
    if req.chunked_read:
        return not req.rfile.closed  # set once the last chunk has been read
    if b"Transfer-Encoding" in req.inheaders:
        return True  # HTTP/1.0: Cheroot cannot tell where such a body ends
    return req.rfile.remaining > 0


class Server(cheroot.wsgi.Server):
    """Cheroot, with the head gate and the connection bound described in this module."""

    ConnectionClass = Connection

    def __init__(self, bind, app, threads, max_connections, max_head, request_timeout,
                 listener=None):
        # A listen backlog that fills drops SYNs, and their clients retry only after a second.
        super().__init__(bind, app, numthreads=threads, server_name="snapshot-kernel",
                         request_queue_size=socket.SOMAXCONN, timeout=request_timeout,
                         shutdown_timeout=WORKER_STOP_TIMEOUT)
        self.listener = listener
        self.gateway = Gateway
        self.max_head = max_head
        self.max_request_header_size = max_head
        self.keep_alive_conn_limit = None  # max_connections bounds idle connections too
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)

    def bind(self, family, type, proto=0):
        """Where Cheroot's ``prepare`` makes its socket: the ``listener`` given, if any."""
        if self.listener is None:
            return super().bind(family, type, proto)
        self.socket = self.listener
        self.bind_addr = self.resolve_real_bind_addr(self.listener)
        return self.socket

    def process_conn(self, conn):
        """Give ``conn`` to a worker once its request head has arrived; never blocks."""
        if not conn.admitted and not self._admit(conn):
            self._refuse(conn, "503 Service Unavailable",
                         f"the server has {self.max_connections} connections open, its limit "
                         "(--max-connections), and is serving all of them; retry later")
            return
        status = conn.head_status()
        if status is _WAITING:
            self._connections._selector.register(conn.socket.fileno(), selectors.EVENT_READ,
                                                 data=conn)
        elif status is _READY:
            conn.socket.settimeout(self.timeout)
            self.requests.put(conn)
        elif status is _GONE:
            conn.close()
        else:
            self._refuse(conn, status, f"the request line and headers must fit in "
                                       f"{self.max_head} bytes (--max-header)")

    def stop(self):
        """Cheroot's ``stop``, less the wait for its selector thread's ``select`` to time
        out (``expiration_interval``, 0.5 s, most of an idle server's stop): once asked to
        stop, the thread is woken by a connection to the listening socket."""
        if self.ready and self.socket is not None:
            self._connections._stop_requested = True  # what ConnectionManager.stop() sets
            _knock(self.socket)
        super().stop()

    def put_conn(self, conn):
        """Wait for the next request on a kept-alive connection, through the head gate."""
        if not self.ready:
            conn.close()
            return
        conn.last_used = time.time()  # the idle connection expires request_timeout from now
        self.process_conn(conn)

    def _admit(self, conn):
        """Give ``conn`` a slot, closing the connection that has waited longest for a head."""
        if not self.slots.acquire(blocking=False):
            waiting = [c for _, c in self._connections._selector.connections if c is not self]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda c: c.last_used)
            self._connections._selector.unregister(oldest.socket.fileno())
            oldest.close()
            if not self.slots.acquire(blocking=False):
                return False
        conn.admitted = True
        return True

    def _refuse(self, conn, status, message):
        conn.socket.settimeout(0)  # this runs on the selector thread: never wait on a client
        try:
            conn.socket.send(error_response(status, message, [f"Retry-After: {RETRY_AFTER}"]
                                            if status.startswith("503") else []))
        except OSError:  # a full buffer or a reset: the client is not listening
            pass
        conn.close()


def _knock(listener):
    """Connect to ``listener`` and leave: whoever selects on it wakes."""
    host, port = listener.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # a wildcard: this machine
    try:
        socket.create_connection((host, port), timeout=0.1).close()
    except OSError:  # the backlog is full or the address unreachable: the select times out
        pass


def make_server(app, bind, threads, max_connections=DEFAULT_MAX_CONNECTIONS,
                max_head=DEFAULT_MAX_HEAD, request_timeout=DEFAULT_REQUEST_TIMEOUT,
                listener=None):
    """A ``Server`` for ``app``; call ``prepare()`` to bind it to ``bind``, or to take
    ``listener``, a socket from ``listening_socket``."""
    return Server(bind, app, threads, max_connections, max_head, request_timeout, listener)


def listening_socket(bind):
    """A socket bound to ``bind`` (host, port) and listening, made as Cheroot makes its
    own (TCP_NODELAY, which accepted connections inherit; SO_REUSEADDR unless port 0),
    for a supervisor to hold while server processes come and go."""
    host, port = bind
    try:
        found = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except socket.gaierror:  # as Cheroot: try the address as it is written
        found = [(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, 0,
                  "", bind)]
    failures = []
    for family, kind, proto, _, address in found:
        sock = cheroot.server.HTTPServer.prepare_socket(bind, family, kind, proto, True, None)
        try:
            sock.bind(address)
        except OSError as exc:  # in use, or not an address of this machine: try the next
            sock.close()
            failures.append(str(exc))
            continue
        sock.listen(socket.SOMAXCONN)
        return sock
    raise OSError("; ".join(failures) or f"{host!r} has no address")
