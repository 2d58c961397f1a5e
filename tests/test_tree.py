"""Keeping the tree of states tidy: cells that store nothing, the tree listed and drawn,
a state deleted with everything made from it, and query parameters no route takes."""

import pytest
import webtest

from conftest import TOKEN
from helpers import ok
from snapshot_kernel.errors import InvalidArgument, ProtectedState, UnknownState
from snapshot_kernel.kernel import SnapshotKernel
from snapshot_kernel.main import create_app


@pytest.fixture
def app(kernel):
    app = webtest.TestApp(create_app(kernel, TOKEN))
    app.authorization = ("Bearer", TOKEN)
    return app


def execute(app, code, state_name="initial", **fields):
    return app.post_json("/execute", dict(code=code, state_name=state_name, **fields)).json


def grow(app):
    """initial - base - {left - leftmost, right}, and other from initial; a checkpoint."""
    execute(app, "import math\nx = 1", new_state_name="base")
    execute(app, "\n# the left branch\nx = 2\ny = 'l' * 1000", "base", new_state_name="left")
    execute(app, "z = 3", "left", new_state_name="leftmost")
    execute(app, "x = 4\ncheckpoint(name='right@1')", "base", new_state_name="right")
    execute(app, "w = 5", new_state_name="other")


# -- cells that store nothing ----------------------------------------------------------

def test_a_cell_run_without_storing_answers_as_usual_and_stores_nothing(app):
    reply = execute(app, "x = 1\nprint('seen')\nx + 1", store=False, exec_id="probe")
    assert reply["error"] is None and reply["state_name"] is None
    assert [item.get("text") or item["data"]["text/plain"] for item in reply["output"]] == \
        ["seen\n", "2"]
    assert app.get("/states").json == {"states": ["initial"]}
    record = app.get("/executions/probe").json
    assert record["status"] == "completed" and record["reply"] == reply


def test_a_cell_run_without_storing_still_keeps_its_checkpoints(app):
    reply = execute(app, "x = 1\ncheckpoint(name='kept')\nx = 2", store=False)
    assert reply["state_name"] is None and reply["checkpoints"][0]["state_name"] == "kept"
    assert app.get("/states").json == {"states": ["initial", "kept"]}


def test_its_text_reply_says_no_state_was_stored(app):
    text = app.post_json("/execute", {"code": "6 * 7", "state_name": "initial", "store": False,
                                      "format": "text"}).text
    assert text == "42\n[no state stored, as asked ('initial' is unchanged)]"


def test_store_false_with_a_new_state_name_is_refused(app):
    response = app.post_json("/execute", {"code": "x = 1", "state_name": "initial",
                                          "store": False, "new_state_name": "n"},
                             expect_errors=True)
    assert response.status_int == 400 and "store is false" in response.json["error"]
    assert app.get("/states").json == {"states": ["initial"]}


def test_the_kernel_takes_store_too(kernel):
    with pytest.raises(InvalidArgument):
        kernel.execute("x = 1", "initial", new_state_name="n", store=False)
    assert kernel.execute("x = 1", "initial", store=False)["state_name"] is None
    assert kernel.state_names() == ["initial"]


# -- the tree ------------------------------------------------------------------------------

def test_the_tree_lists_each_state_under_its_parent_with_its_facts(app):
    grow(app)
    entries = app.get("/states?tree=true").json["states"]
    # The checkpoint is a child of the cell's source state, stored before the cell's own.
    assert [(e["name"], e["parent"], e["depth"], e["children"]) for e in entries] == [
        ("initial", None, 0, 2), ("base", "initial", 1, 3), ("left", "base", 2, 1),
        ("leftmost", "left", 3, 0), ("right@1", "base", 2, 0), ("right", "base", 2, 0),
        ("other", "initial", 1, 0)]
    left = next(e for e in entries if e["name"] == "left")
    assert left["first_line"] == "# the left branch" and left["approx_bytes"] >= 1000
    assert left["timestamp"] == app.get("/states/left").json["timestamp"]
    checkpoint = next(e for e in entries if e["name"] == "right@1")
    assert checkpoint["checkpoint"] is True and checkpoint["parent"] == "base"
    assert app.get("/states").json["states"] == [
        "initial", "base", "left", "leftmost", "right@1", "right", "other"]


def test_the_tree_drawn_as_text_for_a_person_or_a_model(app):
    grow(app)
    drawn = app.get("/states?format=text")
    assert drawn.content_type == "text/plain"
    lines = drawn.text.splitlines()
    shapes = [line.split("  [")[0] for line in lines]
    assert shapes == ["initial", "├── base", "│   ├── left", "│   │   └── leftmost",
                      "│   ├── right@1", "│   └── right", "└── other"]
    assert "checkpoint" in lines[4] and "3 children" in lines[1]
    assert lines[2].endswith("]  # the left branch")
    assert app.get("/states", headers={"Accept": "text/plain"}).text == drawn.text


