"""A unit of work on a transaction the caller owns (`Store.bind`): the transactional outbox.

The caller's `Connection` or ORM `Session` holds its own rows and this package's in one
transaction, and the caller commits it: the one exception to the write path owning every write
transaction. What stays the same as on the write path:

- seqs are taken at commit: listeners on the connection (SQLAlchemy's `commit` connection event,
  which runs before the driver commits, for a `Session.commit()` too) insert the queued events
  with their seqs just before the commit, so the `event_sequences` row lock is held only for the
  inserts and the commit, never while the caller's own work runs, and seqs stay gap-free in
  commit order (a rollback takes none);
- events queued inside a savepoint of the caller that is rolled back are dropped with it (the
  `savepoint` and `rollback_savepoint` connection events);
- once the transaction ends (committed or rolled back) the unit of work refuses further appends
  and service calls, rather than queue events for a commit that will never come.

What the caller must provide, checked when binding (`InvalidRecord` otherwise): a connection of
the store's own database (same SQLite file; same PostgreSQL database and schema), through the
drivers the store uses (sqlite3, psycopg); on SQLite with foreign keys on; on PostgreSQL in
READ COMMITTED (under REPEATABLE READ every concurrent append would be a serialization failure).
On SQLite, binding a connection that is not in a transaction begins one with `BEGIN IMMEDIATE`,
taking the write lock now so that writers stay serialised (see the README).
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from . import driver
from .db import translate_errors
from .errors import InvalidRecord
from .unit_of_work import UnitOfWork

# The unit of work of each connection's current transaction. An entry holds its connection
# (through the unit of work) only until the transaction ends, when it is removed.
_ACTIVE: weakref.WeakKeyDictionary[sa.Connection, _Binding] = weakref.WeakKeyDictionary()


class _Binding:
    """A connection's current unit of work and the caller's savepoints opened since."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow
        # Events queued when each open savepoint of the caller began, innermost last: the
        # `savepoint` event does not name the savepoint, so they are matched as SQLAlchemy
        # opens and ends them, innermost first.
        self.savepoints: list[int] = []


def bind(target: object, database: Any) -> UnitOfWork:
    """The unit of work of the caller's current transaction on `target` (a `Connection` or a
    `Session`), made on first use and the same one until that transaction ends."""
    connection = _connection_of(target)
    binding = _ACTIVE.get(connection)
    if binding is not None:
        if binding.uow.owner is not database:
            raise InvalidRecord("this transaction is already bound to another store")
        return binding.uow
    with translate_errors("bind a unit of work"):
        _check_connection(connection, database)
        if not connection.in_transaction():
            connection.begin()  # the caller's transaction, which the caller commits
        driver.begin_write(connection)  # SQLite: BEGIN IMMEDIATE unless one is open
    uow = UnitOfWork(connection, database.options, None, owner=database)
    _ACTIVE[connection] = _Binding(uow)
    for name, listener in _LISTENERS.items():
        if not event.contains(connection, name, listener):
            event.listen(connection, name, listener)
    return uow


def _connection_of(target: object) -> sa.Connection:
    if isinstance(target, Session):
        with translate_errors("bind a unit of work"):
            return target.connection()  # begins the session's transaction if none is open
    if isinstance(target, sa.Connection):
        if target.closed:
            raise InvalidRecord("bind: the connection is closed")
        return target
    raise InvalidRecord(
        f"bind needs a SQLAlchemy Connection or Session, got {type(target).__name__}"
    )


def _check_connection(connection: sa.Connection, database: Any) -> None:
    """`InvalidRecord` unless the connection reaches the store's database the way the store's
    own connections do (see the module docstring)."""
    mine = database.writer.dialect
    theirs = connection.dialect
    if (theirs.name, theirs.driver) != (mine.name, mine.driver):
        raise InvalidRecord(
            f"bind: the connection uses {theirs.name}+{theirs.driver}; this store uses "
            f"{mine.name}+{mine.driver}"
        )
    raw = connection.connection.driver_connection
    if isinstance(raw, sqlite3.Connection):
        path = _sqlite_path(raw)
        expected = database.writer.url.database
        if path is None or os.path.realpath(path) != os.path.realpath(expected or ""):
            raise InvalidRecord(
                f"bind: the connection's database {path!r} is not the store's {expected!r}"
            )
        if raw.execute("PRAGMA foreign_keys").fetchone()[0] != 1:
            raise InvalidRecord(
                "bind: the SQLite connection has foreign keys off; run PRAGMA foreign_keys=ON "
                "when it connects (a deleted session would leave its events behind)"
            )
        return
    level = connection.get_isolation_level()
    if level != "READ COMMITTED":
        raise InvalidRecord(
            f"bind: the PostgreSQL connection runs in {level}; bind one in READ COMMITTED "
            "(under a stricter level every concurrent append fails to serialize)"
        )
    here = connection.execute(_WHERE).one()
    with database.reader.connect() as own:
        there = own.execute(_WHERE).one()
    if tuple(here) != tuple(there):
        raise InvalidRecord(
            f"bind: the connection reaches database {here[0]!r}, schema {here[1]!r}; this "
            f"store uses database {there[0]!r}, schema {there[1]!r}"
        )


_WHERE = sa.text("SELECT current_database(), current_schema(), pg_postmaster_start_time()")


def _sqlite_path(raw: sqlite3.Connection) -> str | None:
    for _, name, path in raw.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path) or None
    return None


# --- The connection's events --------------------------------------------------------------


def _on_commit(connection: sa.Connection) -> None:
    """Before the driver commits: the queued events take their seqs and are inserted. An
    error here stops the commit before the driver is asked: SQLAlchemy then keeps the
    transaction until the caller rolls it back, so nothing of it, the caller's rows included,
    is committed; the unit of work is over either way."""
    binding = _ACTIVE.pop(connection, None)
    if binding is None:
        return
    outcome = "its commit failed"
    try:
        with translate_errors("commit the events of a unit of work"):
            binding.uow.events.flush()
        outcome = "its transaction committed"
    finally:
        binding.uow.end(outcome)


def _on_rollback(connection: sa.Connection) -> None:
    binding = _ACTIVE.pop(connection, None)
    if binding is not None:
        binding.uow.end("its transaction was rolled back")


def _on_savepoint(connection: sa.Connection, name: str | None) -> None:
    binding = _ACTIVE.get(connection)
    if binding is not None:
        binding.savepoints.append(binding.uow.events.pending_count())


def _on_rollback_savepoint(connection: sa.Connection, name: str, context: object) -> None:
    """The caller undid its innermost savepoint: the events queued since it go with it."""
    binding = _ACTIVE.get(connection)
    if binding is not None and binding.savepoints:
        binding.uow.events.discard_after(binding.savepoints.pop())


def _on_release_savepoint(connection: sa.Connection, name: str, context: object) -> None:
    binding = _ACTIVE.get(connection)
    if binding is not None and binding.savepoints:
        binding.savepoints.pop()


_LISTENERS: dict[str, Any] = {
    "commit": _on_commit,
    "rollback": _on_rollback,
    "savepoint": _on_savepoint,
    "rollback_savepoint": _on_rollback_savepoint,
    "release_savepoint": _on_release_savepoint,
}
