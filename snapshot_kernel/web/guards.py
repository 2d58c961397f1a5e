"""What a request meets besides its route: the query parameters the route takes, and a
server process that is ending for a forced stop. Bottle pieces that ``main`` installs."""

import json
import re
import threading

import bottle

from .process import exit_now
from .server import ANSWER_NOW

_PLACEHOLDER = re.compile(r"<(\w+)>")  # Bottle's <name> in a route, shown as OpenAPI's {name}


def shown_rule(rule):
    """A Bottle route's rule as OpenAPI and the errors show it: ``/states/{name}``."""
    return _PLACEHOLDER.sub(r"{\1}", rule)


class KnownQueries:
    """Bottle plugin: a query parameter its route does not take is a 400 naming the ones it
    does (a route's ``query`` config; ``token`` everywhere), so ``?tre=1`` is no silent no-op."""

    name, api = "known_queries", 2

    def apply(self, callback, route):
        known = ("token", *route.config.get("query", ()))

        def wrapper(*args, **kwargs):
            if not bottle.request.environ.get("QUERY_STRING"):  # most requests: nothing to parse
                return callback(*args, **kwargs)
            unknown = sorted(set(bottle.request.query) - set(known))
            if unknown:
                takes = ", ".join(f"?{name}=" for name in known)
                raise bottle.HTTPError(400, f"unknown query parameter(s) "
                                            f"{', '.join(map(repr, unknown))}; {route.method} "
                                            f"{shown_rule(route.rule)} takes {takes}")
            return callback(*args, **kwargs)

        return wrapper


REPLACING = threading.Event()  # set once this process is ending for a forced stop


def hold_while_replacing():
    """A request that reaches a process ending for a forced stop waits for its end, so
    no reply from it can be stale: its connection closes, and the client asks again,
    of the next process."""
    if REPLACING.is_set():
        threading.Event().wait()


def reply_then_exit(reply, status):
    """Give ``reply`` on this request's connection, then end the process with ``status``
    (a forced stop: the supervisor starts the next server process)."""
    REPLACING.set()
    answer_now = bottle.request.environ.get(ANSWER_NOW)
    if answer_now is not None:
        answer_now("200 OK", [("Content-Type", "application/json")],
                   json.dumps(reply).encode("utf-8"))
    exit_now(status)
