"""Executions that nobody waits for, their records, full output, and checkpoints.

Kernel-level (no HTTP): ``start`` returns at once; the record says how the
execution is doing and, once it ends, holds exactly the reply ``execute``
would have given; the full text of a long stream can be paged through; and
``checkpoint()`` stores the cell's globals as states that outlive the cell.
"""

import time

import pytest

import helpers
from helpers import WAIT, ok, printed, stdout, wait_until_running
from snapshot_kernel import checkpoint
from snapshot_kernel.kernel import SnapshotKernel, UnknownExecution


def test_a_started_execution_runs_without_anyone_waiting(kernel, signal_name):
    run = kernel.start(f"import helpers\nhelpers.{signal_name}.wait({WAIT})\nprint('done')\n7",
                       "initial", exec_id="job")
    report = kernel.execution("job")
    assert report["status"] == "running" and report["reply"] is None
    getattr(helpers, signal_name).set()
    reply = kernel.wait("job", WAIT)
    assert reply is run.reply and stdout(reply) == "done\n" and reply["state_name"]
    report = kernel.execution("job")
    assert report["status"] == "completed" and report["reply"] == reply


STATUSES = [("x = 1", {}, "completed"), ("1 / 0", {}, "failed"),
            ("while True: pass", {"timeout": 0.3}, "timed_out")]


@pytest.mark.parametrize("code, options, status", STATUSES, ids=[row[2] for row in STATUSES])
def test_a_finished_execution_says_how_it_ended(kernel, code, options, status):
    kernel.execute(code, "initial", exec_id="e", **options)
    assert kernel.execution("e")["status"] == status


def test_an_interrupted_execution_says_so(kernel, signal_name):
    kernel.start(f"import helpers\nhelpers.{signal_name}.wait({WAIT})", "initial", exec_id="i")
    wait_until_running(kernel, "i")
    kernel.interrupt("i")
    assert kernel.wait("i", WAIT)["error"]["ename"] == "KeyboardInterrupt"
    assert kernel.execution("i")["status"] == "interrupted"


def test_a_stuck_execution_has_its_reply_and_says_stuck(signal_name):
    kernel = SnapshotKernel(grace=0.2)
    code = (f"import helpers\nwhile not helpers.{signal_name}.is_set():\n"
            "    try:\n        helpers.time.sleep(0.01)\n    except KeyboardInterrupt:\n        pass")
    helpers.time = time
    kernel.start(code, "initial", exec_id="s", timeout=0.2)
    reply = kernel.wait("s", WAIT)
    assert "stuck" in reply["error"]["evalue"]
    assert kernel.execution("s")["status"] == "stuck"
    getattr(helpers, signal_name).set()
    deadline = time.monotonic() + WAIT
    while kernel.execution("s")["status"] == "stuck":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert kernel.execution("s")["status"] == "timed_out"


def test_long_polling_waits_for_the_reply(kernel):
    kernel.start("import time\ntime.sleep(0.3)", "initial", exec_id="poll")
    assert kernel.execution("poll", wait=WAIT)["status"] == "completed"


def test_records_are_kept_for_a_while_then_dropped():
    kernel = SnapshotKernel(keep_results=0.2)
    kernel.execute("1", "initial", exec_id="old")
    assert kernel.execution("old")["status"] == "completed"
    time.sleep(0.3)
    with pytest.raises(UnknownExecution):
        kernel.execution("old")


def test_records_are_bounded_in_bytes_the_oldest_dropped_first(kernel):
    kernel._runs.keep_bytes = 250_000  # characters of replies kept (default 256 MiB)
    for number in range(4):  # each reply holds about 100,000 characters
        kernel.execute("print('x' * 49_990)\nprint('y' * 49_990, file=__import__('sys').stderr)",
                       "initial", exec_id=f"big-{number}", max_output=10 ** 6)
    kept = [run["exec_id"] for run in kernel.finished_executions()]
    assert kept == ["big-3", "big-2"]
    with pytest.raises(UnknownExecution):
        kernel.execution("big-1")
    kernel._runs.keep_bytes = 10  # the latest stays whatever its size: it may be paged
    kernel.execute("print('z' * 1000)", "initial", exec_id="latest")
    assert [run["exec_id"] for run in kernel.finished_executions()] == ["latest"]


def test_a_finished_record_keeps_no_code(kernel):
    # Twenty cells of 5 MB of source stayed in memory an hour, in their records.
    kernel.execute("# " + "x" * 10 ** 6, "initial", exec_id="long-source")
    # First through the kernel lock: the reply is given a moment before the record is kept.
    assert kernel.execution("long-source")["status"] == "completed"
    assert kernel._runs.finished["long-source"].code is None


