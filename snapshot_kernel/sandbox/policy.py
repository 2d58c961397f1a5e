"""What the sandbox grants: the paths a cell may write and read, and the environment that
points programs at them.

A cell writes in the workdir, the state directory and the server's private directory (made
by the supervisor in $TMPDIR, removed when it stops: ``tmp`` is $TMPDIR, ``cache`` is
$XDG_CACHE_HOME and matplotlib's, ``packages`` is where ``%pip`` installs unless there is a
state directory, which then holds it), plus /dev/shm (multiprocessing's semaphores) and the
harmless devices. It reads those, the Python installation (prefixes, ``sys.path``, this
package), the directories on $PATH, and the system's files (/usr, /etc but its credentials,
/proc, /sys, ...). Never a directory that holds the home directory or $TMPDIR: a $PATH or
``sys.path`` entry like that is left out.
"""

import fnmatch
import os
import pwd
import sys
import sysconfig
import tempfile

SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/proc",
          "/sys", "/nix/store", "/gnu/store", "/var/lib/ca-certificates")
CONFIGURATION = "/etc"
CREDENTIALS = ("/etc/shadow*", "/etc/gshadow*", "/etc/sudoers*", "/etc/ssh/ssh_host_*",
               "/etc/ssl/private", "/etc/security/opasswd", "/etc/krb5.keytab")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SHARED_MEMORY = "/dev/shm"
TOKEN_ENV = "SNAPSHOT_KERNEL_TOKEN"  # cli's: the server process keeps it out of cells' way
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Places:
    """The directories of one server's sandbox: ``private`` (the supervisor's), and in it
    or in the state directory, the package directory."""

    def __init__(self, private, state_dir):
        self.private = private
        self.tmp = os.path.join(private, "tmp")
        self.cache = os.path.join(private, "cache")
        self.packages = os.path.join(state_dir or private, "packages")
        self.site = package_site(self.packages)

    def make(self):
        """Make the directories (again, if a cell removed them); idempotent."""
        for path in (self.tmp, os.path.join(self.cache, "matplotlib"), *self.site,
                     os.path.join(self.packages, "bin")):
            os.makedirs(path, exist_ok=True)


def package_site(prefix):
    """Where ``pip install --prefix PREFIX`` puts modules: purelib, and platlib if apart."""
    paths = sysconfig.get_paths("posix_prefix", vars={"base": prefix, "platbase": prefix})
    return list(dict.fromkeys((paths["purelib"], paths["platlib"])))


def writable(workdir, state_dir, places):
    """The directories and devices cells may write in."""
    paths = [workdir, places.private, SHARED_MEMORY, *DEVICES]
    if state_dir is not None:
        paths.insert(1, state_dir)
    return _existing(paths)


def exposed_code(writable):
    """The server's own code (its Python installation, this package) that lies where cells
    may write: they could change what the next server, or the supervisor, runs."""
    code = {os.path.realpath(path) for path in (sys.prefix, sys.exec_prefix, _PACKAGE_DIR)}
    exposed = [path for path in code
               if any(_within(path, place) for place in writable if place not in DEVICES)]
    return sorted(path for path in exposed  # the package in the virtualenv: bound with it
                  if not any(path != other and _within(path, other) for other in exposed))


def readable():
    """The directories and files cells may read (besides what they may write)."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable)), _PACKAGE_DIR,
              *sysconfig.get_paths().values(), *_import_path()}
    found = [*_path_list("PATH"), *_path_list("LD_LIBRARY_PATH")]
    never = _never_whole()
    granted = [path for path in [*sorted(python), *found]
               if os.path.isabs(path) and not any(_within(place, path) for place in never)]
    return _existing([*SYSTEM, *granted, *_configuration()])


def _import_path():
    """``sys.path`` but the directory ``python -m`` put first: where it was started."""
    entries = list(sys.path)
    if entries and entries[0] and os.path.realpath(entries[0]) == os.path.realpath(os.getcwd()):
        entries = entries[1:]
    return [entry for entry in entries if entry]


def _path_list(name):
    return [entry for entry in os.environ.get(name, "").split(os.pathsep) if entry]


def _never_whole():
    """The directories no read rule may hold whole: the homes, and $TMPDIR's."""
    homes = {os.path.expanduser("~")}
    try:
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a user with no entry in the password database
        pass
    return [os.path.realpath(place) for place in (*homes, tempfile.gettempdir())]


def _configuration():
    """/etc but its credentials, and what its own symbolic links lead to (resolv.conf's
    /run/systemd/resolve, say)."""
    granted = _beneath_except(CONFIGURATION, CREDENTIALS)
    try:
        entries = list(os.scandir(CONFIGURATION))
    except OSError:  # no /etc: nothing more to grant
        return granted
    targets = [os.path.realpath(entry.path) for entry in entries if entry.is_symlink()]
    return granted + [target for target in targets
                      if not any(_within(target, place) for place in _never_whole())]


def _beneath_except(root, excluded):
    """Paths whose subtrees together hold everything beneath ``root`` but what the
    ``excluded`` patterns match."""
    if any(fnmatch.fnmatch(root, pattern) for pattern in excluded):
        return []
    if not any(pattern.startswith(root.rstrip("/") + "/") for pattern in excluded):
        return [root]
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:  # not a directory, or gone: nothing beneath to grant
        return [root]
    granted = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            granted += _beneath_except(entry.path, excluded)
        elif not any(fnmatch.fnmatch(entry.path, pattern) for pattern in excluded):
            granted.append(entry.path)
    return granted


def _within(path, place):
    """True if ``path`` is ``place`` or beneath it (both absolute)."""
    return os.path.commonpath([path, place]) == place


def _existing(paths):
    """``paths`` that exist, resolved, each once, in order."""
    found = {}
    for path in paths:
        real = os.path.realpath(path)
        if os.path.exists(real):
            found.setdefault(real, None)
    return list(found)


def environment(places, network_out):
    """The variables the server process sets so programs use the sandbox's places:
    ``{name: value}``, None to unset one."""
    packages_bin = os.path.join(places.packages, "bin")
    changes = {"TMPDIR": places.tmp, "XDG_CACHE_HOME": places.cache,
               "MPLCONFIGDIR": os.path.join(places.cache, "matplotlib"),
               "PIP_PREFIX": places.packages,
               "PYTHONPATH": _prepend(places.site, os.environ.get("PYTHONPATH")),
               "PATH": _prepend([packages_bin], os.environ.get("PATH")),
               TOKEN_ENV: None}
    if not network_out:  # pip would retry a refused connection five times before failing
        changes["PIP_RETRIES"] = "0"
    return changes


def _prepend(paths, existing):
    return os.pathsep.join([*paths, *([existing] if existing else [])])
