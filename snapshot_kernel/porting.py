"""The kernel's side of portable states: a state out as an archive, an archive in as a state.

An imported state is a root, as ``initial`` is: its parent is on another server,
and its lineage is flattened into its one layer, so no state here made it
(``GET /states/<name>`` says ``parent: null``; the reply says where it came from).
"""

from .errors import ResetMeanwhile, StateExists, check_name
from .states import portable, receiving


class Porting:
    """Mixed into SnapshotKernel: ``export_state`` and ``import_state``."""

    def export_state(self, name):
        """``(archive.Writer, lost)`` for state ``name`` (``states.portable.export``)."""
        state = self._get(name)
        return portable.export(state, self._process(state))

    def import_state(self, name, stream):
        """Make state ``name`` of the archive that ``stream.read(n)`` gives, saved first
        with a state directory; return the reply of PUT /states/<name>.

        The name is held from the start, so no execution or other import takes it;
        a refused archive (BadArchive, IncompatibleArchive) stores nothing."""
        check_name(name)
        held = object()
        with self._lock:
            if name in self._states or name in self._reserved:
                raise StateExists(f"state {name!r} already exists; states are immutable, so "
                                  "import it under another name")
            self._reserved[name] = held
            generation = self._generation
        try:
            received = receiving.receive(stream, self.buffers)
            state, lost = self._published(name, received, generation)
        except OSError:  # a reset sweeps the state directory: the blobs written may be gone
            if self._reset_since(generation):
                raise _reset() from None
            raise
        finally:
            with self._lock:
                if self._reserved.get(name) is held:
                    del self._reserved[name]
        meta = received.meta
        return {"imported": name, "lost": lost,
                "original": {key: meta.get(key) for key in ORIGINAL}}

    def _published(self, name, received, generation):
        """``(state, lost)`` once the received state is saved and listed."""
        saved = published = False
        try:
            state, lost = received.state(name)
            if self._store is not None:
                lost.update(self._store.save(state))
                saved = True
            with self._lock:
                if self._generation == generation:
                    self._states[name] = state
                    published = True
        finally:
            if not published:
                if saved:
                    self._store.delete(name, state.names, [])
                received.discard()
        if not published:
            raise _reset()
        return state, lost

    def _reset_since(self, generation):
        with self._lock:
            return self._generation != generation


def _reset():
    return ResetMeanwhile("the server was reset while the archive was imported; nothing was "
                          "stored, so send it again")


ORIGINAL = ("name", "parent", "timestamp", "python_version", "snapshot_kernel", "libraries")
