"""The /files routes: the working directory's files (``files.Workdir``), streamed both
ways, at the path the client sent."""

import urllib.parse

import bottle

from .bodies import body_chunks, body_length


def add_file_routes(app, files, waiting):
    """Add the /files routes to ``app``: ``files`` is the ``Workdir``; an upload or a
    download holds one of ``waiting``'s slots (``--max-running``) while its bytes move."""

    @app.get("/files/")
    def list_workdir():
        return files.listing("")

    @app.get("/files/<path:path>/")  # before the next route, which would take it too
    def list_directory(path):
        return files.listing(_sent_path(path, directory=True))

    @app.get("/files/<path:path>")
    def read_file(path):
        path = _sent_path(path)
        if path.endswith("/"):  # sent as '...%2F': a directory, as it is sent with '/'
            return files.listing(path[:-1])
        opened, size, content_type = files.open(path)
        try:
            slot = waiting.slot()
        except bottle.HTTPError:
            opened.close()
            raise
        bottle.response.content_type = content_type
        bottle.response.set_header("Content-Length", str(size))
        return _Download(opened, slot.release)

    @app.put("/files/<path:path>")
    def write_file(path):
        environ = bottle.request.environ
        length = body_length(environ)
        files.check_size(length)
        with waiting.slot():
            return files.store(_sent_path(path), body_chunks(environ, length))

    @app.delete("/files/<path:path>")
    def delete_file(path):
        return files.delete(_sent_path(path))


def _sent_path(path, directory=False):
    """The path a /files request names, given the one Bottle routed. Cheroot leaves '%2F'
    encoded in PATH_INFO, to tell it from '/'; here it is a '/', as under other WSGI servers
    and as a client that quotes a whole path (``quote(path, safe="")``) means it, so the
    refusals of ``Workdir`` see the path the client sent. A literal '%' is '%25'. (The
    path is UTF-8: ``main`` refuses any other first.)"""
    uri = bottle.request.environ.get("REQUEST_URI", "")
    if "%2f" not in uri.lower():  # Bottle's path is the one sent (or the server decoded it)
        return path
    sent = urllib.parse.unquote(urllib.parse.urlsplit(uri).path, errors="strict")
    sent = sent[len("/files/"):]
    return sent[:-1] if directory else sent


class _Download:
    """A file being sent, which frees its slot when the server closes it."""

    def __init__(self, opened, release):
        self.read, self._file, self._release = opened.read, opened, release

    def close(self):
        self._file.close()
        self._release()
