"""The tree of states: what ``GET /states?tree=true`` lists and draws, and what
``DELETE /states/<name>?descendants=true`` takes with a state.

A state names its parent; deleting the parent leaves the name (states are never
changed), and a later state may take it. So a state is a child of the state of
its parent's name only if that state is older: the states of a deleted parent
are roots of their own, as imported states are (their parent is on another
server). Pure functions of ``states.storage.State``-like objects, in creation
order; ``Tending``, the kernel's side, takes the kernel lock only to copy its table.
"""

from datetime import datetime, timezone

from . import heap
from .errors import ProtectedState, UnknownState, missing_state

INITIAL = "initial"
MAX_FIRST_LINE = 80  # characters of a state's first line of code a listing shows


def children_of(states):
    """``{name: [child states, in creation order]}`` of ``states`` (creation order)."""
    by_name = {state.name: state for state in states}
    children = {state.name: [] for state in states}
    for state in states:
        parent = by_name.get(state.parent)
        if parent is not None and parent is not state and parent.created <= state.created:
            children[parent.name].append(state)
    return children


def listing(states):
    """``GET /states?tree=true``: each state's entry, depth first from the roots."""
    children = children_of(states)
    attached = {child.name for kids in children.values() for child in kids}
    entries = []
    todo = [(state, 0) for state in reversed(states) if state.name not in attached]
    while todo:
        state, depth = todo.pop()
        entries.append(_entry(state, depth, len(children[state.name])))
        todo.extend((child, depth + 1) for child in reversed(children[state.name]))
    return entries


def descendants_of(states, name):
    """The names of the states made from state ``name``, at any depth, in creation order."""
    children = children_of(states)
    found, todo = set(), [name]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child.name)
            todo.append(child.name)
    return [state.name for state in states if state.name in found]


def _entry(state, depth, children):
    entry = {"name": state.name, "parent": state.parent, "depth": depth,
             "timestamp": state.timestamp, "first_line": first_line(state.code),
             "approx_bytes": state.new_bytes, "children": children}
    if state.meta.get("checkpoint"):
        entry["checkpoint"] = True
    return entry


def first_line(code):
    """The first line of ``code`` that is not blank, cut to MAX_FIRST_LINE characters."""
    line = next((line.strip() for line in code.splitlines() if line.strip()), "")
    return line if len(line) <= MAX_FIRST_LINE else line[:MAX_FIRST_LINE - 1] + "…"


def drawn(entries):
    """The listing as text a person or a model reads: one state a line, indented under
    its parent, with when it was made (UTC), its size, its children, its first line."""
    lines, open_levels = [], []
    for entry, last in zip(entries, _last_of_siblings(entries)):
        depth = entry["depth"]
        del open_levels[depth:]
        prefix = "".join("│   " if open_ else "    " for open_ in open_levels[1:])
        branch = "" if depth == 0 else ("└── " if last else "├── ")
        open_levels.append(not last)
        lines.append(prefix + branch + _described(entry))
    return "\n".join(lines)


def _last_of_siblings(entries):
    """For each entry (depth first), whether no later sibling follows it."""
    flags, later = [], {}  # depth -> a later sibling at that depth was seen
    for entry in reversed(entries):
        depth = entry["depth"]
        flags.append(not later.get(depth, False))
        later = {level: seen for level, seen in later.items() if level < depth}
        later[depth] = True
    return flags[::-1]


def _described(entry):
    made = datetime.fromisoformat(entry["timestamp"]).astimezone(timezone.utc)
    facts = [made.strftime("%H:%M:%S"), _size(entry["approx_bytes"])]
    if entry["children"]:
        facts.append(f"{entry['children']} child{'ren' if entry['children'] > 1 else ''}")
    if entry.get("checkpoint"):
        facts.append("checkpoint")
    if entry["depth"] == 0 and entry["parent"] is not None:
        facts.append(f"parent {entry['parent']!r} deleted")
    code = f"  {entry['first_line']}" if entry["first_line"] else ""
    return f"{entry['name']}  [{', '.join(facts)}]{code}"


def _size(count):
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


class Tending:
    """Mixed into SnapshotKernel: the tree of states listed, and states deleted."""

    def state_tree(self):
        """What ``GET /states?tree=true`` answers: ``listing`` of the states now."""
        with self._lock:
            states = list(self._states.values())
        return listing(states)

    def delete(self, name, descendants=False):
        """Drop a state, and with ``descendants`` every state made from it, at any depth;
        the names of those, in creation order. Children not dropped keep what they use
        of a dropped state; the rest is freed, and given back to the system."""
        below = []
        if descendants and name != INITIAL:  # 'initial' is refused below, before anything goes
            self._get(name)  # an unknown name drops nothing
            with self._lock:
                states = list(self._states.values())
            below = descendants_of(states, name)
        for child in reversed(below):  # the deepest first: none has a child left to fold into
            try:
                self._drop(child)
            except UnknownState:  # deleted meanwhile by another request
                below.remove(child)
        self._drop(name)
        heap.give_back()  # now that nothing here holds the states
        self._sweeper.soon()  # and what only their cycles held, once no cell runs
        return below

    def _drop(self, name):
        with self._lock:
            if name == INITIAL:
                raise ProtectedState(f"state {INITIAL!r} cannot be deleted; POST /reset "
                                     "to drop every other state")
            state = self._states.pop(name, None)
            if state is None:
                names = list(self._states)
            else:
                layer = state.names
                # A state whose cell changed nothing holds its parent's very names. While
                # another state holds them, the layer stays: only the state goes, on disk too.
                kept = any(other.names is layer for other in self._states.values())
                over = [] if kept else [other.names for other in self._states.values()
                                        if other.names.base is layer]
        if state is None:
            raise missing_state(name, names)
        for names in over:
            names.absorb_base()
        if self._store is not None:
            self._store.delete(name, layer, over)
