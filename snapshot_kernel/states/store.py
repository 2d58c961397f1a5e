"""Durable states: a state directory that a restarted server loads its tree from.

    DIR/catalog.sqlite   the catalogue (SQLite, WAL): states, layers, groups, blobs
    DIR/blobs/*.bin      large buffers, read-only files mapped copy-on-write (``cow``)
    DIR/reserve/*        files allocated ahead for new buffers (``blobfiles.Reserve``)
    DIR/log-*            a private directory's redo log (``redo``)

It mirrors what the kernel keeps in memory. A state names a layer; a layer is
its base layer plus the entries its cell changed (``storage.Namespace``), each
entry pointing at a group: the pickle of the objects of names that share them
(``persist``). A cell that changes one small name writes one small group and
one layer row, whatever the size of its state. Every save is one transaction
(``catalogue``), made before the reply that names the state is sent; in a
private directory (the crash-safe default), one record of the redo log instead,
whose rows the catalogue takes later, many saves at a time. Blob files are
complete under their final name before a row refers to them. A crash at any
moment leaves the catalogue as it was after its last commit, and the log as it
was after its last whole record; at start, the log is applied, and ``.tmp``
files, blobs nothing refers to and the files allocated ahead are swept.

Loading is lazy: ``load`` builds the tree from the catalogue, and a group's
objects are unpickled the first time a cell (or a describe) asks for them.
With a memory budget, the groups used least recently are dropped from memory
and loaded again on use (``budget``).
"""

import json
import hashlib
import os
import pickle
import sqlite3

from . import blobfiles, persist
from .budget import Budget, GroupRecord
from .catalogue import Catalogue, StoreError
from ..runtime.settings import Process
from .storage import DELETED, GONE, Entry, Group, Namespace, State

__all__ = ["Store", "StoreError"]
_KEPT_SETTINGS_KEYS = 64  # ids of settings lately saved -> their hash, to pickle each once


def _running_row(exec_id, summary):
    """Execution ``exec_id`` runs, as ``summary`` says; or, if that is None, it has ended."""
    if summary is None:
        return ("ended", (exec_id,))
    return ("running", (exec_id, json.dumps(summary)))


class _Made:
    """The entries, groups and records a load made: one object for each, however many
    layers hold it, as in the server that wrote them (a flattened layer repeats the
    entries of the layers it was flattened from, and names of one group share it)."""

    def __init__(self, store):
        self.store = store
        self.entries, self.groups, self.records = {}, {}, {}

    def entry(self, name, group_id, names, weight, fresh, shared, lost):
        names = tuple(names)
        key = (name, group_id, names, weight, fresh, shared, lost)
        entry = self.entries.get(key)
        if entry is None:
            group = self.group(names, weight, fresh)
            if group_id is None:  # lost on disk: gone after the restart
                entry = Entry(name, GONE, group, shared, lost)
            else:
                entry = Entry(name, None, group, shared, lost, self.record(group_id, weight))
            self.entries[key] = entry
        return entry

    def group(self, names, weight, fresh):
        group = self.groups.get((names, weight, fresh))
        if group is None:
            group = self.groups[names, weight, fresh] = Group(frozenset(names), weight, fresh)
        return group

    def record(self, group_id, weight):
        record = self.records.get(group_id)
        if record is None:
            record = self.records[group_id] = GroupRecord(self.store, group_id, weight)
        return record


