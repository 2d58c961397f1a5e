"""What a cell's code may reach of the names of a state: the names it uses, those it
only binds first or only deletes (``Working.open`` copies in only what these allow).

Read from the bytecode of the code and the code nested in it, cached by what the code
holds (``_code_key``), so a cell sent again is not read again.
"""

import collections
import dis
import functools
import re
import threading

from ..cell import code_tree

# Names whose use can reach globals no scan can see: the dict itself, or code made at run time.
_EVERYTHING = frozenset({"globals", "vars", "locals", "dir", "_getframe", "currentframe",
                         "f_globals", "__globals__", "eval", "exec", "compile"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# A cell sent again (compiled anew, or its kept code given a new file name: ``cell``) finds
# its analysis here. A cache keyed by the code object lost it with the object and read the
# bytecode again each time (30 us of a 130 us ``1+1``); one holding the code object would
# keep it alive, and with it its cell's source in ``linecache``. So the key is what the
# analysis reads of the code: its bytecode, names and constants, nested code by its key.
# Code holding a large constant is not kept.
_CACHED_CODES = 1024
_LARGE_CONSTANT = 4096


def _code_key(code):
    """What ``code`` holds that an analysis reads, without the code object; None if it
    holds a large constant."""
    consts = []
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            const = _code_key(const)
            if const is None:
                return None
        elif isinstance(const, (str, bytes)) and len(const) > _LARGE_CONSTANT:
            return None
        consts.append((type(const), const))
    return (code.co_code, code.co_flags, code.co_names, code.co_varnames, code.co_cellvars,
            code.co_freevars, getattr(code, "co_exceptiontable", b""), tuple(consts))


def _cached_by_code(analyse):
    """``analyse(code)``, kept for the last ``_CACHED_CODES`` codes by ``_code_key``."""
    kept = collections.OrderedDict()
    lock = threading.Lock()

    @functools.wraps(analyse)
    def analysed(code):
        key = _code_key(code)
        if key is None:
            return analyse(code)
        with lock:
            found = kept.get(key)
            if found is not None:
                kept.move_to_end(key)
                return found
        found = analyse(code)
        with lock:
            kept[key] = found
            if len(kept) > _CACHED_CODES:
                kept.popitem(last=False)
        return found
    analysed.kept = kept
    return analysed


def code_needs(code):
    """``(names, everything)``: the names ``code`` and the code nested in it may
    touch (a superset), and whether it may touch any name at all."""
    return _analysed(code)[:2]


def deleted_only(code):
    """The names ``code`` (and the code nested in it) deletes, and may bind, but never
    reads or names otherwise: a ``del`` of one needs the name, not its value."""
    return _analysed(code)[2]


@_cached_by_code
def _analysed(code):
    names, binds, deletes, other = set(), set(), set(), set()
    for each in code_tree(code):
        names.update(each.co_names)
        _bound_or_used(each, binds, deletes, other)
        for const in each.co_consts:
            if isinstance(const, str):
                in_string = _IDENTIFIER.findall(const)
                names.update(in_string)
                other.update(in_string)
    # A name the code only binds as a global, never reads or deletes, needs no copy
    # of its old value (``fig, ax = plt.subplots()`` on a state whose figure is big).
    # Nor one it only deletes: ``del big`` needs the name, not its value (``Working``).
    found = (frozenset(names - ((binds | deletes) - other)),
             not _EVERYTHING.isdisjoint(names), frozenset(deletes - other))
    return found


_STORES = frozenset({"STORE_NAME", "STORE_GLOBAL"})
_DELETES = frozenset({"DELETE_NAME", "DELETE_GLOBAL"})
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))


def binds_first(code):
    """The names a cell's ``code`` surely binds before anything in it may read them: its
    old value is never seen, so it needs no copy (``fig, axes = plt.subplots()`` and then
    ``axes[0]`` on a state whose ``fig`` is big).

    Read from the code's straight-line start: up to the first jump, jump target, or
    instruction a handler covers (a loop, a branch, a ``try`` or ``with`` may skip a
    binding and go on). A statement that raises there ends the cell, which then stores
    nothing. A name counts as read where any instruction names it before its binding (a
    load, a delete, an attribute or a string, as ``code_needs`` counts them), and so does
    every name of a function, class or comprehension made there, which may run before
    the binding. A name deleted anywhere in the code is left out."""
    return _binds_first(code)


@_cached_by_code
def _binds_first(code):
    return frozenset(_straight_line_binds(code))


def _straight_line_binds(code):
    handled = [entry.start for entry in getattr(dis.Bytecode(code), "exception_entries", ())]
    first_handled = min(handled, default=None)
    read, bound = set(), set()
    for instruction in dis.get_instructions(code):
        if (instruction.is_jump_target or instruction.opcode in _JUMPS
                or instruction.opname.startswith("SETUP_")
                or (first_handled is not None and instruction.offset >= first_handled)):
            break
        value = instruction.argval
        if instruction.opname in _STORES:
            if value not in read:
                bound.add(value)
        elif isinstance(value, str):
            read.update(_IDENTIFIER.findall(value))
        elif isinstance(value, tuple):  # keyword names, a constant tuple
            read.update(name for item in value if isinstance(item, str)
                        for name in _IDENTIFIER.findall(item))
        elif hasattr(value, "co_code"):
            for each in code_tree(value):
                read.update(each.co_names, each.co_varnames, each.co_freevars)
                read.update(name for const in each.co_consts if isinstance(const, str)
                            for name in _IDENTIFIER.findall(const))
    # A name the cell deletes anywhere is copied in even so: the commit learns of a deletion
    # from a name it copied in and no longer finds.
    return bound - {instruction.argval for each in code_tree(code)
                    for instruction in dis.get_instructions(each)
                    if instruction.opname in _DELETES}


def _bound_or_used(code, binds, deletes, other):
    """Add to ``binds`` the names ``code`` binds as globals, to ``deletes`` those it
    deletes, and to ``other`` every name it uses otherwise: read, an attribute's, a
    local's, a constant string."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in _STORES:
            binds.add(instruction.argval)
        elif instruction.opname in _DELETES:
            deletes.add(instruction.argval)
        elif isinstance(instruction.argval, str):
            other.add(instruction.argval)
