"""sqlite3 connections in states: each state has its own database, usable from any cell.

Imported by the copier the first time it meets an sqlite3 type. A connection
belongs to the thread that made it, and cells run on pooled threads, so a
connection kept in a state could not be used by the next cell. The copy is a
new connection made with ``check_same_thread=False``: an in-memory database is
copied into it whole (``Connection.backup``), so a branch's writes never reach
its parent; a connection to a file opens that file again, which all states
then share, as every process that opens it does. The connection's
``isolation_level``, ``row_factory`` and ``text_factory`` come along; an open
transaction is copied as the database shows it to that connection.
"""

import sqlite3

from ..copying.dispatch import register


def copy_connection(copier, connection):
    path = _file_of(connection)
    new = sqlite3.connect(path or ":memory:", check_same_thread=False,
                          isolation_level=connection.isolation_level)
    copier.memo[id(connection)] = new
    if not path:
        connection.backup(new)
    new.row_factory = yield connection.row_factory
    new.text_factory = yield connection.text_factory
    return new


def _file_of(connection):
    """The file of the connection's main database; '' for one in memory."""
    for _, name, path in connection.execute("PRAGMA database_list"):
        if name == "main":
            return path
    return ""


register(sqlite3.Connection, copy_connection, subclasses=True)
