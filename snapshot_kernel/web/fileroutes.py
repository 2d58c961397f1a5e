"""The /files routes: the working directory's files (``files.Workdir``), streamed both
ways."""

import bottle

from .bodies import body_chunks, body_length

# A path that ends in a name is a file's; one that ends in '/' is a directory's, which only
# GET (a listing) and DELETE take: PUT /files/dir/ is then a 405 naming them, as the
# OpenAPI document has it, not a 400 from the file system.
FILE_RULE = "/files/<path:re:.*[^/]>"


def add_file_routes(app, files, waiting):
    """Add the /files routes to ``app``: ``files`` is the ``Workdir``; an upload or a
    download holds one of ``waiting``'s slots (``--max-running``) while its bytes move."""

    @app.get("/files/")
    def list_workdir():
        return files.listing("")

    @app.get("/files/<path:path>/")
    def list_directory(path):
        return files.listing(path)

    @app.delete("/files/<path:path>/")
    def delete_directory(path):
        return files.delete(path, directory=True)

    @app.get(FILE_RULE)
    def read_file(path):
        opened, size, content_type = files.open(path)
        try:
            slot = waiting.slot()
        except bottle.HTTPError:
            opened.close()
            raise
        bottle.response.content_type = content_type
        bottle.response.set_header("Content-Length", str(size))
        return _Download(opened, slot.release)

    @app.put(FILE_RULE)
    def write_file(path):
        environ = bottle.request.environ
        length = body_length(environ)
        files.check_size(length)
        with waiting.slot():
            return files.store(path, body_chunks(environ, length))

    @app.delete(FILE_RULE)
    def delete_file(path):
        return files.delete(path)


class _Download:
    """A file being sent, which frees its slot when the server closes it."""

    def __init__(self, opened, release):
        self.read, self._file, self._release = opened.read, opened, release

    def close(self):
        self._file.close()
        self._release()
