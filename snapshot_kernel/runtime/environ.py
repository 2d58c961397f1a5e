"""The environment held per cell: ``os.environ`` reads and writes the cell's own, and the
processes a cell starts get it.

``os.environ`` and ``os.environb`` keep their objects; their class becomes one whose
``_data`` (the dict both read) is, in a thread holding a cell's settings, that cell's
environment: the process's, with what the cell's state changed. A write in a cell goes
to a private copy of it and never to the C environment, which other cells' processes
inherit. ``subprocess``, ``os.system``, ``os.exec*`` and ``os.spawn*`` pass the cell's
environment on where it differs from the process's. C code that calls ``getenv``
itself reads the process's.

A state's value is what its cells changed: ``{key: value}``, encoded as ``os.environ``
keeps them, with None for a key they removed.
"""

import os
import subprocess

from .held import current

NAME = "environ"


def _process_data():
    return vars(os.environ)["_data"]


def _effective(held):
    """The cell's environment to read: its working copy, or the process's with the
    state's changes (the process's own dict where the state changed nothing)."""
    working = held.working.get(NAME)
    if working is not None:
        return working
    changes = held.values.get(NAME)
    if not changes:
        return _process_data()
    working = held.working[NAME] = _applied(_process_data(), changes)
    return working


def _writable(held):
    working = held.working.get(NAME)
    if working is None:
        working = held.working[NAME] = _applied(_process_data(), held.values.get(NAME))
    return working


def _applied(process, changes):
    environment = dict(process)
    for key, value in (changes or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return environment


class HeldEnviron(os._Environ):
    """The class of ``os.environ`` and ``os.environb`` (see the module's docstring)."""

    @property
    def _data(self):
        held = current()
        return vars(self)["_data"] if held is None else _effective(held)

    @_data.setter
    def _data(self, data):
        vars(self)["_data"] = data

    def __setitem__(self, key, value):
        held = current()
        if held is None:
            return super().__setitem__(key, value)
        _writable(held)[self.encodekey(key)] = self.encodevalue(value)

    def __delitem__(self, key):
        held = current()
        if held is None:
            return super().__delitem__(key)
        try:
            del _writable(held)[self.encodekey(key)]
        except KeyError:
            raise KeyError(key) from None


def leave(held, changes):
    """The state's new value: ``changes`` itself unless the cell changed its environment."""
    working = held.working.get(NAME)
    if working is None:
        return changes
    process = _process_data()
    now = {key: value for key, value in working.items() if process.get(key) != value}
    now.update((key, None) for key in process if key not in working)
    if now == (changes or {}):
        return changes
    return now or None


def for_child():
    """The environment a process the calling thread starts should get, or None where
    that is the process's own (a thread that runs no cell, or a cell that changed none)."""
    held = current()
    if held is None:
        return None
    environment = _effective(held)
    return None if environment is _process_data() else environment


# -- processes a cell starts --------------------------------------------------------------

_ENV_POSITION = 10  # Popen(args, bufsize, executable, stdin, stdout, stderr, preexec_fn,
#                     close_fds, shell, cwd, env, ...): env's index among the positionals


def _popen_init(init):
    def __init__(self, *args, **kwargs):
        if len(args) <= _ENV_POSITION and kwargs.get("env") is None:
            environment = for_child()
            if environment is not None:
                kwargs["env"] = environment
        return init(self, *args, **kwargs)

    __init__._snapshot_kernel = True
    __init__.__doc__ = init.__doc__
    return __init__


def _system(system):
    def held_system(command):
        environment = for_child()
        if environment is None:
            return system(command)
        # os.system's own semantics (a wait status), with the cell's environment
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", command], environment)
        return os.waitpid(pid, 0)[1]

    held_system._snapshot_kernel = True
    held_system.__doc__ = system.__doc__
    return held_system


def _execv(execv):
    def held_execv(path, args):
        environment = for_child()
        if environment is None:
            return execv(path, args)
        return os.execve(path, args, environment)

    held_execv._snapshot_kernel = True
    held_execv.__doc__ = execv.__doc__
    return held_execv


def install():
    """Put the per-cell environment in place; idempotent."""
    for environment in (os.environ, os.environb):
        if type(environment) is os._Environ:
            environment.__class__ = HeldEnviron
    if not getattr(subprocess.Popen.__init__, "_snapshot_kernel", False):
        subprocess.Popen.__init__ = _popen_init(subprocess.Popen.__init__)
    if not getattr(os.system, "_snapshot_kernel", False):
        os.system = _system(os.system)
    if not getattr(os.execv, "_snapshot_kernel", False):
        os.execv = _execv(os.execv)  # execl*, execvp, spawnv* and pty.spawn call it by name
