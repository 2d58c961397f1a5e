"""The replies of the clients: the server's JSON objects as dicts, whose keys each class
also gives as typed attributes (``reply.state_name`` is ``reply["state_name"]``), so code
that indexes them, compares them with dicts or dumps them as JSON works as before."""

from __future__ import annotations

from typing import (Any, Callable, Dict, Generic, List, Mapping, Optional, TypedDict, TypeVar,
                    Union, cast, overload)

from .errors import CellFailed

T = TypeVar("T")
Output = Dict[str, Any]  # {"output_type": "stream" | "display_data" | ..., ...} (docs/api.md)


class Checkpoint(TypedDict):
    state_name: str
    progress: Optional[str]
    timestamp: str


class Variable(TypedDict, total=False):
    type: str
    repr: str
    length: int       # (in a diff: a container's)
    shape: List[int]  # (in a diff: an array's or a frame's)


class Change(TypedDict):
    before: Variable
    after: Variable


class Truncated(TypedDict):
    characters: int
    kept_characters: int
    capped: bool
    location: str


class Crash(TypedDict):
    cause: str
    signal: Optional[str]
    exit_status: Optional[int]
    likely_out_of_memory: bool


# Why an execution waits, or waited, before its cell could run (docs/api.md): "for" the
# exec_ids whose cells hold process-wide "settings" it differs in.
Waiting = TypedDict("Waiting", {"for": List[str], "settings": List[str]})
Waited = TypedDict("Waited", {"seconds": float, "for": List[str], "settings": List[str]})


class FileEntry(TypedDict):
    name: str
    size: int
    mtime: str
    is_dir: bool


class Field(Generic[T]):
    """A key of a reply as a typed, read-only attribute; ``default()`` if the server left
    the key out (the optional keys of a reply)."""

    def __init__(self, key: str = "", default: Optional[Callable[[], T]] = None) -> None:
        self.key, self.default = key, default

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    @overload
    def __get__(self, reply: None, owner: type) -> Field[T]: ...

    @overload
    def __get__(self, reply: Reply, owner: type) -> T: ...

    def __get__(self, reply: Optional[Reply], owner: type) -> Union[Field[T], T]:
        if reply is None:
            return self
        if self.default is not None and self.key not in reply:
            return self.default()
        return cast(T, reply[self.key])


class Reply(Dict[str, Any]):
    """A JSON object the server answered, as a dict."""

    __slots__ = ()


class CellError(Reply):
    """An exception the cell raised, or one the kernel decided (KeyboardInterrupt, ...)."""

    __slots__ = ()
    ename = Field[str]()
    evalue = Field[str]()
    traceback = Field[List[str]]()


class ExecutionReply(Reply):
    """The reply of a waiting ``execute``; a cell that raised has ``error`` set."""

    __slots__ = ()
    output = Field[List[Output]]()
    state_name = Field[Optional[str]]()
    error = Field[Optional[CellError]]()
    exec_id = Field[str]()
    parent = Field[str]()
    checkpoints = Field[List[Checkpoint]](default=list)
    truncated = Field[Dict[str, Truncated]](default=dict)
    lost = Field[Dict[str, str]](default=dict)
    waited = Field[Optional[Waited]](default=lambda: None)

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        if self.get("error") is not None:
            self["error"] = CellError(self["error"])

    def raise_for_error(self) -> ExecutionReply:
        """This reply, if the cell did not fail; else ``CellFailed`` with its error."""
        error = self.error
        if error is not None:
            raise CellFailed(error.ename, error.evalue, error.traceback, self)
        return self

    @property
    def stdout(self) -> str:
        """What the cell printed to stdout (as the reply kept it)."""
        return _stream(self.output, "stdout")

    @property
    def stderr(self) -> str:
        return _stream(self.output, "stderr")

    @property
    def result(self) -> Optional[str]:
        """The ``text/plain`` of the cell's last expression's value, or None."""
        for item in self.output:
            if item.get("output_type") == "execute_result":
                return cast(str, item["data"]["text/plain"])
        return None


def _stream(output: List[Output], name: str) -> str:
    return "".join(item["text"] for item in output
                   if item.get("output_type") == "stream" and item.get("name") == name)


class TextReply(str):
    """The reply of ``execute(..., format="text")``: the outputs as one concise text (this
    string), and the names the server sent beside it."""

    exec_id: str
    state_name: Optional[str]
    parent: str
    error_name: Optional[str]

    def __new__(cls, text: str, exec_id: str, state_name: Optional[str], parent: str,
                error_name: Optional[str]) -> TextReply:
        reply = super().__new__(cls, text)
        reply.exec_id, reply.state_name, reply.parent = exec_id, state_name, parent
        reply.error_name = error_name
        return reply

    def raise_for_error(self) -> TextReply:
        """This reply, if the cell did not fail; else ``CellFailed``, whose ``evalue`` is
        the text's last ``<ename>: ...`` line says."""
        if self.error_name is None:
            return self
        prefix = f"{self.error_name}: "
        lines = [line for line in self.splitlines() if line.startswith(prefix)]
        evalue = lines[-1][len(prefix):] if lines else ""
        raise CellFailed(self.error_name, evalue, self.splitlines(keepends=True), self)


