"""The kernel as MCP tools, over stdio or streamable HTTP: ``snapshot-kernel mcp``.

The only module that imports the ``mcp`` SDK (the ``mcp`` extra, Python 3.10 or
later). Each tool calls a backend (``backends``: a kernel in this process or
a server over HTTP) in a worker thread, and answers with text content for the
model (the concise rendering of the outputs and a line naming the exec_id and
the state), PNG and JPEG images as image content, the HTTP API's JSON as
structured content, and ``is_error`` when the cell raised. While a cell runs,
the tools that wait for it send progress notifications to hosts that asked.
How it is served, on stdio or HTTP, is ``transports``.
"""

import base64
import binascii
import functools
import inspect
import time
from typing import Annotated, Literal, Optional

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from . import text as mcp_text
from .text import DESCRIPTIONS, INSTRUCTIONS
from .backends import BackendError
from ..render import render_text
from ..tree import drawn

PROGRESS_INTERVAL = 1.0  # seconds between progress notifications while a cell runs
MAX_WAIT = 600.0         # seconds get_execution may wait
DEFAULT_PAGE = 100_000   # characters read_output returns unless told

READ_ONLY = ToolAnnotations(read_only_hint=True)
FILE_PATH = "the file's path, relative to the working directory ('/' between directories)"
NAME = "a state's name: at most 128 characters, no '/', '\\' or control characters"


def create_server(backend):
    """An MCP server whose tools run on ``backend`` (see ``backends``)."""
    tools = Tools(backend)
    server = _Server(tools, "snapshot-kernel", instructions=INSTRUCTIONS, log_level="WARNING")
    annotations = {"list_states": READ_ONLY, "get_state": READ_ONLY, "diff_states": READ_ONLY,
                   "list_executions": READ_ONLY, "get_execution": READ_ONLY,
                   "read_output": READ_ONLY, "read_file": READ_ONLY, "list_files": READ_ONLY,
                   "delete_state": ToolAnnotations(destructive_hint=True),
                   "write_file": ToolAnnotations(destructive_hint=True, idempotent_hint=True)}
    for name, description in DESCRIPTIONS.items():
        server.add_tool(getattr(tools, name), name=name, description=description,
                        annotations=annotations.get(name))
    return server


