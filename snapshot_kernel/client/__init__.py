"""A Python client for a snapshot-kernel server, sync and async; standard library only.

    from snapshot_kernel.client import Client, NotFound

    with Client("http://127.0.0.1:8080") as kernel:     # the token: $SNAPSHOT_KERNEL_TOKEN
        reply = kernel.execute("x = 41\\nx + 1").raise_for_error()
        reply.result                                      # '42'
        kernel.execute("x += 1", reply.state_name, new_state_name="more")
        kernel.diff(reply.state_name, "more").changed     # {'x': {...}}
        kernel.upload("data/input.csv", "local.csv")      # a local file, streamed

    async with AsyncClient("http://127.0.0.1:8080") as kernel:
        reply = await kernel.execute("x = 41\\nx + 1")

Each method makes one request (``execution`` with a long ``wait`` a few) and returns the
route's JSON reply as a dict whose keys are also typed attributes (``replies``). Whatever
goes wrong raises a ``ClientError`` (``errors``): the server's error replies, a server that
cannot be reached (also an ``OSError``), a cell that failed if you ask
(``raise_for_error``). docs/client.md has all of it. This folder can be copied alone.
"""

from .aio import AsyncClient, AsyncDownload
from .calls import DEFAULT_TIMEOUT, TOKEN_VARIABLE
from .errors import (BadRequest, Busy, CellFailed, ClientError, Conflict, Incompatible,
                     NotFound, ProtocolError, TimedOut, TooLarge, Unauthorized, Unreachable,
                     UsageError)
from .replies import (CellError, ExecutionList, ExecutionRecord, ExecutionReply,
                      ExecutionSummary, FileListing, FileStored, Imported, OutputPage, Reply,
                      Started, StateDiff, StateInfo, StateList, StateTree, TextReply, Transfer)
from .sync import Client, Download

__all__ = ["AsyncClient", "AsyncDownload", "BadRequest", "Busy", "CellError", "CellFailed",
           "Client", "ClientError", "Conflict", "DEFAULT_TIMEOUT", "Download", "ExecutionList",
           "ExecutionRecord", "ExecutionReply", "ExecutionSummary", "FileListing",
           "FileStored", "Imported", "Incompatible", "NotFound", "OutputPage", "ProtocolError",
           "Reply", "Started", "StateDiff", "StateInfo", "StateList", "StateTree", "TOKEN_VARIABLE",
           "TextReply", "TimedOut", "TooLarge", "Transfer", "Unauthorized", "Unreachable",
           "UsageError"]
