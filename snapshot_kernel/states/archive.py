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
The reader is ours too, with ``TarInfo.frombuf`` for headers: reading a member
through ``tarfile.open(mode="r|")`` copies its whole buffer on each read that does
not line up with it, 10x slower here. It follows the headers ``tar`` adds (long
names, pax records, directories), so an archive unpacked and packed again loads.
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
        """``stream.read(n)`` gives the archive's next bytes (fewer only at its end)."""
        self._stream = stream
        self.digests = {}

    def __iter__(self):
        while True:
            name, size = self._next()
            if name == CHECKSUMS:
                self._check(Reading(self, name, size))
                return
            if name in self.digests:
                raise BadArchive(f"the archive is damaged: it holds {name!r} twice")
            if not self.digests and name != META:
                raise BadArchive(f"the body is not a state archive: its first member is "
                                 f"{name!r}, not {META!r}")
            reading = Reading(self, name, size)
            yield reading
            reading.skip()  # what the caller left unread, hashed all the same
            self.digests[name] = reading.digest.hexdigest()

    def read(self, size):
        """The archive's next ``size`` bytes, fewer only at its end."""
        data = self._stream.read(size)
        if len(data) == size or not data:
            return data
        parts, got = [data], len(data)  # a stream may give less than asked before its end
        while got < size:
            more = self._stream.read(size - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def _next(self):
        """``(name, size)`` of the next file member; the header blocks of other kinds that
        ``tar`` writes (directories, long names, pax records) are followed or skipped."""
        names = {}
        while True:
            info = self._header()
            if info is None and not self.digests:
                raise BadArchive("the body is not a state archive: it is empty")
            if info is None:
                raise BadArchive(f"the archive is truncated or damaged: it ends before its "
                                 f"{CHECKSUMS}")
            size = int(names.get("size", info.size))
            if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                return names.get("path", info.name), size
            data = self._padded_read(size)
            if info.type == tarfile.GNUTYPE_LONGNAME:
                names["path"] = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif info.type == tarfile.XHDTYPE:
                names.update(_pax(data))
            elif info.type not in (tarfile.DIRTYPE, tarfile.XGLTYPE):
                raise BadArchive(f"the archive is damaged: {info.name!r} is not a file")

    def _header(self):
        """The next header, or None at the end of the archive (two zero blocks, or none)."""
        block = self.read(_BLOCK)
        if not block or block == bytes(_BLOCK):
            return None
        try:
            return tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError as exc:
            if not self.digests:
                raise BadArchive(f"the body is not a state archive (a tar file that GET "
                                 f"/states/<name>/export gives): {exc}") from None
            if len(block) < _BLOCK:
                raise BadArchive("the archive is truncated: it ends within a header") from None
            raise BadArchive(f"the archive is damaged: a header is not one ({exc})") from None

    def _padded_read(self, size):
        data = self.read(_padded(size))
        if len(data) < _padded(size):
            raise BadArchive("the archive is truncated: it ends within a member")
        return data[:size]

    def _check(self, reading):
        if reading.size > MAX_CHECKSUMS:
            raise BadArchive(f"the archive is damaged: its {CHECKSUMS} is {reading.size} bytes")
        if not self.digests:
            raise BadArchive(f"the body is not a state archive: it begins with {CHECKSUMS}")
        try:
            listed = json.loads(reading.read())["sha256"]
        except (ValueError, TypeError, KeyError):  # not JSON, or not of this shape
            listed = None
        reading.skip()
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
        if self._header() is not None:
            raise BadArchive(f"the archive is damaged: a member follows {CHECKSUMS}")
        self.read(_RECORD)  # the zero blocks to a whole record: read, so a connection stays open


def _pax(data):
    """The path and size that a pax header's records set (``"<length> <key>=<value>\\n"``)."""
    found, at = {}, 0
    try:
        while at < len(data):
            length = int(data[at:data.index(b" ", at)])
            key, _, value = data[data.index(b" ", at) + 1:at + length - 1].partition(b"=")
            if key in (b"path", b"size"):
                found[key.decode()] = value.decode("utf-8", "surrogateescape")
            at += length
    except ValueError:  # no space, or a length that is not a number
        raise BadArchive("the archive is damaged: a pax header cannot be read") from None
    return found


class Reading:
    """One member as it arrives: ``read(n)`` hashes what it gives into ``digest``."""

    def __init__(self, reader, name, size):
        self._reader, self.name, self.size = reader, name, size
        self.done = 0
        self.digest = hashlib.sha256()

    def read(self, size=-1):
        left = self.size - self.done
        size = left if size < 0 else min(size, left)
        data = self._reader.read(size) if size else b""
        if len(data) < size:
            raise BadArchive(f"the archive is truncated: member {self.name!r} ends early")
        self.digest.update(data)
        self.done += len(data)
        if data and self.done == self.size:  # the padding to a whole block
            self._reader.read(_padded(self.size) - self.size)
        return data

    def chunks(self, size):
        """The member's next ``size`` bytes, in chunks of at most CHUNK."""
        left = min(size, self.size - self.done)
        while left:
            data = self.read(min(left, CHUNK))
            left -= len(data)
            yield data

    def skip(self):
        for _ in self.chunks(self.size - self.done):
            pass
