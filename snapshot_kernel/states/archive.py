"""The container of a portable state: a tar archive, written as it is sent, read as it arrives.

    meta.json        first, so a reader can refuse an archive before reading the rest
    ...              any members
    checksums.json   last: {"sha256": {member: hex digest}} of every member before it

Each member is hashed as it passes, so neither side holds the archive: a reader
learns that it is whole and undamaged only at its end, and must keep nothing it
read until then. Headers are GNU tar's (a member may be over 8 GiB), made by
``tarfile.TarInfo``; the writer makes them itself rather than through
``tarfile.open(mode="w|")``, which copies a member in one call, so that the
archive can be sent chunk by chunk and its size is known before its first byte.
The reader is ``tarfile.open(mode="r|")``: an archive re-packed by ``tar`` loads too.
"""

import hashlib
import json
import tarfile
import time

from ..errors import BadArchive

CHUNK = 1 << 20  # bytes read or sent at once
META, CHECKSUMS = "meta.json", "checksums.json"
MAX_CHECKSUMS = 1 << 24  # bytes: a longer checksums member is not one
_BLOCK, _RECORD = tarfile.BLOCKSIZE, tarfile.RECORDSIZE


class Member:
    """A member to write: its ``name`` and ``parts``, buffers whose bytes in turn are its
    contents (read as they are sent, so they must not change until then)."""

    def __init__(self, name, parts):
        self.name = name
        self.parts = [memoryview(part).cast("B") for part in parts]
        self.size = sum(len(part) for part in self.parts)


class Writer:
    """An archive of ``members`` (the first named META): ``size`` bytes, which
    ``chunks()`` yields, each ``bytes``, the checksums last."""

    def __init__(self, members, mtime=None):
        self.members = members
        self.mtime = int(time.time() if mtime is None else mtime)
        trailer = len(_checksums({member.name: "0" * 64 for member in members}))
        body = sum(_BLOCK + _padded(member.size) for member in members)
        self.size = _padded(body + _BLOCK + _padded(trailer) + 2 * _BLOCK, _RECORD)

    def chunks(self):
        sent, digests = 0, {}
        for member in self.members:
            digest = hashlib.sha256()
            chunk = self._header(member.name, member.size)
            for part in member.parts:
                for start in range(0, len(part), CHUNK):
                    data = bytes(part[start:start + CHUNK])
                    digest.update(data)
                    yield chunk
                    sent += len(chunk)
                    chunk = data
            digests[member.name] = digest.hexdigest()
            chunk += _padding(member.size)
            yield chunk
            sent += len(chunk)
        trailer = _checksums(digests)
        chunk = self._header(CHECKSUMS, len(trailer)) + trailer + _padding(len(trailer))
        yield chunk + bytes(self.size - sent - len(chunk))  # the end blocks, to a whole record

    def _header(self, name, size):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, self.mtime, 0o644
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")


def _checksums(digests):
    return json.dumps({"sha256": digests}, indent=1).encode("utf-8")


def _padded(size, unit=_BLOCK):
    return -(-size // unit) * unit


def _padding(size):
    return bytes(_padded(size) - size)


class Reader:
    """Iterating gives each member but the checksums as a ``Reading``, which must be read
    before the next is asked for; the iteration ends once the checksums are checked.
    Raises BadArchive for what is not such an archive, or is truncated or damaged."""

    def __init__(self, stream):
        """``stream.read(n)`` gives the archive's next bytes (fewer at its end)."""
        try:
            self._tar = tarfile.open(fileobj=stream, mode="r|", bufsize=CHUNK)
        except tarfile.TarError as exc:
            raise BadArchive(f"the body is not a state archive (a tar file that GET "
                             f"/states/<name>/export gives): {exc}") from None
        self.digests = {}

    def __iter__(self):
        while True:
            member = self._next()
            if member.name == CHECKSUMS:
                self._check(member)
                return
            if member.name in self.digests:
                raise BadArchive(f"the archive is damaged: it holds {member.name!r} twice")
            if not self.digests and member.name != META:
                raise BadArchive(f"the body is not a state archive: its first member is "
                                 f"{member.name!r}, not {META!r}")
            reading = Reading(self._tar.extractfile(member), member.name, member.size)
            yield reading
            reading.skip()  # what the caller left unread, hashed all the same
            self.digests[member.name] = reading.digest.hexdigest()

    def _next(self):
        """The next file member; a truncated archive ends early, as tarfile sees it."""
        while True:
            try:
                member = self._tar.next()
            except tarfile.TarError as exc:
                raise refusal(exc) from None
            if member is None:
                raise BadArchive(f"the archive is truncated or damaged: it ends before its "
                                 f"{CHECKSUMS}")
            if member.isfile():
                return member
            if not member.isdir():  # a directory entry comes with a re-packed archive
                raise BadArchive(f"the archive is damaged: {member.name!r} is not a file")

    def _check(self, member):
        if member.size > MAX_CHECKSUMS:
            raise BadArchive(f"the archive is damaged: its {CHECKSUMS} is {member.size} bytes")
        if not self.digests:
            raise BadArchive(f"the body is not a state archive: it begins with {CHECKSUMS}")
        reading = Reading(self._tar.extractfile(member), member.name, member.size)
        try:
            listed = json.loads(reading.read())["sha256"]
        except (ValueError, TypeError, KeyError):  # not JSON, or not of this shape
            listed = None
        if not isinstance(listed, dict):
            raise BadArchive(f"the archive is damaged: its {CHECKSUMS} cannot be read")
        for name, digest in self.digests.items():
            if listed.get(name) != digest:
                raise BadArchive(f"the archive is damaged: member {name!r} does not match its "
                                 f"sha256 in {CHECKSUMS}")
        if set(listed) != set(self.digests):
            missing = sorted(set(listed) - set(self.digests))
            raise BadArchive(f"the archive is truncated or damaged: {CHECKSUMS} lists "
                             f"members it does not hold: {', '.join(missing)}")
        try:
            after = self._tar.next()
        except tarfile.TarError as exc:
            raise refusal(exc) from None
        if after is not None:
            raise BadArchive(f"the archive is damaged: {after.name!r} follows {CHECKSUMS}")


class Reading:
    """One member as it arrives: ``read(n)`` hashes what it gives into ``digest``."""

    def __init__(self, file, name, size):
        self._file, self.name, self.size = file, name, size
        self.done = 0
        self.digest = hashlib.sha256()

    def read(self, size=-1):
        if size < 0:
            size = self.size - self.done
        try:
            data = self._file.read(size)
        except tarfile.TarError as exc:
            raise refusal(exc) from None
        self.digest.update(data)
        self.done += len(data)
        return data

    def chunks(self, size):
        """The member's next ``size`` bytes, in chunks of at most CHUNK."""
        left = size
        while left:
            data = self.read(min(left, CHUNK))
            if not data:
                raise BadArchive(f"the archive is truncated: member {self.name!r} ends early")
            left -= len(data)
            yield data

    def skip(self):
        for _ in self.chunks(self.size - self.done):
            pass


def refusal(exc):
    """The BadArchive for what tarfile raised reading past the first member."""
    if "unexpected end" in str(exc):
        return BadArchive(f"the archive is truncated: {exc}")
    return BadArchive(f"the archive is damaged: {exc}")