def test_a_state_whose_parent_was_deleted_is_a_root_even_if_the_name_comes_back(app):
    grow(app)
    app.delete("/states/left")
    execute(app, "v = 0", new_state_name="left")  # a new state takes the deleted one's name
    entries = {e["name"]: e for e in app.get("/states?tree=true").json["states"]}
    assert entries["leftmost"]["depth"] == 0 and entries["leftmost"]["parent"] == "left"
    assert entries["left"]["children"] == 0
    assert "parent 'left' deleted" in app.get("/states?format=text").text


# -- deleting a branch ---------------------------------------------------------------------

def test_a_state_is_deleted_with_its_descendants_in_one_request(app):
    grow(app)
    reply = app.delete("/states/base?descendants=true").json
    assert reply == {"deleted": "base", "descendants": ["left", "leftmost", "right@1", "right"]}
    assert app.get("/states").json == {"states": ["initial", "other"]}
    assert execute(app, "w + 1", "other")["error"] is None


def test_without_descendants_a_delete_leaves_the_children_as_it_did(app):
    grow(app)
    assert app.delete("/states/left").json == {"deleted": "left"}
    assert app.get("/states").json["states"] == ["initial", "base", "leftmost", "right@1",
                                                 "right", "other"]
    assert execute(app, "print(x, y, z)", "leftmost")["output"][0]["text"] == \
        "2 " + "l" * 1000 + " 3\n"


@pytest.mark.parametrize("path, status", [("/states/initial?descendants=true", 409),
                                          ("/states/nope?descendants=true", 404),
                                          ("/states/base?descendants=maybe", 400)])
def test_a_refused_delete_with_descendants_deletes_nothing(app, path, status):
    grow(app)
    before = app.get("/states").json
    response = app.delete(path, expect_errors=True)
    assert response.status_int == status and response.json["error"]
    assert app.get("/states").json == before


def test_descendants_deleted_from_a_state_directory_stay_deleted(tmp_path):
    first = SnapshotKernel(state_dir=str(tmp_path))
    ok(first, "a = 1", new_state_name="a")
    ok(first, "b = [2] * 1000", "a", new_state_name="b")
    ok(first, "c = 3", "b", new_state_name="c")
    ok(first, "d = 4", new_state_name="d")
    assert first.delete("a", descendants=True) == ["b", "c"]
    first.close()
    second = SnapshotKernel(state_dir=str(tmp_path))
    assert second.state_names() == ["initial", "d"]
    assert ok(second, "d + 1", "d")["output"][0]["data"]["text/plain"] == "5"
    with pytest.raises(UnknownState):
        second.describe("c")
    with pytest.raises(ProtectedState):
        second.delete("initial", descendants=True)
    second.close()


# -- query parameters ----------------------------------------------------------------------

@pytest.mark.parametrize("method, path, takes", [
    ("GET", "/states?tre=1", "GET /states takes ?token=, ?tree=, ?format="),
    ("GET", "/states/initial?verbose=1", "GET /states/{name} takes ?token="),
    ("DELETE", "/states/base?recursive=true", "takes ?token=, ?descendants="),
    ("GET", "/executions?all=1", "GET /executions takes ?token="),
    ("GET", "/executions/x/output?stream=stdout&ofset=3", "?stream=, ?offset=, ?limit="),
    ("POST", "/reset?hard=1", "POST /reset takes ?token="),
    ("GET", "/files/?recursive=1", "GET /files/ takes ?token="),
])
def test_an_unknown_query_parameter_is_400_naming_the_known_ones(app, method, path, takes):
    grow(app)
    before = app.get("/states").json
    response = app.request(path, method=method, expect_errors=True)
    assert response.status_int == 400, response.body
    assert "unknown query parameter(s)" in response.json["error"]
    assert takes in response.json["error"]
    assert app.get("/states").json == before


def test_the_token_is_a_query_parameter_every_route_takes(app):
    app.authorization = None
    assert app.get(f"/states?token={TOKEN}&tree=1").json["states"][0]["name"] == "initial"


# -- the garbage of deleted states ------------------------------------------------------------

CYCLES = ("class Node:\n    pass\n"
          "nodes = [Node() for _ in range(5000)]\n"
          "for node in nodes:\n    node.me = node\n")  # each freed only by the cyclic collector


