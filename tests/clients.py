"""Both clients behind one blocking interface, so each client test runs against ``Client``
and ``AsyncClient`` alike: ``Blocking`` runs an AsyncClient's coroutines to their end on
one event loop, in a thread of its own, so its connections live from call to call as in
an asyncio program."""

import asyncio
import threading

from snapshot_kernel.client import AsyncClient, AsyncDownload, Client

KINDS = ("Client", "AsyncClient")
CALL_BOUND = 180  # seconds a call may take (a waiting execute after a hang-up polls 60 s)


class Blocking:
    """An ``AsyncClient`` whose coroutine methods block until their result."""

    def __init__(self, url, token, **options):
        self.client = AsyncClient(url, token, **options)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="AsyncClient loop")
        self._thread.start()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_BOUND)

    def __getattr__(self, name):
        found = getattr(self.client, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        def blocking(*args, **kwargs):
            result = self.run(found(*args, **kwargs))
            return BlockingDownload(self, result) if isinstance(result, AsyncDownload) \
                else result

        return blocking

    def close(self):
        if self.loop.is_closed():
            return
        self.run(self.client.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CALL_BOUND)
        self.loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class BlockingDownload:
    """An ``AsyncDownload`` through ``Blocking``."""

    def __init__(self, blocking, download):
        self._blocking, self._download = blocking, download
        self.size, self.content_type = download.size, download.content_type

    def read(self, size=-1):
        return self._blocking.run(self._download.read(size))

    def close(self):
        self._blocking.run(self._download.aclose())

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def make(kind, url, token, **options):
    """A client of ``kind`` (one of KINDS); close it, or use it in a ``with`` block."""
    return Client(url, token, **options) if kind == "Client" else Blocking(url, token,
                                                                          **options)
