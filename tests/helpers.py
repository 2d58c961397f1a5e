"""Small helpers shared by the kernel-level tests."""


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