@pytest.fixture
def collections():
    """The full collections made from now on: ``(thread name, objects collected)``."""
    import gc
    import threading
    made = []

    def noted(phase, info):
        if phase == "stop" and info["generation"] == 2:
            made.append((threading.current_thread().name, info["collected"]))

    gc.collect()  # what came before is not counted
    gc.callbacks.append(noted)
    yield made
    gc.callbacks.remove(noted)


def _wait_for(predicate, seconds=10.0):
    import time
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_the_sweeper_waits_for_a_cell_thread_that_still_holds_the_deleted_state(
        collections):
    # The reply goes before the cell's thread lets go of what it held: a sweep between
    # the two found nothing to collect, and the state's cycles waited for a later cell
    # (seen in a full run of the suite, under load).
    import time
    kernel = SnapshotKernel()
    finish = kernel._finish

    def slow_to_unwind(run, outcome):
        finish(run, outcome)
        time.sleep(0.5)  # the reply is out; this frame still holds the outcome

    kernel._finish = slow_to_unwind
    try:
        ok(kernel, CYCLES, new_state_name="cyclic")
        kernel.delete("cyclic")
        assert _wait_for(lambda: any(name == "snapshot-kernel-sweeper" and collected >= 5000
                                     for name, collected in collections)), collections
        time.sleep(0.8)  # the thread has let go by now
        import gc
        assert gc.collect() < 5000  # and the sweeper had waited for it
    finally:
        kernel.shutdown()


def test_a_thread_that_never_lets_go_holds_the_sweep_back_only_so_long(collections,
                                                                        monkeypatch):
    # A cell that ignored its interrupt runs on in its thread: the sweeps still come.
    import time
    from snapshot_kernel import heap
    monkeypatch.setattr(heap.Sweeper, "SETTLE", 0.3)
    sweeper = heap.Sweeper(idle=lambda: True, settled=lambda: False)
    try:
        start = time.monotonic()
        sweeper.soon()
        assert _wait_for(lambda: any(name == "snapshot-kernel-sweeper"
                                     for name, _ in collections)), collections
        assert time.monotonic() - start >= 0.3
    finally:
        sweeper.close()


@pytest.mark.parametrize("gc_freeze", [False, True])
@pytest.mark.parametrize("how", ["delete", "reset"])
def test_a_deleted_state_s_cycles_are_collected_by_the_sweeper_not_by_a_later_cell(
        collections, how, gc_freeze):
    import gc
    kernel = SnapshotKernel(gc_freeze=gc_freeze)
    try:
        ok(kernel, CYCLES, new_state_name="cyclic")
        if gc_freeze:  # the state's objects were frozen out of the collector's reach
            assert _wait_for(lambda: kernel._sweeper.rounds == 1)
            collections.clear()  # (the settling collected the cell's own cycles)
        kernel.delete("cyclic") if how == "delete" else kernel.reset()
        assert _wait_for(lambda: any(name == "snapshot-kernel-sweeper" and collected >= 5000
                                     for name, collected in collections)), collections
        gc.unfreeze()  # (frozen garbage would be out of this collection's reach too)
        assert gc.collect() < 5000  # nothing of the state was left for a cell to collect
    finally:
        kernel.shutdown()


def test_with_gc_freeze_cells_sent_one_after_another_are_not_kept_waiting_by_a_settling(
        monkeypatch):
    # A settling is a collection: a cell that comes while it runs waits for it. One begun
    # in the milliseconds between a reply and a client's next cell landed in that cell
    # (0.1-0.2 s, in cells of 12 ms sent back to back), so it waits for a pause of QUIET.
    import time
    from snapshot_kernel import heap
    monkeypatch.setattr(heap.Sweeper, "QUIET", 0.6)
    kernel = SnapshotKernel(gc_freeze=True)
    try:
        state = ok(kernel, "rows = [[i] for i in range(1000)]")["state_name"]
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            time.sleep(0.1)
            ok(kernel, "n = len(rows)", state)
        assert kernel._sweeper.rounds == 0
        assert _wait_for(lambda: kernel._sweeper.rounds == 1)  # once the pause came
    finally:
        kernel.shutdown()


# What a collection inside a cell goes through: with gc_freeze, what that cell made.
OBJECTS_SEEN = "import gc\nlen(gc.get_objects())"


@pytest.mark.parametrize("gc_freeze", [False, True])
def test_with_gc_freeze_a_cell_s_collections_do_not_go_through_the_stored_states(gc_freeze):
    import gc
    kernel = SnapshotKernel(gc_freeze=gc_freeze)
    try:
        state = ok(kernel, "rows = [[i] for i in range(200_000)]")["state_name"]
        if gc_freeze:
            assert _wait_for(lambda: kernel._sweeper.rounds == 1)  # settled once idle
        seen = int(ok(kernel, OBJECTS_SEEN, state)["output"][-1]["data"]["text/plain"])
        assert (seen < 50_000) if gc_freeze else (seen > 200_000)
    finally:
        kernel.shutdown()


