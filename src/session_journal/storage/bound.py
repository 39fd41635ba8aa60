"""A unit of work on a transaction the caller owns (`Store.bind`): the transactional outbox.

The caller's `Connection` or ORM `Session` holds its own rows and this package's in one
transaction, and the caller commits it: the one exception to the write path owning every write
transaction. What stays the same as on the write path:

- seqs are taken at commit: listeners on the connection (SQLAlchemy's `commit` connection event,
  which runs before the driver commits, for a `Session.commit()` too) insert the queued events
  with their seqs just before the commit, so the `event_sequences` row lock is held only for the
  inserts and the commit, never while the caller's own work runs, and seqs stay gap-free in
  commit order (a rollback takes none);
- if those inserts fail, the driver's transaction is rolled back at once, before the error is
  raised: SQLAlchemy considers the transaction over after a failed commit, so nothing of it may
  be left open for the pool's next user to commit (or, on SQLite, the write lock held);
- events queued inside a savepoint of the caller that is rolled back are dropped with it (the
  `savepoint`, `rollback_savepoint` and `release_savepoint` connection events, matched by the
  savepoint's name; a savepoint opened before binding held no events, so rolling it back drops
  them all). A `Session`'s savepoint (`begin_nested()`) is emitted by SQLAlchemy only at its
  first statement through the `Session`; service calls go to the connection directly, so
  binding a `Session` makes each `begin_nested()` emit its `SAVEPOINT` at once;
- work left for after the commit (`uow.after_commit`, such as `remove_ended` deleting the
  sessions' directories) runs only once the driver has committed (see `_on_commit`), and goes
  with a rolled-back savepoint or transaction as the queued events do;
- once the transaction ends (committed or rolled back) the unit of work refuses further appends,
  service calls and repository calls, rather than queue events for a commit that will never
  come or write outside the transaction it was given for.

What the caller must provide, checked when binding (`InvalidRecord` otherwise): a connection of
the store's own database (same SQLite file; same PostgreSQL database and schema), through the
drivers the store uses (sqlite3, psycopg; psycopg's `AsyncConnection` of an asyncio engine too,
inside `AsyncSession.run_sync`, where SQLAlchemy's adapter drives it), not in AUTOCOMMIT; on
SQLite with foreign keys on; on PostgreSQL in READ COMMITTED (under REPEATABLE READ every
concurrent append would be a serialization failure). On SQLite, binding a connection that is
not in a transaction begins one with `BEGIN IMMEDIATE`, taking the write lock now so that
writers stay serialised (see the docs, Embedding).

The thread that binds holds the transaction until it ends: a service call of the same store
without `uow=` from that thread would wait for it (for ever on PostgreSQL when it needs a row
the transaction locked, for the busy timeout on SQLite), so the write path refuses such a call
at once (`holds_binding`).

A binding lives on its connection (an attribute, not a registry), so that a connection the
caller forgets to close is garbage-collected, and returned to its pool rolled back, like any
other.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from .._compat import engine_isolation_level, savepoint_count
from ..errors import InvalidRecord, StorageError
from . import driver
from .engines import translate_errors
from .unit_of_work import NOTHING_DONE, UnitOfWork, WorkMark, run_after_commit

_ATTRIBUTE = "_session_journal_binding"  # on the Connection: its current transaction's binding
_SESSION_KEY = "session_journal.binding"  # in Session.info: a weak reference to its binding


class _Binding:
    """A connection's current unit of work and the caller's savepoints opened since."""

    def __init__(self, uow: UnitOfWork, database: object) -> None:
        self.uow = uow
        self.database = database
        self.live = True  # until the transaction ends
        # The savepoints of the caller opened since binding, innermost last: each one's name
        # (SQLAlchemy's) and the mark of the queued events (and work waiting for the commit)
        # when it began.
        self.savepoints: list[tuple[str | None, WorkMark]] = []


class _Threads(threading.local):
    """Per thread: `bindings`, a WeakSet of the bindings the thread made (`None` until the
    first: a class default, so that reading it in a thread that never bound raises nothing)."""

    bindings: weakref.WeakSet[_Binding] | None = None


_THREADS = _Threads()


def bind(target: object, database: Any) -> UnitOfWork:
    """The unit of work of the caller's current transaction on `target` (a `Connection` or a
    `Session`), made on first use and the same one until that transaction ends."""
    connection = _connection_of(target)
    binding = _live(connection)
    if binding is not None:
        if binding.database is not database:
            raise InvalidRecord("this transaction is already bound to another store")
        _remember(target, binding)
        return binding.uow
    with translate_errors("bind a unit of work"):
        _check_connection(connection, database)
        if not connection.in_transaction():
            connection.begin()  # the caller's transaction, which the caller commits
        driver.begin_write(connection)  # SQLite: BEGIN IMMEDIATE unless one is open
    uow = UnitOfWork(connection, database.options, None, owner=database)
    binding = _Binding(uow, database)
    # The connection holds its binding, which holds it back through the unit of work: a cycle
    # the garbage collector frees if the caller abandons the connection.
    setattr(connection, _ATTRIBUTE, binding)
    for name, listener in _LISTENERS.items():
        if not event.contains(connection, name, listener):
            event.listen(connection, name, listener)
    _remember(target, binding)
    held = _THREADS.bindings
    if held is None:
        held = _THREADS.bindings = weakref.WeakSet()
    held.add(binding)
    return uow


def holds_binding(database: object) -> bool:
    """Whether this thread bound a transaction to `database`'s store that has not ended."""
    held = _THREADS.bindings
    return held is not None and any(
        binding.live and binding.database is database for binding in list(held)
    )


