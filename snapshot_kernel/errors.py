"""What the kernel refuses, and how: ``KernelError`` and the checks on arguments.

``main.py`` maps each subclass to an HTTP status (``KERNEL_ERROR_STATUS``).
"""

import difflib
import re

MAX_NAME_LENGTH = 128
MAX_POSITIVE = 10 ** 9  # a timeout or max_output must be below it
# What a name may not hold, as classes that Python's re and ECMA-262 (JSON Schema's
# patterns) read alike, so GET /openapi.json says what check_name takes. Fixed code
# points, not Unicode categories: a name taken on one Python is taken on another.
# Anywhere: the path separators, C0 and C1 controls, line and paragraph separators.
_NOWHERE = r"/\\\x00-\x1f\x7f-\x9f\u2028\u2029"
# At either end: whitespace, as ECMA-262's \s (Python's differs at U+FEFF).
_NOT_AT_ENDS = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\ufeff"
NAME_PATTERN = (rf"^(?!\.\.?$)[^{_NOWHERE}{_NOT_AT_ENDS}]"
                rf"(?:[^{_NOWHERE}]*[^{_NOWHERE}{_NOT_AT_ENDS}])?$")
_NAME = re.compile(NAME_PATTERN)
# And lone surrogates: no UTF-8, so no URL, log line or file name can hold them. Only the
# document's description says so: JSON text does not carry them portably, and validators
# whose strings are UTF-8 (Rust's, schemathesis's) cannot compile a pattern naming them.
_SURROGATE = re.compile("[\ud800-\udfff]")


class KernelError(Exception):
    """A request the kernel refuses; the message says what to do instead."""


class InvalidArgument(KernelError):
    pass


class InvalidName(InvalidArgument):
    pass


class UnknownState(KernelError):
    pass


class UnknownExecution(KernelError):
    pass


class StateExists(KernelError):
    pass


class ExecutionExists(KernelError):
    pass


class ProtectedState(KernelError):
    pass


class CannotReplace(KernelError):
    """A forced stop needs a supervisor to start a new server process, and the states
    on disk to outlive the old one."""


# -- files (``files.Workdir``) --

class InvalidPath(InvalidArgument):
    """A file path that could leave the working directory, or names nothing it can hold."""


class UnknownFile(KernelError):
    pass


class FileConflict(KernelError):
    """The path names a directory where a file is needed, or the other way round."""


class FileTooLarge(KernelError):
    pass


class FileDenied(KernelError):
    """The server's user may not read or write there."""


class NoSpace(KernelError):
    """The disk (or the user's quota) is full."""


# -- portable states (``porting.Porting``) --

class BadArchive(KernelError):
    """An archive to import that is not one, or is truncated or damaged."""


class IncompatibleArchive(KernelError):
    """A whole archive that this server cannot load: another CPython minor version, or a
    library it lacks or has in another major version."""


class ResetMeanwhile(KernelError):
    """The kernel was reset while a request that stores a state was under way."""


def check_name(name, what="state name"):
    """Raise InvalidName unless ``name`` can be used in a URL path and a log line."""
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{what} must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{what} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise InvalidName(f"{what} {name!r} may not be '.', '..' or contain '/' or '\\'")
    if not _NAME.fullmatch(name) or _SURROGATE.search(name):
        raise InvalidName(f"{what} {name!r} may not contain control characters, line "
                          "separators or lone surrogates, or start or end with whitespace")


def missing_state(name, names):
    """The error for a state ``name`` that is not among ``names``: InvalidName if no
    state could be called that, else UnknownState suggesting the nearest names."""
    try:
        check_name(name, "state name")
    except InvalidName as exc:
        return exc
    close = difflib.get_close_matches(name, names, 3, 0.6)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    return UnknownState(f"no state named {name!r}; {hint}GET /states lists them")


def seconds_or_none(name, value, default):
    """``value`` seconds if it is a positive number; None (no limit) if it is 0, as for
    ``--timeout 0``; ``default`` if it is None."""
    if value == 0 and not isinstance(value, bool):
        return None
    return positive(name, value, default)


def positive(name, value, default, whole=False):
    """``value`` if it is a positive number (a whole one if ``whole``), else ``default``."""
    if value is None:
        return default
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < MAX_POSITIVE:
        kind = "whole number" if whole else "number of seconds (0: no limit)"
        raise InvalidArgument(f"{name} must be a positive {kind}, got {value!r}")
    return value
