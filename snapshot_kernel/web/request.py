"""How one request is answered: Cheroot's request, subclassed, and the API's error body.

Cheroot's refusals carry the API's JSON error body (``error_body``). Another thread
can give the reply of a worker that is held (``Request.answer_now``). A request sent
with ``Expect: 100-continue`` is told to send its body when the app first reads it
(``ContinueOnRead``), not as soon as its head has come. The rest of a body that a
reply refused unread is read and dropped before the connection closes
(``server.Gateway`` says when). The connections and the server around a request are
``server``'s; it and this module are the only ones that import Cheroot.
"""

import json
import socket
import threading
import time

import cheroot.server

REFUSED_BODY_SECONDS = 10.0  # seconds the rest of a refused body is read and dropped, at most
CHUNK = 1 << 16              # bytes of a refused body read at a time
WORKER, _ELSEWHERE = "worker", "elsewhere"  # who answers a request: Request.claim
EXPECT_HELD = b"Expect:held"  # a request header key no request can send (names hold no ':')


def error_body(message):
    """The API's one error shape, ``{"error": message}``, as JSON text."""
    return json.dumps({"error": message})


def error_response(status, message, headers=()):
    """A whole HTTP reply carrying ``error_body(message)``, which closes the connection."""
    body = error_body(message).encode("utf-8")
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _HeadersHoldingContinue(cheroot.server.HeaderReader):
    """Cheroot's header reader, which takes ``Expect: 100-continue`` out of the headers,
    where Cheroot would answer it at once, to ``EXPECT_HELD`` (``Gateway.get_environ``)."""

    def __call__(self, rfile, hdict=None):
        hdict = super().__call__(rfile, hdict)
        if hdict.get(b"Expect", b"").lower() == b"100-continue":
            hdict[EXPECT_HELD] = hdict.pop(b"Expect")
        return hdict


class Request(cheroot.server.HTTPRequest):
    """Cheroot's request parser, with its own refusals in the API's JSON shape, a
    reply that another thread can give for a worker that is held (``answer_now``),
    ``100 Continue`` sent when the body is first read, and the rest of a refused body
    read and dropped before the connection closes."""

    header_reader = _HeadersHoldingContinue()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._answerer = None
        self._claiming = threading.Lock()
        self.continue_held = False  # the client waits for "100 Continue" to send its body
        self.drain = False          # the reply refused a body it left unread: read the rest

    def respond(self):
        super().respond()
        if self.drain:
            self._drain_body()

    def _drain_body(self):
        """Read and drop what is left of the body, for up to REFUSED_BODY_SECONDS."""
        deadline = time.monotonic() + REFUSED_BODY_SECONDS
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.conn.socket.settimeout(min(left, self.server.timeout))
                if not self.rfile.read(CHUNK):
                    return
        except (OSError, ValueError):  # a reset or a pause; a malformed chunk (Cheroot's)
            pass

    def send_continue(self):
        """Tell a client that held its body back to send it (once; none if it did not)."""
        if self.continue_held:
            self.continue_held = False
            try:
                self.conn.wfile.write(f"{self.server.protocol} 100 Continue\r\n\r\n"
                                      .encode("latin-1"))
            except OSError:  # the client has gone: the read that follows says so
                pass

    def claim(self, answerer):
        """True if ``answerer`` is to write the reply: the first to ask is."""
        with self._claiming:
            if self._answerer is None:
                self._answerer = answerer
            return self._answerer == answerer

    def answer_now(self, status, headers, body):
        """Reply ``body`` (bytes) from any thread, close the connection, and have a new
        worker stand in for this request's until that one is done (``Gateway.respond``).

        Returns False, writing nothing, if the worker has begun its own reply. Call
        it on a thread that may wait: a client that does not read holds the write up
        to the request timeout.
        """
        if not self.claim(_ELSEWHERE):
            return False
        self.close_connection = True
        lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers),
                 f"Content-Length: {len(body)}", "Connection: close"]
        try:
            self.conn.socket.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
                                     + body)
            self.conn.socket.shutdown(socket.SHUT_WR)
        except OSError:  # the client has gone, or does not read: nobody to tell
            pass
        self.server.requests.grow(1)
        return True

    def ensure_headers_sent(self):
        if not self.sent_headers and not self.claim(WORKER):
            self.sent_headers = True  # answered elsewhere: this worker's reply is dropped
            return
        super().ensure_headers_sent()

    def write(self, chunk):
        if self.claim(WORKER):
            super().write(chunk)

    def simple_response(self, status, msg=""):
        self.close_connection = True  # Cheroot closes the connection after each of these anyway
        if not self.claim(WORKER):
            return
        status = str(status)
        message = msg.decode("latin-1") if isinstance(msg, bytes) else msg
        try:
            self.conn.wfile.write(error_response(status, message or status[4:]))
        except OSError:  # the client has gone; there is no one to tell
            pass


class ContinueOnRead:
    """``wsgi.input`` of a request sent with ``Expect: 100-continue``: the first read asks
    the client for the body (``Request.send_continue``)."""

    def __init__(self, rfile, req):
        self._rfile, self._req = rfile, req

    def read(self, size=None):
        self._req.send_continue()
        return self._rfile.read(size)

    def readline(self, size=None):
        self._req.send_continue()
        return self._rfile.readline(size)

    def readlines(self, sizehint=0):
        self._req.send_continue()
        return self._rfile.readlines(sizehint)

    def __iter__(self):
        self._req.send_continue()
        return iter(self._rfile)
