"""The server's working directory as files: read, write, list and delete below one root.

A path is relative to the root (``--workdir``) and uses ``/``; empty and ``.``
segments are ignored. A path that could leave the root is refused before
anything is touched: an absolute one, one with a ``..`` segment or a NUL byte,
and one that a symbolic link leads out of. A file is written to a temporary
name beside its target and renamed over it once whole, so a reader never sees
half a file and a refused or broken upload leaves nothing behind (not even the
directories it would have made). Files move in pieces: nothing here holds a
whole file in memory.

Knows nothing of HTTP: methods return plain dicts and raise ``KernelError``
subclasses (``errors``), which ``main`` maps to statuses.
"""

import contextlib
import errno
import mimetypes
import os
import secrets
import stat
from datetime import datetime, timezone

from .errors import (FileConflict, FileDenied, FileTooLarge, InvalidPath, NoSpace,
                     UnknownFile)

DEFAULT_MAX_FILE = 1 << 30  # bytes: the largest file a client may store (--max-file)
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_CONFLICTS = (errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR)

# What _parts takes, as patterns that Python's re and ECMA-262 read alike, so GET
# /openapi.json says which paths are refused before anything is touched. A segment is
# anything but NUL and '/', and never '..'; the first is not empty (not absolute).
_SEGMENT = r"(?:[^./\x00][^/\x00]*|\.(?:[^./\x00][^/\x00]*)?|\.\.[^/\x00]+)"
PATH_PATTERN = rf"^{_SEGMENT}(?:/{_SEGMENT}?)*$"
# What store takes: the same, ending in a name (not '', '.' or '..'), so never a directory.
_NAME = r"(?:[^./\x00][^/\x00]*|\.[^./\x00][^/\x00]*|\.\.[^/\x00]+)"
FILE_PATTERN = rf"^(?:{_SEGMENT}(?:/{_SEGMENT}?)*/)?{_NAME}$"


class Workdir:
    """Files below ``root`` (resolved once, at creation), each at most ``max_file`` bytes."""

    def __init__(self, root, max_file=DEFAULT_MAX_FILE):
        self.root = os.path.realpath(root)
        self.max_file = max_file

    def open(self, path):
        """``(binary file, size, content type)`` of the regular file at ``path``; the
        caller closes the file."""
        real = self._resolve(_parts(path))
        with _refusals(path, writing=False):
            # O_NONBLOCK: opening a FIFO must not wait for a writer (regular files ignore it).
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            if stat.S_ISDIR(status.st_mode):
                raise FileConflict(f"{path!r} is a directory: end the path with '/' to list it")
            raise FileConflict(f"{path!r} is not a regular file (a device, socket or pipe)")
        return os.fdopen(fd, "rb"), status.st_size, content_type(real)

    def listing(self, path):
        """``{"files": [{"name", "size", "mtime", "is_dir"}]}`` of the directory at
        ``path``, sorted by name."""
        real = self._resolve(_parts(path))
        with _refusals(path or ".", writing=False), os.scandir(real) as entries:
            found = [_described(entry) for entry in entries]
        return {"files": sorted(found, key=lambda item: item["name"])}

    def check_size(self, size):
        """Refuse a file of ``size`` bytes (None: not known yet) if it is over the limit."""
        if size is not None and size > self.max_file:
            raise FileTooLarge(f"the file is {size} bytes; this server stores files of up to "
                               f"{self.max_file} bytes (--max-file)")

    def store(self, path, chunks):
        """Write the bytes ``chunks`` yields as the file at ``path``, making the
        directories it needs; ``{"name", "size"}``. On any failure nothing is left."""
        parts = _parts(path)
        if path.rsplit("/", 1)[-1] in ("", "."):
            raise InvalidPath(f"{path!r} names a directory; name the file to write")
        real = self._resolve(parts)
        made = []
        stored = False
        try:
            with _refusals(path):
                self._make_parents(os.path.dirname(real), made)
                size = self._write(real, chunks)
            stored = True
        finally:
            if not stored:
                for directory in reversed(made):
                    with contextlib.suppress(OSError):  # something else put a file there
                        os.rmdir(directory)
        return {"name": "/".join(parts), "size": size}

    def delete(self, path, directory=False):
        """Remove the file, symbolic link or empty directory at ``path`` (a link
        itself, never what it points to); ``{"deleted": name}``. With ``directory``
        (a path that ends in '/'), only an empty directory, as ``rmdir dir/`` would."""
        parts = _parts(path)
        if not parts:
            raise InvalidPath("the working directory itself cannot be deleted")
        target = os.path.join(self._resolve(parts[:-1]), parts[-1])
        with _refusals(path, writing=False):
            if os.path.isdir(target) and not os.path.islink(target):
                os.rmdir(target)
            elif directory and os.path.lexists(target):
                raise FileConflict(f"{path!r} is not a directory: name it without the "
                                   "final '/' to delete it")
            else:
                os.unlink(target)
        return {"deleted": "/".join(parts)}

    def _resolve(self, parts):
        """The real path of ``parts`` below the root; InvalidPath if a link leads out."""
        real = os.path.realpath(os.path.join(self.root, *parts))
        if os.path.commonpath([self.root, real]) != self.root:
            raise InvalidPath(f"{'/'.join(parts)!r} leads out of the working directory "
                              "through a symbolic link")
        return real

    def _make_parents(self, directory, made):
        """Make ``directory`` and the directories above it that are missing, below the
        root; append each one made to ``made``."""
        missing = []
        while directory != self.root and not os.path.isdir(directory):
            if os.path.lexists(directory):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
            missing.append(directory)
            directory = os.path.dirname(directory)
        for each in reversed(missing):
            os.mkdir(each)
            made.append(each)

    def _write(self, real, chunks):
        """Write ``chunks`` beside ``real``, then rename the whole file onto it; its size."""
        if os.path.isdir(real):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        temporary = os.path.join(os.path.dirname(real), f".upload-{secrets.token_hex(8)}")
        # Mode 0o666 less the umask, as open() would give; a replaced file keeps its own.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        renamed = False
        try:
            with os.fdopen(fd, "wb") as out:
                size = 0
                for chunk in chunks:
                    size += len(chunk)
                    self.check_size(size)
                    out.write(chunk)
                with contextlib.suppress(FileNotFoundError):
                    os.fchmod(out.fileno(), stat.S_IMODE(os.stat(real).st_mode))
            os.replace(temporary, real)
            renamed = True
        finally:
            if not renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
        return size