class Store:
    """A state directory, open for one kernel."""

    def __init__(self, directory, buffers, max_memory=None, private=False):
        """``private``: the directory is this server's alone and lives no longer than its
        supervisor (the crash-safe default): commits then need only survive the process
        dying, not the machine, and no other process reads the catalogue while it runs.
        A saved state keeps its objects (what cells see is what they would see in memory),
        unless ``max_memory`` evicts them; they are read back only after a crash.
        Otherwise a saved state's objects are read back from the catalogue on first use,
        as after a restart."""
        self.directory = os.path.abspath(directory)
        self.private = private
        self.blob_dir = os.path.join(self.directory, "blobs")
        os.makedirs(self.blob_dir, exist_ok=True)
        self.reserve_dir = os.path.join(self.directory, "reserve")  # on the same file system
        os.makedirs(self.reserve_dir, exist_ok=True)
        self.buffers, self.budget = buffers, Budget(max_memory)
        self._seq = 0
        self._settings_keys = {}  # (id(held), id(shared), id(own)) -> (hash, those three)
        self._catalogue = Catalogue(self.directory, private)
        self._ids = {table: self._catalogue.db.execute(
            f"SELECT max(id) FROM {table}").fetchone()[0] or 0 for table in ("groups", "layers")}

    # -- writing ---------------------------------------------------------------------------

    def save(self, state, exec_id=None, summary=None):
        """Write ``state`` (a new one) before anyone is told of it; returns ``{name: why}``
        for the names whose objects could not be pickled (lost after a restart).

        Its new entries are replaced, in its layer, by entries whose objects a
        GroupRecord keeps (and may drop and reload). The same write notes
        execution ``exec_id`` as running with ``summary``, or as ended if that is
        None, so a restart never reports a stored state's execution as cut short."""
        layer = state.names
        new_layer = getattr(layer, "layer_id", None) is None
        groups = self._new_groups(layer) if new_layer else {}
        pickled, lost, kept = {}, {}, {}
        for group, names in groups.items():  # pickling runs user code: outside the lock
            values = {name: layer.own(name).value for name in names}
            pickled[group] = persist.dumps(values, self.buffers)
            lost.update(pickled[group][2])
            # The same objects until a crash, as in memory; and a group with a name that
            # cannot be saved keeps them till the restart, for that name keeps its own and
            # the rest must be what it shares (``alias = obj.items``, ``obj`` holding a lock).
            if self.private or pickled[group][2]:
                kept[group] = values
        with self._catalogue.writing() as rows:
            records = {id(group): self._group_rows(rows, data, blobs, group.weight,
                                                   kept.get(group), pinned=bool(unsaved))
                       for group, (data, blobs, unsaved) in pickled.items()}
            if new_layer:
                self._layer_rows(rows, layer, records, lost)
            self._seq += 1
            rows.append(("state", (state.name, self._seq, layer.layer_id, state.parent,
                                   state.code, state.created, state.new_bytes,
                                   state.total_bytes,
                                   json.dumps(state.meta) if state.meta else "{}")))
            if state.process is not None:
                self._settings_rows(rows, state.name, state.process)
            if exec_id is not None:
                rows.append(_running_row(exec_id, summary))
        for _, blobs, _ in pickled.values():  # the catalogue (or its redo log) names them now
            for blob in blobs.values():
                blob.keep()
        return lost

    def _settings_rows(self, rows, name, process):
        """Note the settings ``process`` as state ``name``'s, each distinct set once."""
        parts = (process.held, process.shared, process.own)
        ids = tuple(map(id, parts))
        key = self._settings_keys.get(ids)
        if key is None or any(kept is not part for kept, part in zip(key[1:], parts)):
            data = pickle.dumps(process.saved(), protocol=5)
            key = (hashlib.sha1(data).hexdigest(), *parts)
            rows.append(("settings", (key[0], data)))
            if len(self._settings_keys) >= _KEPT_SETTINGS_KEYS:
                self._settings_keys.clear()
            self._settings_keys[ids] = key
        rows.append(("state_settings", (name, key[0])))

    def _new_groups(self, layer):
        """The groups of the layer's own entries that have no record yet."""
        groups = {}
        for name, entry in layer.own_entries().items():
            if entry is not DELETED and entry.record is None and entry.lost is None:
                groups.setdefault(id(entry.group), (entry.group, []))[1].append(name)
        return dict(groups.values())

    def _group_rows(self, rows, data, blobs, weight, values=None, pinned=False):
        group_id = self._ids["groups"] = self._ids["groups"] + 1
        rows.append(("group", (group_id, data)))
        for path in blobs:
            name = os.path.basename(path)
            rows.append(("blob", (name, os.path.getsize(path))))
            rows.append(("group_blob", (group_id, name)))
        return GroupRecord(self, group_id, weight, values, pinned)

    def _layer_rows(self, rows, layer, records, lost):
        base = layer.base.layer_id if layer.base is not None else None
        changes, group_ids = {}, set()
        for name, entry in layer.own_entries().items():
            if entry is DELETED:
                changes[name] = None
                continue
            if entry.record is None and entry.lost is None:
                record = records[id(entry.group)]
                entry = entry.saved(record, lost.get(name))
                layer.replace_own(name, entry)
            group_id = entry.record.group_id if entry.record is not None else None
            group_ids.add(group_id)
            changes[name] = (group_id, sorted(entry.group.names), entry.group.weight,
                             entry.group.fresh, entry.shared, entry.lost)
        layer.layer_id = self._ids["layers"] = self._ids["layers"] + 1
        rows.append(("layer", (layer.layer_id, base, pickle.dumps(changes, protocol=5))))
        rows.extend(("layer_group", (layer.layer_id, group_id))
                    for group_id in group_ids if group_id)

    def delete(self, name, layer, absorbed):
        """Forget state ``name``. ``absorbed`` are the layers that took ``layer``'s
        entries in (``Namespace.absorb_base``); ``layer`` goes if nothing uses it."""
        try:
            self._delete(name, layer, absorbed)
        finally:
            self.shrink()

    def shrink(self):
        self._catalogue.shrink()

    def _delete(self, name, layer, absorbed):
        with self._catalogue.transaction() as db:
            self._settings_keys.clear()  # settings no state uses are deleted: write them again
            db.execute("DELETE FROM states WHERE name = ?", (name,))
            db.execute("DELETE FROM state_settings WHERE state = ?", (name,))
            db.execute("DELETE FROM settings WHERE hash NOT IN "
                       "(SELECT hash FROM state_settings)")
            layer_id = getattr(layer, "layer_id", None)
            if layer_id is None or db.execute("SELECT 1 FROM states WHERE layer = ?",
                                              (layer_id,)).fetchone():
                return
            for child in absorbed:
                self._rewrite_layer(db, child)
            if not db.execute("SELECT 1 FROM layers WHERE base = ?", (layer_id,)).fetchone():
                self._drop_layer(db, layer_id)

    def _rewrite_layer(self, db, layer):
        changes = {}
        for name, entry in layer.own_entries().items():
            changes[name] = None if entry is DELETED else (
                entry.record.group_id if entry.record is not None else None,
                sorted(entry.group.names), entry.group.weight, entry.group.fresh,
                entry.shared, entry.lost)
        base = layer.base.layer_id if layer.base is not None else None
        db.execute("UPDATE layers SET base = ?, changes = ? WHERE id = ?",
                   (base, pickle.dumps(changes, protocol=5), layer.layer_id))
        db.execute("DELETE FROM layer_groups WHERE layer = ?", (layer.layer_id,))
        db.executemany("INSERT INTO layer_groups VALUES (?, ?)",
                       [(layer.layer_id, value[0]) for value in changes.values()
                        if value is not None and value[0] is not None])

    def _drop_layer(self, db, layer_id):
        groups = [row[0] for row in db.execute(
            "SELECT grp FROM layer_groups WHERE layer = ?", (layer_id,))]
        db.execute("DELETE FROM layer_groups WHERE layer = ?", (layer_id,))
        db.execute("DELETE FROM layers WHERE id = ?", (layer_id,))
        for group_id in groups:
            if not db.execute("SELECT 1 FROM layer_groups WHERE grp = ?", (group_id,)).fetchone():
                self._drop_group(db, group_id)

    def _drop_group(self, db, group_id):
        blobs = [row[0] for row in db.execute(
            "SELECT blob FROM group_blobs WHERE grp = ?", (group_id,))]
        db.execute("DELETE FROM group_blobs WHERE grp = ?", (group_id,))
        db.execute("DELETE FROM groups WHERE id = ?", (group_id,))
        for name in blobs:
            if not db.execute("SELECT 1 FROM group_blobs WHERE blob = ?", (name,)).fetchone():
                db.execute("DELETE FROM blobs WHERE name = ?", (name,))
                self._unlink(name)

    def _unlink(self, name):
        try:
            os.unlink(os.path.join(self.blob_dir, name))
        except FileNotFoundError:  # swept already
            pass

    def reset(self, initial):
        """Forget every state; ``initial`` (a fresh one) is the only state left."""
        with self._catalogue.transaction() as db:
            self._settings_keys.clear()
            for table in ("states", "layers", "groups", "layer_groups", "group_blobs", "blobs",
                          "running", "settings", "state_settings"):
                db.execute(f"DELETE FROM {table}")
        self.sweep()
        self.save(initial)
        self.shrink()

    # -- running executions ------------------------------------------------------------------

    def running(self, exec_id, summary):
        """Note (or update) an execution that runs now, with its checkpoints so far.

        Notes are best effort: one that cannot be written (the disk is full) is left
        out, and False returned. The execution runs and replies as usual; a restart
        would not report it, or would report it cut short although it ended."""
        return self._note(_running_row(exec_id, summary))

    def ended(self, exec_id):
        return self._note(_running_row(exec_id, None))

    def _note(self, row):
        try:
            with self._catalogue.writing() as rows:
                rows.append(row)
        except (OSError, sqlite3.Error):
            return False
        return True

    # -- loading ------------------------------------------------------------------------------

    def load(self):
        """``(states in creation order, summaries of executions a restart ended)``, or
        None if the directory holds no states yet. Objects load on first use."""
        db = self._catalogue.db
        rows = db.execute("SELECT name, seq, layer, parent, code, created, new_bytes, "
                          "total_bytes, meta FROM states ORDER BY seq").fetchall()
        if not rows:
            return None
        self._check_blobs()
        self.sweep()
        layers, made = {}, _Made(self)
        for layer_id, base, data in db.execute("SELECT id, base, changes FROM layers ORDER BY id"):
            layers[layer_id] = self._layer(layer_id, layers.get(base), data, made)
        states, processes = {}, self._processes()
        for name, seq, layer_id, parent, code, created, new, total, meta in rows:
            states[name] = State(name, layers[layer_id], parent, code, new, total,
                                 json.loads(meta), created, processes.get(name))
            self._seq = seq
        ended = [json.loads(row[0]) for row in db.execute("SELECT summary FROM running")]
        with self._catalogue.transaction() as writing:
            writing.execute("DELETE FROM running")
        return states, ended

    def _layer(self, layer_id, base, data, made):
        changes = {}
        for name, value in pickle.loads(data).items():
            if value is None:
                changes[name] = DELETED
            else:
                entry = made.entry(name, *value)
                changes[entry.name] = entry  # its name: one string for every layer
        layer = Namespace(base, changes)
        layer.layer_id = layer_id
        return layer

    def _processes(self):
        """``{state name: Process}``; states whose settings are equal share one object."""
        made, db = {}, self._catalogue.db
        for hash_, data in db.execute("SELECT hash, data FROM settings"):
            made[hash_] = Process.loaded(pickle.loads(data))
        return {name: made[hash_] for name, hash_ in
                db.execute("SELECT state, hash FROM state_settings") if hash_ in made}

    def load_group(self, group_id):
        with self._catalogue.reading() as db:
            row = db.execute("SELECT data FROM groups WHERE id = ?", (group_id,)).fetchone()
        if row is None:
            raise StoreError(f"group {group_id} is missing from {self.directory}")
        return persist.loads(row[0], self.blob_dir)

    def _check_blobs(self):
        """Every blob the catalogue names is there, whole: else the state dir is damaged."""
        for name, size in self._catalogue.db.execute("SELECT name, size FROM blobs"):
            path = os.path.join(self.blob_dir, name)
            if not os.path.exists(path) or os.path.getsize(path) != size:
                raise StoreError(f"{path} is missing or truncated; restore the state "
                                 "directory from a backup, or start with another --state-dir")

    def sweep(self):
        """Delete files of the blob directory that no state refers to (left by a crash),
        and the files allocated ahead (``reserve_dir``)."""
        with self._catalogue.transaction() as db:
            known = {row[0] for row in db.execute("SELECT name FROM blobs")}
        for name in os.listdir(self.blob_dir):
            if name not in known:
                self._unlink(name)
        for name in os.listdir(self.reserve_dir):
            blobfiles.unlink(os.path.join(self.reserve_dir, name))

    def close(self):
        self._catalogue.close()