def _live(connection: sa.Connection) -> _Binding | None:
    binding: _Binding | None = getattr(connection, _ATTRIBUTE, None)
    return binding if binding is not None and binding.live else None


def _end(connection: sa.Connection) -> _Binding | None:
    """The connection's live binding, now ended (the transaction is over); `None` if none."""
    binding = _live(connection)
    if binding is not None:
        binding.live = False
        delattr(connection, _ATTRIBUTE)
    return binding


def _remember(target: object, binding: _Binding) -> None:
    """For a `Session`: its savepoints must reach the connection when they begin."""
    if isinstance(target, Session):
        target.info[_SESSION_KEY] = weakref.ref(binding)
        if not event.contains(target, "after_transaction_create", _on_session_transaction):
            event.listen(target, "after_transaction_create", _on_session_transaction)


def _connection_of(target: object) -> sa.Connection:
    if isinstance(target, Session):
        try:
            target.get_bind()
        except sa.exc.UnboundExecutionError:
            raise InvalidRecord(
                "bind: the Session has no engine or connection to run on; make it with "
                "Session(engine) or Session(bind=connection)"
            ) from None
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
    undrivable = driver.drivable(connection)
    if undrivable is not None:
        raise InvalidRecord(
            f"bind: the connection's driver connection is a {undrivable}, which this store "
            "cannot drive; bind a connection of sqlite3, of psycopg, or of psycopg's "
            "AsyncConnection inside AsyncSession.run_sync"
        )
    if _autocommit(connection):
        raise InvalidRecord(
            "bind: the connection is in AUTOCOMMIT (isolation_level='AUTOCOMMIT'): each of "
            "its statements commits by itself, so the events could not commit with your rows "
            "nor take their seqs in one transaction; bind a connection without it"
        )
    raw = connection.connection.dbapi_connection
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


def _autocommit(connection: sa.Connection) -> bool:
    """Whether SQLAlchemy runs the connection in AUTOCOMMIT (set on the connection, its engine
    or `create_engine`), or its psycopg connection commits each statement by itself. (SQLite's
    `isolation_level = None` alone is not AUTOCOMMIT: SQLAlchemy's own recipe for SQLite
    transactions sets it and emits `BEGIN` itself, as the store does.)"""
    level = connection.get_execution_options().get("isolation_level")
    if level is None:  # set by create_engine(isolation_level=...), if at all
        level = engine_isolation_level(connection.dialect)
    if level == "AUTOCOMMIT":
        return True
    raw = connection.connection.dbapi_connection
    return not isinstance(raw, sqlite3.Connection) and getattr(raw, "autocommit", False) is True


_WHERE = sa.text("SELECT current_database(), current_schema(), pg_postmaster_start_time()")


def _sqlite_path(raw: sqlite3.Connection) -> str | None:
    for _, name, path in raw.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path) or None
    return None


# --- The connection's events --------------------------------------------------------------


