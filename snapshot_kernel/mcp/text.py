"""The text the MCP tools give models, beside the concise rendering of outputs.

Short lines that name what a call left behind (the exec_id, the state stored,
the error, where the rest of a cut stream is), so that a model reading only
text loses nothing the JSON reply holds. Pure functions of the HTTP API's dicts;
standard library only.
"""

from ..render import closing_parts

IMAGE_MIMES = ("image/png", "image/jpeg")  # what MCP hosts show as images; SVG stays a note
FILE_IMAGE_MIMES = IMAGE_MIMES + ("image/gif", "image/webp")  # read_file sends these as images
# The kernel's refusals point at HTTP routes; over MCP the same hint names a tool.
ROUTE_TOOLS = (("GET /states", "list_states"), ("GET /executions", "list_executions"))


def refusal(message):
    """A refusal's message with the routes it names replaced by the tools that do the same."""
    for route, tool in ROUTE_TOOLS:
        message = message.replace(route, tool)
    return message


def reply_note(reply, status=None):
    """One line: the exec_id, the state stored or the error, checkpoints, cut streams."""
    label = f"exec_id {reply['exec_id']!r}" + (f" ({status})" if status else "")
    return f"{label}: " + "; ".join(closing_parts(reply, _read_output_call))


def _read_output_call(exec_id, stream, facts):
    return f"read_output(exec_id={exec_id!r}, stream={stream!r})"


def started_note(exec_id, state_name):
    """What ``execute_code(wait=false)`` says: where to look next."""
    return (f"exec_id {exec_id!r}: running on {state_name!r}; get_execution(exec_id={exec_id!r}, "
            "wait=30) waits for its result, interrupt(exec_id=...) stops it")


def running_note(report):
    """One line on an execution still running: how long, its progress, its checkpoints."""
    line = (f"exec_id {report['exec_id']!r} ({report['status']}): {report['elapsed']:.1f} s "
            f"on {report['state_name']!r}")
    return line + "".join(f"; {part}" for part in _progress_parts(report))


def progress_message(report):
    """The message of a progress notification for a running execution."""
    return "; ".join([f"running for {report['elapsed']:.0f} s", *_progress_parts(report)])


def _progress_parts(report):
    parts = []
    if report.get("progress"):
        parts.append(f"progress: {report['progress']}")
    if report.get("checkpoints"):
        parts.append(f"last checkpoint {report['checkpoints'][-1]['state_name']!r}")
    return parts


def state_text(state):
    """A state as ``GET /states/<name>`` describes it, in a few lines."""
    head = f"state {state['name']!r}"
    if state.get("parent") is not None:
        head += f", child of {state['parent']!r}"
    head += f", made {state['timestamp']}"
    if state.get("checkpoint"):
        head += f", a checkpoint (progress: {state.get('progress')})"
    lines = [head]
    if state.get("code"):
        lines += ["code:", state["code"]]
    variables = state.get("variables") or {}
    lines.append("variables:" if variables else "no variables")
    lines += [f"  {name}: {entry['type']} = {entry['repr']}" for name, entry in variables.items()]
    for key, what in (("shared", "shared by reference, not copied"),
                      ("lost", "lost at a restart")):
        if state.get(key):
            lines.append(f"{what}: " + ", ".join(f"{name} ({reason})"
                                                 for name, reason in state[key].items()))
    return "\n".join(lines)


DIFF_REPR = 500  # characters of each repr a diff's text shows (its JSON has them whole)


def diff_text(diff):
    """A diff as ``GET /states/<a>/diff/<b>`` gives it, in a few lines a name."""
    counts = ", ".join(f"{len(diff[key])} {key}" for key in ("added", "removed", "changed"))
    lines = [f"from {diff['from']!r} to {diff['to']!r}: {counts}"]
    for key in ("added", "removed"):
        lines += [f"{key}:"] * bool(diff[key])
        lines += [f"  {name}: {_variable(entry)}" for name, entry in diff[key].items()]
    lines += ["changed:"] * bool(diff["changed"])
    for name, sides in diff["changed"].items():
        lines.append(f"  {name}: {_variable(sides['before'])}")
        lines.append(f"  {' ' * len(name)}  -> {_variable(sides['after'])}")
        if "not_compared" in sides:
            lines.append(f"  {' ' * len(name)}  (not compared: {sides['not_compared']})")
    return "\n".join(lines)


def _variable(entry):
    extent = (f" {'x'.join(map(str, entry['shape']))}" if "shape" in entry
              else f" of {entry['length']}" if "length" in entry else "")
    text = entry["repr"]
    if len(text) > DIFF_REPR:
        text = text[:DIFF_REPR - 1] + "…"
    return f"{entry['type']}{extent} = {text}"


def executions_text(listing):
    """The running and the recently finished executions, one line each."""
    running, finished = listing.get("executions", []), listing.get("finished", [])
    if not running and not finished:
        return "no execution is running, and none has finished recently"
    lines = ["running:" if running else "nothing running"]
    lines += ["  " + running_note(summary) for summary in running]
    if finished:
        lines.append("finished, latest first:")
        lines += [f"  exec_id {summary['exec_id']!r} ({summary['status']}): on "
                  f"{summary['state_name']!r}, started {summary['started']}"
                  for summary in finished]
    return "\n".join(lines)


def page_note(page):
    """Where a page of full output sits in its stream, and how to read on."""
    note = (f"{page['stream']} characters {page['offset']}-{page['next_offset']} "
            f"of {page['total']}")
    if page["next_offset"] < page["total"]:
        note += (f"; more: read_output(exec_id={page['exec_id']!r}, stream={page['stream']!r}, "
                 f"offset={page['next_offset']})")
    if not page["complete"]:
        note += "; the cell is still running, so more may come"
    if page["capped"]:
        note += "; the text kept hit its cap (--max-full-output), so later text is lost"
    return note


def file_note(found, shown):
    """One line on a file read_file returns: its size, its type, and how it is shown."""
    return f"{found['name']!r}: {found['size']} bytes, {found['content_type']}, {shown}"


def files_text(path, listing):
    """A directory's entries, one a line: directories end in '/'."""
    where = repr(path) if path.strip("/") else "the working directory"
    if not listing["files"]:
        return f"{where} is empty"
    lines = [f"{where}:"]
    lines += [f"  {item['name']}/" if item["is_dir"] else
              f"  {item['name']}  {item['size']} bytes  {item['mtime']}"
              for item in listing["files"]]
    return "\n".join(lines)


def images(outputs):
    """``(mime, base64)`` of the image each rich output shows, in order (PNG first)."""
    found = []
    for output in outputs:
        if output.get("output_type") not in ("display_data", "execute_result"):
            continue
        data = output.get("data") or {}
        mime = next((mime for mime in IMAGE_MIMES if _text(data.get(mime))), None)
        if mime is not None:
            found.append((mime, "".join(_text(data[mime]).split())))
    return found


def _text(value):
    """Notebook files may hold a base64 image as a list of lines."""
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""
