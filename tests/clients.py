"""The clients each client test runs with: ``make(kind, url, token)``."""

from snapshot_kernel.client import Client

KINDS = ("Client",)


def make(kind, url, token, **options):
    """A client of ``kind`` (one of KINDS); close it, or use it in a ``with`` block."""
    return Client(url, token, **options)
