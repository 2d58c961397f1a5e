"""What the kernel refuses, and how: ``KernelError`` and the checks on arguments.

``main.py`` maps each subclass to an HTTP status (``KERNEL_ERROR_STATUS``).
"""

MAX_NAME_LENGTH = 128
MAX_POSITIVE = 10 ** 9  # a timeout or max_output must be below it


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
    if not name.isprintable() or name != name.strip():
        raise InvalidName(f"{what} {name!r} may not contain control characters "
                          "or start or end with whitespace")


def positive(name, value, default, whole=False):
    """``value`` if it is a positive number (a whole one if ``whole``), else ``default``."""
    if value is None:
        return default
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < MAX_POSITIVE:
        kind = "whole number" if whole else "number of seconds"
        raise InvalidArgument(f"{name} must be a positive {kind}, got {value!r}")
    return value
