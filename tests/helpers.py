"""Small helpers shared by the kernel-level tests. Cells import this module
too, to reach events and locks that tests hand them."""

import threading
import time

WAIT = 10  # seconds; every wait in the tests is bounded by it


def stdout(reply):
    return "".join(item["text"] for item in reply["output"]
                   if item.get("output_type") == "stream" and item["name"] == "stdout")


def result(reply):
    results = [item for item in reply["output"] if item["output_type"] == "execute_result"]
    return results[0]["data"]["text/plain"] if results else None


def ok(kernel, code, state="initial", **kwargs):
    """Run ``code``; fail the test with the cell's traceback if it raised."""
    reply = kernel.execute(code, state, **kwargs)
    assert reply["error"] is None, "".join(reply["error"]["traceback"])
    assert reply["state_name"] is not None
    return reply


def printed(kernel, code, state):
    """What ``code`` prints when run on ``state`` (which must succeed)."""
    return stdout(ok(kernel, code, state))


def in_background(kernel, code, state="initial", **kwargs):
    """Start an execution in a thread; return a function that waits for its reply."""
    replies = []
    thread = threading.Thread(target=lambda: replies.append(kernel.execute(code, state, **kwargs)))
    thread.start()

    def reply():
        thread.join(WAIT)
        assert not thread.is_alive(), "the execution did not finish"
        return replies[0]

    return reply


def wait_until_running(kernel, *exec_ids):
    """Wait (bounded) until the code of each of ``exec_ids`` has begun: listed, and past
    compiling and the gate of settings (its report's ``thread_id`` is set only then)."""
    deadline = time.monotonic() + WAIT
    while not set(exec_ids) <= {run["exec_id"] for run in kernel.executions()
                                if run["thread_id"] is not None}:
        assert time.monotonic() < deadline, f"{exec_ids} did not start"
        time.sleep(0.005)


class Holder:
    """A library's class (not a cell's, whose instances are copied with their class) that
    reduces to a call of itself with what it holds, as classes written in C often do."""

    def __init__(self, items, label):
        self.items, self.label = items, label

    def __reduce__(self):
        return (Holder, (self.items, self.label))
