"""The state directory's catalogue: its SQLite connection, the one place that commits
(``transaction``), and, in a private directory, the redo log that saves go to first and
that an applier thread puts into the catalogue in batches (``writing``)."""

import collections
import contextlib
import os
import sqlite3
import sys
import threading
import time

from . import persist, redo

# The redo log goes to the catalogue (on the applier thread) once no save came for IDLE
# seconds, or once it holds this much: work deferred from busy times to quiet ones.
_IDLE = 0.5
_LOG_RECORDS = 8192
_LOG_BYTES = 32 << 20
_LOG_FILES_TAKEN = 8  # past this many, a save applies them itself
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS layers (id INTEGER PRIMARY KEY, base INTEGER, changes BLOB);
CREATE TABLE IF NOT EXISTS groups (id INTEGER PRIMARY KEY, data BLOB);
CREATE TABLE IF NOT EXISTS layer_groups (layer INTEGER, grp INTEGER);
CREATE INDEX IF NOT EXISTS layer_groups_grp ON layer_groups (grp);
CREATE TABLE IF NOT EXISTS group_blobs (grp INTEGER, blob TEXT);
CREATE INDEX IF NOT EXISTS group_blobs_blob ON group_blobs (blob);
CREATE TABLE IF NOT EXISTS blobs (name TEXT PRIMARY KEY, size INTEGER);
CREATE TABLE IF NOT EXISTS states (name TEXT PRIMARY KEY, seq INTEGER, layer INTEGER,
    parent TEXT, code TEXT, created REAL, new_bytes INTEGER, total_bytes INTEGER, meta TEXT);