class _Server(MCPServer):
    """The SDK's server, whose refusals of arguments are one line naming what the tool
    takes, not pydantic's dump; and which takes ``ALIASES``, the names of old."""

    def __init__(self, tools, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._parameters = {name: _parameters(getattr(tools, name)) for name in DESCRIPTIONS}

    async def call_tool(self, name, arguments, context=None):
        parameters = self._parameters.get(name)
        if parameters is None:  # an unknown tool: the SDK says so
            return await super().call_tool(name, arguments, context)
        arguments = _unaliased(name, arguments)
        _check_names(name, arguments, parameters)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(_refusal(name, exc.__cause__, parameters)) from None


# Arguments renamed: get_state and delete_state took ``name`` where execute_code takes
# ``state_name``; the old name still works, unlisted.
ALIASES = {"get_state": {"name": "state_name"}, "delete_state": {"name": "state_name"}}


def _unaliased(tool, arguments):
    renamed = dict(arguments)
    for old, new in ALIASES.get(tool, {}).items():
        if old in renamed and new not in renamed:
            renamed[new] = renamed.pop(old)
    return renamed


def _parameters(method):
    """``{name: required}`` of a tool's arguments, from its method's signature."""
    return {name: parameter.default is inspect.Parameter.empty
            for name, parameter in inspect.signature(method).parameters.items()
            if parameter.annotation is not Context}


def _takes(tool, parameters):
    return (f"{tool} takes " + ", ".join(name + ("" if required else "?")
                                         for name, required in parameters.items())
            + " (? marks the optional ones)")


def _check_names(tool, arguments, parameters):
    unknown = sorted(set(arguments) - set(parameters))
    missing = [name for name, required in parameters.items()
               if required and name not in arguments]
    if unknown or missing:
        problems = ([f"no argument {', '.join(map(repr, unknown))}"] if unknown else []) + (
            [f"{', '.join(map(repr, missing))} is required"] if missing else [])
        raise ToolError(f"{'; '.join(problems)}: {_takes(tool, parameters)}")


def _refusal(tool, error, parameters):
    """One line for a pydantic ValidationError: each field and what it must be."""
    problems = [f"{'.'.join(str(part) for part in each['loc'])}: {each['msg']}"
                for each in error.errors()]
    return f"{'; '.join(problems)}: {_takes(tool, parameters)}"


class Tools:
    """The tools, each a method whose signature is the tool's input schema."""

    def __init__(self, backend):
        self.backend = backend

    async def execute_code(
            self, ctx: Context,
            code: Annotated[str, Field(description="the Python code to run")],
            state_name: Annotated[str, Field(description="the state to run on; 'initial' is "
                                                         "the empty state")] = "initial",
            new_state_name: Annotated[Optional[str], Field(
                description=f"the new state's name (default: state-N); {NAME}, not taken")] = None,
            timeout: Annotated[Optional[float], Field(
                ge=0, description="seconds before the code is interrupted, 0 for no limit "
                                  "(default: the server's --timeout)")] = None,
            wait: Annotated[bool, Field(
                description="false: answer at once with the exec_id, then poll "
                            "get_execution")] = True,
            exec_id: Annotated[Optional[str], Field(
                description="your id for this execution, for interrupt and get_execution "
                            "(default: a random one)")] = None,
            max_output: Annotated[Optional[int], Field(
                gt=0, description="characters kept of each stream and of the result's repr "
                                  "(default: the server's --max-output)")] = None,
            store: Annotated[bool, Field(
                description="false: run the code for its output and store no state (a "
                            "look at the data, a throwaway try)")] = True,
    ) -> CallToolResult:
        """Run a cell; the reply once it ends, or its exec_id at once if not ``wait``."""
        exec_id = await self._call(self.backend.start, code, state_name, new_state_name,
                                   exec_id, timeout, max_output, store)
        if not wait:
            return _result(mcp_text.started_note(exec_id, state_name),
                           {"exec_id": exec_id, "status": "running"})
        finished = False
        try:
            report = await self._until_done(exec_id, ctx)
            finished = True
        finally:
            if not finished:  # the host cancelled: like an HTTP client that hangs up
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._interrupt_quietly, exec_id)
        return _reply_result(report["reply"])

    def list_states(self, tree: Annotated[bool, Field(
            description="false: the names alone, oldest first")] = True) -> CallToolResult:
        """The tree of states, or their names."""
        listing = self._sync(self.backend.states, tree)
        text = drawn(listing["states"]) if tree else "\n".join(listing["states"])
        return _result(text, listing)

    def diff_states(
            self, state_name: Annotated[str, Field(description="the state before")],
            other: Annotated[str, Field(description="the state after")]) -> CallToolResult:
        """What ``other`` adds, removes and changes against ``state_name``."""
        diff = self._sync(self.backend.diff, state_name, other)
        return _result(mcp_text.diff_text(diff), diff)

    def get_state(self, state_name: Annotated[str, Field(description="the state's name")]
                  ) -> CallToolResult:
        """A state's metadata and variables."""
        state = self._sync(self.backend.describe, state_name)
        return _result(mcp_text.state_text(state), state)

    def delete_state(
            self, state_name: Annotated[str, Field(description="the state's name")],
            descendants: Annotated[bool, Field(
                description="true: delete every state made from it too")] = False,
    ) -> CallToolResult:
        """Drop a state, or a branch."""
        deleted = self._sync(self.backend.delete, state_name, descendants)
        if descendants:
            below = deleted["descendants"]
            note = (f"deleted state {state_name!r} and the {len(below)} made from it"
                    + (": " + ", ".join(map(repr, below)) if below else ""))
        else:
            note = f"deleted state {state_name!r}; states made from it keep their values"
        return _result(note, deleted)

    def interrupt(
            self, exec_id: Annotated[str, Field(description="the running execution")],
            force: Annotated[bool, Field(
                description="true: if the interrupt has not stopped it within 0.5 s, "
                            "replace the server process (a cell stuck in C)")] = False,
    ) -> CallToolResult:
        """Interrupt a running execution, by force if asked."""
        sent = self._sync(self.backend.interrupt, exec_id, force)
        note = (f"stopping exec_id {exec_id!r} by replacing the server process; "
                "get_execution shows how it ended once the new one serves"
                if sent.get("replaced") else
                f"interrupted exec_id {exec_id!r}; get_execution shows how it ended")
        return _result(note, sent)

    def list_executions(self) -> CallToolResult:
        """The running and recently finished executions."""
        listing = self._sync(self.backend.executions)
        return _result(mcp_text.executions_text(listing), listing)

    async def get_execution(
            self, ctx: Context,
            exec_id: Annotated[str, Field(description="the execution's exec_id")],
            wait: Annotated[float, Field(
                ge=0, le=MAX_WAIT, description="seconds to wait for it to finish "
                                               "(default 0: answer at once)")] = 0,
    ) -> CallToolResult:
        """An execution's record, after waiting up to ``wait`` s for it to end."""
        report = await self._until_done(exec_id, ctx, wait)
        if report["reply"] is None:
            rendered = render_text(report["output"])
            return _result(mcp_text.running_note(report), report, before=rendered)
        return _reply_result(report["reply"], report["status"], report)

    def read_output(
            self, exec_id: Annotated[str, Field(description="the execution's exec_id")],
            stream: Annotated[Literal["stdout", "stderr"], Field(
                description="which stream")] = "stdout",
            offset: Annotated[int, Field(ge=0, description="characters to skip")] = 0,
            limit: Annotated[int, Field(gt=0, description="characters to return")] = DEFAULT_PAGE,
    ) -> CallToolResult:
        """A page of an execution's full stream text."""
        page = self._sync(self.backend.output, exec_id, stream, offset, limit)
        return _result(mcp_text.page_note(page), page, before=page["text"])

    def read_file(self, path: Annotated[str, Field(description=FILE_PATH)]) -> CallToolResult:
        """A file, as text, an image or base64."""
        found = self._sync(self.backend.read_file, path)
        data = found.pop("data")
        if found["content_type"] in mcp_text.FILE_IMAGE_MIMES:
            note = mcp_text.file_note(found, "shown as an image")
            return CallToolResult(content=[ImageContent(data=_base64(data),
                                                        mime_type=found["content_type"]),
                                           TextContent(text=note)],
                                  structured_content={**found, "encoding": "image"})
        text = _utf8(data)
        if text is not None:
            return _result(mcp_text.file_note(found, "text"), {**found, "encoding": "utf-8"},
                           before=text)
        return _result(mcp_text.file_note(found, "binary, shown as base64"),
                       {**found, "encoding": "base64"}, before=_base64(data))

    def write_file(
            self, path: Annotated[str, Field(description=FILE_PATH)],
            content: Annotated[str, Field(description="the file's contents")],
            encoding: Annotated[Literal["utf-8", "base64"], Field(
                description="how content is written: utf-8 text (default), or base64 for "
                            "bytes")] = "utf-8",
    ) -> CallToolResult:
        """Store a file."""
        try:
            data = (base64.b64decode(content, validate=True) if encoding == "base64"
                    else content.encode("utf-8"))
        except (binascii.Error, UnicodeEncodeError) as exc:  # not base64; a lone surrogate
            raise ToolError(f"content cannot be written as {encoding}: {exc}") from None
        stored = self._sync(self.backend.write_file, path, data)
        return _result(f"wrote {stored['name']!r} ({stored['size']} bytes)", stored)

    def list_files(self, path: Annotated[str, Field(
            description="a directory, relative to the working directory (default: the "
                        "working directory)")] = "") -> CallToolResult:
        """A directory's entries."""
        listing = self._sync(self.backend.list_files, path)
        return _result(mcp_text.files_text(path, listing), listing)

    async def _until_done(self, exec_id, ctx, wait=None):
        """The execution's record once it has its reply, or after ``wait`` seconds (None:
        no limit); a progress notification every PROGRESS_INTERVAL meanwhile."""
        started = time.monotonic()
        deadline = None if wait is None else started + wait
        while True:
            left = PROGRESS_INTERVAL if deadline is None else deadline - time.monotonic()
            report = await self._call(self.backend.execution, exec_id,
                                      max(0.0, min(PROGRESS_INTERVAL, left)))
            if report["reply"] is not None or (deadline is not None
                                                 and time.monotonic() >= deadline):
                return report
            # A no-op unless the host sent a progress token; the count only has to grow.
            await ctx.report_progress(round(time.monotonic() - started, 3), None,
                                      mcp_text.progress_message(report))

    async def _call(self, method, *args):
        """``method(*args)`` in a worker thread: backends block."""
        return await anyio.to_thread.run_sync(functools.partial(self._sync, method, *args))

    @staticmethod
    def _sync(method, *args):
        try:
            return method(*args)
        except BackendError as exc:  # a refusal the model can act on: is_error with its text
            raise ToolError(mcp_text.refusal(str(exc))) from None

    def _interrupt_quietly(self, exec_id):
        try:
            self.backend.interrupt(exec_id)
        except BackendError:  # it ended meanwhile, or the server cannot be reached
            pass


def _utf8(data):
    """``data`` as text if it is UTF-8 without NUL bytes (a text file), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _base64(data):
    return base64.b64encode(data).decode("ascii")


def _result(note, structured, before=""):
    """Text content (``before``, if any, then ``note``) with ``structured`` as JSON."""
    blocks = [text for text in (before, note) if text]
    return CallToolResult(content=[TextContent(text=text) for text in blocks],
                          structured_content=structured)


def _reply_result(reply, status=None, structured=None):
    """An execution's reply as the model reads it: outputs, images, the note; is_error
    if the cell raised."""
    content = [TextContent(text=text) for text in (render_text(reply["output"]),) if text]
    content += [ImageContent(data=data, mime_type=mime)
                for mime, data in mcp_text.images(reply["output"])]
    content.append(TextContent(text=mcp_text.reply_note(reply, status)))
    return CallToolResult(content=content, structured_content=structured or reply,
                          is_error=reply["error"] is not None)