class Started(Reply):
    """``execute(..., wait=False)``: the execution runs on; ``execution`` follows it."""

    __slots__ = ()
    exec_id = Field[str]()
    status = Field[str]()  # running, or waiting (see ExecutionSummary.waiting)
    location = Field[str]()


class ExecutionSummary(Reply):
    """An execution as ``GET /executions`` lists it."""

    __slots__ = ()
    exec_id = Field[str]()
    status = Field[str]()  # waiting, running, completed, failed, interrupted, timed_out,
    #                         stuck, crashed
    state_name = Field[str]()
    new_state_name = Field[Optional[str]]()
    started = Field[str]()
    elapsed = Field[float]()
    timeout = Field[Optional[float]]()
    interrupted = Field[bool]()
    interrupt_reason = Field[Optional[str]]()
    stuck = Field[bool]()
    thread_id = Field[Optional[int]]()
    progress = Field[Optional[str]]()
    checkpoints = Field[List[Checkpoint]]()
    crash = Field[Optional[Crash]](default=lambda: None)
    waiting = Field[Optional[Waiting]](default=lambda: None)


class ExecutionRecord(ExecutionSummary):
    """``GET /executions/<exec_id>``: the summary, the output so far, and the reply once
    the execution has ended (None before)."""

    __slots__ = ()
    output = Field[List[Output]]()
    reply = Field[Optional[ExecutionReply]]()

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        if self.get("reply") is not None:
            self["reply"] = ExecutionReply(self["reply"])

    def raise_for_error(self) -> ExecutionRecord:
        """This record, unless its execution ended with an error: ``CellFailed``."""
        if self.reply is not None:
            self.reply.raise_for_error()
        return self


class ExecutionList(Reply):
    __slots__ = ()
    executions = Field[List[ExecutionSummary]]()
    finished = Field[List[ExecutionSummary]]()

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        for key in ("executions", "finished"):
            self[key] = [ExecutionSummary(item) for item in self[key]]


class OutputPage(Reply):
    __slots__ = ()
    exec_id = Field[str]()
    stream = Field[str]()
    offset = Field[int]()
    text = Field[str]()
    next_offset = Field[int]()
    total = Field[int]()
    complete = Field[bool]()
    capped = Field[bool]()


class StateList(Reply):
    __slots__ = ()
    states = Field[List[str]]()


class TreeEntry(TypedDict, total=False):
    """A state as ``GET /states?tree=true`` lists it (``checkpoint`` on checkpoints only)."""
    name: str
    parent: Optional[str]
    depth: int
    timestamp: str
    first_line: str
    approx_bytes: int
    children: int
    checkpoint: bool


class StateTree(Reply):
    """``states(tree=True)``: every state, depth first, each with its parent and size."""

    __slots__ = ()
    states = Field[List[TreeEntry]]()


class StateInfo(Reply):
    """``GET /states/<name>``: a state's parent, code, time, and each name's type and repr."""

    __slots__ = ()
    name = Field[str]()
    timestamp = Field[str]()
    parent = Field[Optional[str]]()
    code = Field[str]()
    variables = Field[Dict[str, Variable]]()
    shared = Field[Dict[str, str]]()
    lost = Field[Dict[str, str]]()
    approx_bytes = Field[int]()
    shared_bytes = Field[int]()
    checkpoint = Field[bool](default=lambda: False)
    progress = Field[Optional[str]](default=lambda: None)


class StateDiff(Reply):
    __slots__ = ()
    from_ = Field[str]("from")
    to = Field[str]()
    added = Field[Dict[str, Variable]]()
    removed = Field[Dict[str, Variable]]()
    changed = Field[Dict[str, Change]]()


class Deleted(Reply):
    __slots__ = ()
    deleted = Field[str]()
    descendants = Field[List[str]](default=list)  # with descendants=True: those that went too


class Interrupted(Reply):
    __slots__ = ()
    interrupted = Field[str]()
    replaced = Field[bool](default=lambda: False)  # with force=True: the process is replaced


class FileStored(Reply):
    __slots__ = ()
    name = Field[str]()
    size = Field[int]()


class FileListing(Reply):
    __slots__ = ()
    files = Field[List[FileEntry]]()


class Transfer(Reply):
    """What ``download`` and ``export_state`` wrote: the remote name, bytes, media type."""

    __slots__ = ()
    name = Field[str]()
    size = Field[int]()
    content_type = Field[str]()


class Imported(Reply):
    __slots__ = ()
    imported = Field[str]()
    lost = Field[Dict[str, str]]()
    original = Field[Dict[str, Any]]()