CREATE TABLE IF NOT EXISTS running (exec_id TEXT PRIMARY KEY, summary TEXT);
CREATE TABLE IF NOT EXISTS settings (hash TEXT PRIMARY KEY, data BLOB);
CREATE TABLE IF NOT EXISTS state_settings (state TEXT PRIMARY KEY, hash TEXT);
"""


# What a save writes, as rows: (statement, parameters). The names are what the redo log
# holds, so they stay as they are; ``_execute`` runs them in this order.
_STATEMENTS = {
    "group": "INSERT INTO groups (id, data) VALUES (?, ?)",
    "blob": "INSERT OR IGNORE INTO blobs VALUES (?, ?)",
    "group_blob": "INSERT INTO group_blobs VALUES (?, ?)",
    "layer": "INSERT INTO layers (id, base, changes) VALUES (?, ?, ?)",
    "layer_group": "INSERT INTO layer_groups VALUES (?, ?)",
    "state": "INSERT OR REPLACE INTO states VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "settings": "INSERT OR IGNORE INTO settings VALUES (?, ?)",
    "state_settings": "INSERT OR REPLACE INTO state_settings VALUES (?, ?)",
    "running": "INSERT OR REPLACE INTO running VALUES (?, ?)",
    "ended": "DELETE FROM running WHERE exec_id = ?",
}


def meta(db, key, default=None):
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return default if row is None else row[0]


def _execute(db, rows):
    """Run ``rows`` (of saves in order): each statement's rows at once, in the order of
    ``_STATEMENTS``, which no save's rows contradict (a row never refers to a later one,
    and an execution ends after it last runs)."""
    by_statement = {statement: [] for statement in _STATEMENTS}
    for statement, parameters in rows:
        by_statement[statement].append(parameters)
    for statement, parameters in by_statement.items():
        if parameters:
            db.executemany(_STATEMENTS[statement], parameters)


class StoreError(Exception):
    """The state directory cannot be used; the message says why and what to do."""


class Catalogue:
    """``catalog.sqlite`` of a state directory, open for one store. ``private``: see
    ``Store``; saves then go to the redo log, and reach the catalogue later."""

    def __init__(self, directory, private):
        self.directory, self.private = directory, private
        self.lock = threading.RLock()  # the connection
        self.db = self._connect()
        self._log = None  # private: saves go to the redo log, which _log_lock guards
        if private:
            self._log_lock = threading.Lock()
            self._log = redo.RedoLog(self.directory, int(meta(self.db, "log", 0)))
            # Numbers of log files taken from the log and not yet applied, oldest first:
            # saves put them here, and whoever holds lock applies them.
            self._taken = collections.deque(self._log.numbers())  # what a crash left
            self._apply_taken()
            self._log_full = threading.Event()
            self._last_save = time.monotonic()
            self._closing = False
            self._applier = threading.Thread(target=self._apply_when_full, daemon=True,
                                             name="snapshot-kernel redo log")
            self._applier.start()

    @contextlib.contextmanager
    def reading(self):
        """The connection, with everything the redo log holds in the catalogue."""
        with self.lock:
            if self._log is not None:
                self._apply_log()
            yield self.db

    def shrink(self):
        """Give SQLite's page cache back to the allocator (``heap.give_back`` then returns
        it to the system): after deletes, it holds pages of rows that are gone."""
        with self.lock:
            self.db.execute("PRAGMA shrink_memory")

    # -- opening ---------------------------------------------------------------------------

    def _connect(self):
        path = os.path.join(self.directory, "catalog.sqlite")
        try:
            # Private: the redo log's rows reach the catalogue in batches, so a statement
            # kept prepared saves little and would hold its last parameters (5 MB of a
            # cell's source) until it ran again.
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                 cached_statements=0 if self.private else 128)
            if self.private:
                # No file locks taken and dropped per transaction (the lock is released when
                # the process dies), and no fsync at checkpoints: a commit is in the page
                # cache, which outlives the process. Pages of 1 KiB (the directory is
                # always new): a small save's rows touch ~8 pages, 8 KiB where 4 KiB
                # pages would be 32.
                db.execute("PRAGMA page_size=1024")
                db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a commit survives the process dying, and the machine's too once a
            # checkpoint has synced it; OFF: the process dying only.
            db.execute(f"PRAGMA synchronous={'OFF' if self.private else 'NORMAL'}")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreError(f"{path} is damaged ({check}); restore it from a backup "
                                 "or start with another --state-dir")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} cannot be read as a state catalogue ({exc}); restore it "
                             "from a backup or start with another --state-dir") from None
        written = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if written.get("format", persist.FORMAT) != persist.FORMAT:
            raise StoreError(f"{self.directory} was written as {written['format']!r}; this "
                             f"server writes {persist.FORMAT!r}. Start the server with the "
                             "Python that wrote it, or use another --state-dir")
        db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (persist.FORMAT,))
        return db

    @contextlib.contextmanager
    def writing(self):
        """Yield a list for the rows of one save; then commit them or, in a private
        directory, copy them into the redo log as one record. Ids are taken inside."""
        if self._log is None:
            with self.transaction() as db:
                rows = []
                yield rows
                _execute(db, rows)
            return
        with self._log_lock:
            rows = []
            yield rows
            self._log.append(rows)
            self._last_save = time.monotonic()
            full = self._log.records >= _LOG_RECORDS or self._log.size >= _LOG_BYTES
            if full:
                self._taken.extend(self._log.take())
        if full and len(self._taken) > _LOG_FILES_TAKEN:  # the applier has not had a turn
            with self.lock:
                self._apply_taken()
        elif full:
            self._log_full.set()

    @contextlib.contextmanager
    def transaction(self):
        """The one place that commits: everything inside is written, or nothing. What
        the redo log holds is applied first, so the catalogue is whole when read."""
        with self.lock:
            if self._log is not None:
                self._apply_log()
            with self._commit() as db:
                yield db

    @contextlib.contextmanager
    def _commit(self):
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            committed = False
            try:
                yield self.db
                self.db.execute("COMMIT")
                committed = True
            finally:
                # Whatever stopped it, an interrupt too; but SQLite may have rolled back
                # itself (the disk is full), and a second ROLLBACK would hide why.
                if not committed and self.db.in_transaction:
                    self.db.execute("ROLLBACK")

    # -- the redo log (private directories) ------------------------------------------------

    def _apply_when_full(self):
        """The applier thread: apply the files a save took from the full log (saves go
        on meanwhile: they take neither lock nor, then, _log_lock, and SQLite lets go
        of the GIL), or the whole log once no save came for _IDLE seconds."""
        while True:
            full = self._log_full.wait(_IDLE)
            self._log_full.clear()
            if self._closing:
                return
            try:
                if full:
                    with self.lock:
                        self._apply_taken()
                elif self._log.records and time.monotonic() - self._last_save >= _IDLE:
                    self._apply_log()
            except (OSError, sqlite3.Error) as exc:  # kept: the next apply tries again
                print(f"snapshot-kernel: the state directory's redo log could not be "
                      f"applied yet ({exc})", file=sys.stderr, flush=True)

    def _apply_log(self):
        """Put everything the redo log holds in the catalogue, and delete it."""
        with self.lock:
            with self._log_lock:
                self._taken.extend(self._log.take())
            self._apply_taken()

    def _apply_taken(self):
        """Apply the taken log files, oldest first, each in one transaction that notes
        it as applied, and delete them: a crash between the two applies it once."""
        while self._taken:
            number = self._taken[0]
            path = self._log.path(number)
            with self._commit() as db:
                if int(meta(db, "log", 0)) < number:
                    _execute(db, [row for rows in redo.read(path) for row in rows])
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('log', ?)", (str(number),))
            os.unlink(path)
            self._taken.popleft()

    def close(self):
        if self._log is not None:
            self._closing = True
            self._log_full.set()
            self._applier.join()
        with self.lock:
            if self._log is not None:
                self._apply_log()
                self._log.close()
            self.db.close()
