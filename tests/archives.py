"""State archives (GET /states/<name>/export) taken apart and put together again, for tests
that need one damaged, truncated, or whole but saying something else."""

import hashlib
import io
import json
import tarfile

from snapshot_kernel.states import archive


def unpacked(data):
    """``[(name, bytes)]`` of an archive, in order."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return [(member.name, tar.extractfile(member).read()) for member in tar.getmembers()]


def packed(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def rewritten(data, meta=None, checksums=None):
    """The archive ``data`` with meta.json updated by ``meta`` and the checksums made
    again (then updated by ``checksums``): a whole archive that says something else."""
    members = [(name, body) for name, body in unpacked(data) if name != archive.CHECKSUMS]
    members = [(name, json.dumps({**json.loads(body), **(meta or {})}).encode()
                if name == archive.META else body) for name, body in members]
    digests = {name: hashlib.sha256(body).hexdigest() for name, body in members}
    digests.update(checksums or {})
    return packed(members + [(archive.CHECKSUMS, json.dumps({"sha256": digests}).encode())])


def flipped(data, member, at=0.5):
    """``data`` with one byte of ``member``'s contents changed, its checksum not."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        found = tar.getmember(member)
    where = found.offset_data + int(found.size * at)
    return data[:where] + bytes([data[where] ^ 0xFF]) + data[where + 1:]


def offset_of(data, member):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getmember(member).offset
