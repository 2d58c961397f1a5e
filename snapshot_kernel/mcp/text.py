"""The text the MCP tools give models: the server's instructions and each tool's
description, and, beside the concise rendering of outputs, short lines that name what a
call left behind (the exec_id, the state stored, the error, where the rest of a cut
stream is), so that a model reading only text loses nothing the JSON reply holds. Pure
functions of the HTTP API's dicts; standard library only.
"""

from ..render import closing_parts

# What the server tells hosts of itself, and of each tool (its description).
INSTRUCTIONS = (
    "A Python kernel whose states you can branch. A state is an immutable snapshot of a "
    "namespace: variables, functions, classes, imported modules. execute_code runs code on a "
    "private copy of a state and, if the code succeeds, stores the result as a new state; the "
    "source state never changes, so you can try several variants from one state and keep the "
    "one that worked, without re-running earlier steps. 'initial' is the empty state. Code "
    "runs with this server's rights on its machine: it is not a sandbox.")

DESCRIPTIONS = {
    "execute_code": (
        "Run Python code on a copy of a state and, if it succeeds, store the result as a new "
        "state (the source state never changes). It behaves like a notebook cell: stdout and "
        "stderr are captured, the last expression's value is shown, plots come back as "
        "images, and `!cmd`, `%pip install pkg` and `%time` work. The text is the output "
        "(alone if there is one, else in <stdout>, <stderr>, <execute_result>, <error> tags); "
        "its last line names the exec_id and the new state, or the error. Run the next step "
        "on the new state by passing it as state_name. For work longer than a minute, pass "
        "wait=false and poll get_execution; in the code, checkpoint(progress='3/10') stores "
        "the globals so far as a state and reports progress."),
    "list_states": (
        "List the stored states as a tree: each under the state it was made from, with when "
        "it was made, its size, how many states were made from it and the first line of "
        "the code that made it. 'initial' is the empty state. tree=false lists the names "
        "alone, oldest first."),
    "diff_states": (
        "What a branch did: the names state `other` adds to `state_name`, removes, and holds "
        "a different value under (values compared by what they hold: a name a cell only "
        "read, or bound again to an equal value, is unchanged), each side's type, shape or "
        "length and repr."),
    "get_state": (
        "Describe a state: its parent, the code that made it, when, and each variable's type "
        "and repr (cut to 2,000 characters). Values shared between states instead of copied "
        "(modules, locks, open files) are listed with the reason."),
    "delete_state": ("Delete a state to free its memory. States made from it keep their values, "
                     "or, with descendants=true, are deleted with it (a whole branch at once). "
                     "'initial' cannot be deleted."),
    "interrupt": (
        "Stop a running execution by raising KeyboardInterrupt in its code. Its result then "
        "says KeyboardInterrupt and stores no state; checkpoints it made stay. An interrupt "
        "cannot reach a long call in C (an SVD, a blocked lock): force=true then replaces "
        "the server process, keeping every stored state, and other running executions are "
        "reported crashed."),
    "list_executions": (
        "List the running executions (elapsed time, progress hint, checkpoints, stuck) and "
        "the recently finished ones."),
    "get_execution": (
        "An execution's status (running, completed, failed, interrupted, timed_out, stuck, "
        "crashed: the server process died while it ran, and `crash` says how), "
        "its output so far and its latest progress hint; once it has finished, the same "
        "result execute_code gives. Set wait to wait that many seconds for it to finish."),
    "read_output": (
        "Read the complete stdout or stderr of an execution whose result was cut (the "
        "result says so), a page at a time."),
    "read_file": (
        "Read a file of the working directory, where cells run (a path relative to it, "
        "'/' between directories). Text comes back as text; PNG, JPEG, GIF and WebP images "
        "as images; other bytes as base64. Files up to 1 MB: read larger ones in a cell."),
    "write_file": (
        "Write a file into the working directory, where cells run, so code can open it by "
        "this path; the directories it needs are made and an existing file is replaced. "
        "content is text, or base64 with encoding='base64'."),
    "list_files": (
        "List a directory of the working directory (by default the working directory "
        "itself): each entry's name, size and modification time; directories end in '/'."),
}

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
    waiting = report.get("waiting")
    if waiting:
        line += (f"; waits for {', '.join(map(repr, waiting['for']))}, whose process-wide "
                 f"settings differ ({'; '.join(waiting['settings'])}); its timeout has not "
                 "started")
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