def test_the_full_output_of_a_cut_stream_can_be_paged_through(kernel):
    code = "for i in range(5000):\n    print(f'line {i:04d}')"
    reply = kernel.execute(code, "initial", exec_id="loud", max_output=200)
    assert len(stdout(reply)) < 400
    cut = reply["truncated"]["stdout"]
    assert cut["characters"] == 5000 * 10 and not cut["capped"]
    assert cut["location"] == "/executions/loud/output?stream=stdout"
    pages, offset = [], 0
    while True:
        page = kernel.output("loud", "stdout", offset, 7000)
        if not page["text"]:
            break
        pages.append(page["text"])
        offset = page["next_offset"]
    assert "".join(pages) == "".join(f"line {i:04d}\n" for i in range(5000))
    assert page["complete"] and page["total"] == 50000


def test_a_stream_that_was_not_cut_reads_back_whole(kernel):
    kernel.execute("print('short')", "initial", exec_id="quiet")
    assert kernel.output("quiet", "stdout", 0, 100)["text"] == "short\n"


def test_full_output_stops_at_its_cap_and_says_so():
    kernel = SnapshotKernel(full_output_limit=1000)
    reply = kernel.execute("print('x' * 5000)", "initial", exec_id="big", max_output=100)
    assert reply["truncated"]["stdout"]["capped"]
    page = kernel.output("big", "stdout", 0, 10000)
    assert page["total"] == 1000 and page["capped"] and page["text"] == "x" * 1000


# -- checkpoints ---------------------------------------------------------------------

LOOP = ("import helpers\nresults = []\nfor i in range(10):\n    results.append(i * i)\n"
        "    checkpoint_every(2, progress=f'{{i + 1}}/10')\n    if i == 6:\n"
        "        helpers.{signal}.set()\n        helpers.{gate}.wait({wait})")


def test_a_job_interrupted_after_its_checkpoints_resumes_from_the_last(kernel, signal_name):
    gate = signal_name + "_gate"
    import threading
    setattr(helpers, gate, threading.Event())
    try:
        code = LOOP.format(signal=signal_name, gate=gate, wait=WAIT)
        kernel.start(code, "initial", exec_id="job", new_state_name="squares")
        getattr(helpers, signal_name).wait(WAIT)
        assert kernel.execution("job")["progress"] == "7/10"  # the latest hint, stored or not
        kernel.interrupt("job")
        reply = kernel.wait("job", WAIT)
    finally:
        delattr(helpers, gate)
    assert reply["error"]["ename"] == "KeyboardInterrupt" and reply["state_name"] is None
    saved = [point["state_name"] for point in reply["checkpoints"]]
    assert saved == ["squares@1", "squares@2", "squares@3"]
    last = kernel.describe("squares@3")
    assert last["checkpoint"] is True and last["progress"] == "6/10" and last["parent"] == "initial"
    resumed = ok(kernel, "for i in range(len(results), 10):\n    results.append(i * i)\n"
                         "print(results)", "squares@3")
    assert stdout(resumed) == str([i * i for i in range(10)]) + "\n"


def test_progress_reports_a_hint_in_a_cell_without_an_import_and_stores_nothing(kernel,
                                                                               signal_name):
    code = (f"import helpers\nprogress('2/5 files')\nhelpers.{signal_name}.set()\n"
            f"helpers.{signal_name}_gate.wait({WAIT})")
    import threading
    setattr(helpers, signal_name + "_gate", threading.Event())
    try:
        kernel.start(code, "initial", exec_id="hinted")
        assert getattr(helpers, signal_name).wait(WAIT)
        assert kernel.execution("hinted")["progress"] == "2/5 files"
        getattr(helpers, signal_name + "_gate").set()
        reply = kernel.wait("hinted", WAIT)
    finally:
        delattr(helpers, signal_name + "_gate")
    assert reply["error"] is None and "checkpoints" not in reply
    assert kernel.state_names() == ["initial", reply["state_name"]]


def test_a_named_checkpoint_and_what_follows_it(kernel):
    reply = ok(kernel, "x = 1\ncheckpoint(name='first', progress='setup done')\nx = 2",
               new_state_name="end")
    assert reply["checkpoints"][0]["state_name"] == "first"
    assert printed(kernel, "print(x)", "first") == "1\n"
    assert printed(kernel, "print(x)", "end") == "2\n"


def test_a_failing_cell_keeps_its_checkpoints(kernel):
    reply = kernel.execute("data = [1]\ncheckpoint()\ndata.append(2)\n1 / 0", "initial",
                           exec_id="boom")
    assert reply["error"]["ename"] == "ZeroDivisionError"
    assert printed(kernel, "print(data)", "boom@1") == "[1]\n"


def test_checkpoint_outside_a_cell_says_where_it_works():
    with pytest.raises(RuntimeError, match="only in a snapshot-kernel cell"):
        checkpoint()


def test_a_state_may_bind_its_own_checkpoint(kernel):
    parent = ok(kernel, "def checkpoint(**kw):\n    return 'mine'")["state_name"]
    assert printed(kernel, "print(checkpoint())", parent) == "mine\n"