def _parts(path):
    """The segments of ``path``; InvalidPath if it is absolute or holds '..' or NUL."""
    if "\x00" in path:
        raise InvalidPath(f"{path!r} holds a NUL byte")
    if path.startswith("/"):
        raise InvalidPath(f"{path!r} is absolute; paths are relative to the server's "
                          "working directory")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidPath(f"{path!r} holds '..'; paths stay inside the server's working "
                          "directory")
    return parts


def content_type(path):
    """The media type a file's name suggests; ``application/octet-stream`` if none."""
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _described(entry):
    """One entry of a listing; a link that leads nowhere is described as the link."""
    try:
        status = entry.stat()
    except OSError:  # a dangling or looping symbolic link, or gone since the scan
        status = entry.stat(follow_symlinks=False)
    is_dir = stat.S_ISDIR(status.st_mode)
    return {"name": entry.name, "size": 0 if is_dir else status.st_size,
            "mtime": datetime.fromtimestamp(status.st_mtime, timezone.utc).isoformat(),
            "is_dir": is_dir}


@contextlib.contextmanager
def _refusals(path, writing=True):
    """Turn what the operating system refuses for ``path`` into the kernel's errors. A
    name longer than the file system holds names nothing there to read or delete (404),
    and cannot be written (400)."""
    try:
        yield
    except FileNotFoundError:
        raise UnknownFile(f"no file or directory {path!r} in the working directory") from None
    except PermissionError:
        raise FileDenied(f"the server may not do that to {path!r} (permission denied)") \
            from None
    except OSError as exc:
        if exc.errno in _FULL:
            raise NoSpace(f"no room to store {path!r}: {os.strerror(exc.errno)}") from None
        if exc.errno in _CONFLICTS:
            raise FileConflict(_conflict(path, exc.errno)) from None
        if exc.errno == errno.ENAMETOOLONG and not writing:
            raise UnknownFile(f"no file or directory {path!r} in the working directory: "
                              f"{os.strerror(exc.errno)}") from None
        if exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            raise InvalidPath(f"{path!r}: {os.strerror(exc.errno)}") from None
        raise


def _conflict(path, code):
    if code == errno.ENOTEMPTY:
        return f"{path!r} is a directory that is not empty; delete what it holds first"
    if code == errno.ENOTDIR:
        return f"{path!r}, or a directory above it, is a file, not a directory"
    return f"{path!r} is a directory, not a file"