def _on_commit(connection: sa.Connection) -> None:
    """Before the driver commits: the queued events take their seqs and are inserted; a
    transaction an earlier error aborted is refused (`StorageError`), never committed as an
    empty one, which on PostgreSQL is what its `COMMIT` would do. If that fails, the driver's
    transaction is rolled back before the error is raised: SQLAlchemy ends its transaction
    after a failed commit without rolling back, so the caller's rows would otherwise stay
    pending on the connection, for the pool's next user to commit. The unit of work is over
    either way.

    Work left for after the commit (`uow.after_commit`) needs a moment after the driver's
    commit, and SQLAlchemy has no event then: with such work waiting, the driver commits here,
    the work runs, and SQLAlchemy's commit finds nothing left to commit."""
    binding = _end(connection)
    if binding is None:
        return
    waiting = binding.uow.take_after_commit()
    outcome = "its commit failed"
    try:
        binding.uow.check_commit()  # a refusal the caller's writes must not outlive
        if driver.transaction_aborted(connection):
            # PostgreSQL would answer the COMMIT with a rollback, and the caller would not know.
            raise StorageError(
                "commit of a transaction bound to the store: an earlier database error aborted "
                "it (on PostgreSQL a failed statement aborts the whole transaction, also one in "
                "a service call given uow= that the caller went on from); nothing was "
                "committed; run the transaction again"
            )
        with translate_errors("commit the events of a unit of work"):
            binding.uow.events.flush()
            if waiting:
                driver.commit_in_event(connection)
        outcome = "its transaction committed"
    except BaseException:
        driver.abort(connection)
        raise
    finally:
        binding.uow.end(outcome)
    run_after_commit(waiting)


def _on_rollback(connection: sa.Connection) -> None:
    binding = _end(connection)
    if binding is not None:
        binding.uow.end("its transaction was rolled back")


def _on_savepoint(connection: sa.Connection, name: str | None) -> None:
    binding = _live(connection)
    if binding is not None:
        if name is None:  # SQLAlchemy names it after this event: sa_savepoint_<its count + 1>
            count = savepoint_count(connection)
            name = None if count is None else f"sa_savepoint_{count + 1}"
        binding.savepoints.append((name, binding.uow.mark()))


def _on_rollback_savepoint(connection: sa.Connection, name: str, context: object) -> None:
    """The caller undid a savepoint (and every savepoint inside it): the events queued since it
    began go with it. A savepoint not among those opened since binding began before it, when
    no event was queued."""
    binding = _live(connection)
    if binding is not None:
        mark = _pop_down_to(binding, name)
        binding.uow.restore(NOTHING_DONE if mark is None else mark)


def _on_release_savepoint(connection: sa.Connection, name: str, context: object) -> None:
    binding = _live(connection)
    if binding is not None:
        _pop_down_to(binding, name)


def _pop_down_to(binding: _Binding, name: str) -> WorkMark | None:
    """Forget the savepoint `name` and those opened inside it; the queue's mark when it began,
    or `None` if it began before binding (then every savepoint is forgotten)."""
    names = [opened for opened, _ in binding.savepoints]
    if name in names:
        at = len(names) - 1 - names[::-1].index(name)
    elif None in names:  # a name SQLAlchemy did not let us predict: the innermost, as it is
        at = len(names) - 1  # usually
    else:
        binding.savepoints.clear()
        return None
    mark = binding.savepoints[at][1]
    del binding.savepoints[at:]
    return mark


def _on_session_transaction(session: Session, transaction: SessionTransaction) -> None:
    """A `Session`'s `begin_nested()`: while the session's transaction is bound, emit the
    `SAVEPOINT` now rather than at the session's next statement, which may never come (service
    calls and appends go to the connection directly)."""
    if not transaction.nested:
        return
    ref = session.info.get(_SESSION_KEY)
    binding = ref() if ref is not None else None
    if binding is not None and binding.live:
        with translate_errors("begin a savepoint of a bound transaction"):
            session.connection()


_LISTENERS: dict[str, Any] = {
    "commit": _on_commit,
    "rollback": _on_rollback,
    "savepoint": _on_savepoint,
    "rollback_savepoint": _on_rollback_savepoint,
    "release_savepoint": _on_release_savepoint,
}