def test_with_gc_freeze_the_cycles_a_cell_left_are_collected_not_frozen(monkeypatch):
    import builtins
    kernel = SnapshotKernel(gc_freeze=True)
    monkeypatch.setattr(builtins, "_freeze_test_refs", [], raising=False)
    code = ("import builtins, weakref\n"
            "rows = [[i] for i in range(200_000)]\n"  # enough to be settled
            "class Cyclic:\n    pass\n"
            "garbage = Cyclic()\ngarbage.me = garbage\n"
            "builtins._freeze_test_refs.append(weakref.ref(garbage))\n"
            "del garbage")
    try:
        ok(kernel, "1")
        assert _wait_for(lambda: kernel._sweeper.rounds == 1)  # the first: a full sweep
        ok(kernel, code)
        assert _wait_for(lambda: kernel._sweeper.rounds == 2)  # a settling
        assert builtins._freeze_test_refs[0]() is None
    finally:
        kernel.shutdown()


class _Collector:
    """The ``gc`` functions a freezing sweeper calls, over counted objects: the process's
    own collector is shared by every sweeper a test run leaves behind."""

    def __init__(self):
        self.live, self.dead, self.frozen_live, self.frozen_dead = 0, 0, 0, 0

    def collect(self):
        found, self.dead = self.dead, 0
        return found

    def freeze(self):
        self.frozen_live += self.live
        self.frozen_dead += self.dead
        self.live = self.dead = 0

    def unfreeze(self):
        self.live += self.frozen_live
        self.dead += self.frozen_dead
        self.frozen_live = self.frozen_dead = 0

    def get_freeze_count(self):
        return self.frozen_live + self.frozen_dead


def test_with_gc_freeze_frozen_objects_that_die_are_swept_once_the_frozen_doubled(monkeypatch):
    # A delete asks for a full sweep; what else froze alive and died since (a library's
    # cache) is swept once the frozen objects doubled, so it cannot pile up for good.
    from snapshot_kernel import heap
    collector = _Collector()
    monkeypatch.setattr(heap, "gc", collector)
    # Every end settles, though the process may hold fewer memory blocks than at the last
    # (with 0, a CI run's process did, and the round settled nothing).
    monkeypatch.setattr(heap.Sweeper, "SETTLE_BLOCKS", -(1 << 62))
    monkeypatch.setattr(heap.Sweeper, "FLOOR", 100)
    sweeper = heap.Sweeper(idle=lambda: True, freeze=True)

    def cell_ended():
        rounds = sweeper.rounds
        sweeper.cell_ended()
        assert _wait_for(lambda: sweeper.rounds > rounds)

    try:
        collector.live = 1000
        cell_ended()  # the first: a full sweep
        assert collector.frozen_live == 1000
        collector.live, collector.dead = 50, 30  # what a cell made, and its cycles
        cell_ended()
        assert (collector.frozen_live, collector.frozen_dead, collector.dead) == (1050, 0, 0)
        collector.frozen_live -= 40  # froze alive, then died: out of a settling's reach
        collector.frozen_dead += 40
        collector.live = 500
        cell_ended()
        assert collector.frozen_dead == 40  # 1,590 frozen: not past 2 x 1,000 + 100
        collector.live = 600
        cell_ended()  # 2,150 frozen: past it, so all of them are swept
        assert collector.frozen_dead == 0 and collector.frozen_live == 2110
    finally:
        sweeper.close()
    assert collector.get_freeze_count() == 0  # a kernel that stops unfreezes


def test_the_sweeper_waits_for_running_cells(collections, monkeypatch):
    import builtins
    import threading
    kernel = SnapshotKernel()
    go = threading.Event()  # the cell runs until the test sets it
    monkeypatch.setattr(builtins, "_sweeper_test_go", go, raising=False)
    try:
        ok(kernel, CYCLES, new_state_name="cyclic")
        running = threading.Thread(target=kernel.execute, args=(
            "import builtins\nbuiltins._sweeper_test_go.wait(30)", "initial"))
        running.start()
        assert _wait_for(lambda: kernel.executions()), "the cell never started"
        kernel.delete("cyclic")
        assert not _wait_for(lambda: any(name == "snapshot-kernel-sweeper"
                                         for name, _ in collections), seconds=0.5)
        go.set()
        running.join(30)
        assert _wait_for(lambda: any(name == "snapshot-kernel-sweeper" and collected >= 5000
                                     for name, collected in collections)), collections
    finally:
        go.set()
        kernel.shutdown()
