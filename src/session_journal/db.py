"""Engines: SQLite pragmas and transaction control, PostgreSQL isolation, driver-error translation.

SQLite: pysqlite's own transaction handling is switched off (it would not emit `BEGIN` before DDL
and would start transactions late). Write transactions belong to the write path
(`write_path.py`), which begins them with `BEGIN IMMEDIATE`; readers begin with a plain `BEGIN`
(the `begin` listener below), their snapshot starting at their first read. WAL lets readers run
while a writer commits.

PostgreSQL: writers run in READ COMMITTED (the `event_sequences` row lock orders them); readers
run in REPEATABLE READ so that every statement of a read sees one snapshot. Event pages are one
statement (page and `latest_seq` together) and run without a transaction (`reading_one_statement`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Engine

from .config import StoreOptions
from .errors import InvalidRecord, SessionJournalError, StorageError


def create_engine(
    url: str,
    options: StoreOptions,
    *,
    role: str,
) -> Engine:
    """An engine for `role` "writer", "reader" or "migrator" (writer with foreign keys off)."""
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError as error:
        raise InvalidRecord(f"invalid database URL: {error}") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, options, role)
    if parsed.get_backend_name() == "postgresql":
        isolation = "REPEATABLE READ" if role == "reader" else "READ COMMITTED"
        # No ping per checkout: it would add a round trip to every call. A call on a connection
        # the server dropped (say, after a restart) fails once with StorageError, nothing of it
        # committed, and the pool is renewed. Writes are serialised per process, so a writer
        # needs few connections.
        pool = {"pool_size": 2, "max_overflow": 2} if role == "writer" else {}
        return sa.create_engine(parsed, isolation_level=isolation, **pool)
    raise InvalidRecord(
        f"unsupported database {parsed.get_backend_name()!r}: use sqlite:/// or postgresql+psycopg://"
    )


def _sqlite_engine(url: sa.URL, options: StoreOptions, role: str) -> Engine:
    synchronous = options.sqlite_synchronous.upper()  # checked when the options were built
    if url.database in (None, "", ":memory:"):
        raise InvalidRecord("an in-memory SQLite database cannot be shared; give a file path")
    engine = sa.create_engine(url, connect_args={"timeout": options.busy_timeout_s})
    foreign_keys = "OFF" if role == "migrator" else "ON"
    begin = "BEGIN" if role == "reader" else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # Must be set outside a transaction, where it takes effect (it is a no-op inside one).
        cursor.execute(f"PRAGMA foreign_keys={foreign_keys}")
        cursor.execute(f"PRAGMA busy_timeout={int(options.busy_timeout_s * 1000)}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.close()

    if role != "writer":  # the write path begins its own (`driver.begin_write`)

        @event.listens_for(engine, "begin")
        def _begin(connection: sa.Connection) -> None:
            # pysqlite's own transaction handling is off: SQLAlchemy's begin must say BEGIN.
            driver = connection.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            if not driver.in_transaction:
                driver.execute(begin)

    return engine


# --- The one rule for the SQLite database file -----------------------------------------------
# Nothing in this package opens, copies, locks or stats-and-reopens the SQLite database file or
# its `-wal`/`-shm` files with plain file calls: only SQLite does. SQLite's locks are POSIX
# (fcntl) locks, which belong to the process, not the descriptor, so closing *any* descriptor of
# the file drops *every* lock the process holds on it ("How To Corrupt An SQLite Database File",
# section 2.2). Another process then believes it is the last user, checkpoints and deletes the
# WAL under our open connections, and later commits land in an unlinked file: acknowledged events
# are lost. Cross-process coordination of our own (the migration lock) uses a separate file.

MIGRATION_LOCK_SUFFIX = ".migrate-lock"


def migration_lock_path(url: str) -> str:
    """The lock file that serialises migrations of a SQLite database: beside it, never it."""
    database = sa.make_url(url).database
    if not database or database == ":memory:":
        raise InvalidRecord("an in-memory SQLite database cannot be shared; give a file path")
    return database + MIGRATION_LOCK_SUFFIX


@contextmanager
def sqlite_migration_lock(url: str) -> Iterator[None]:
    """Hold an exclusive `flock` on the database's migration lock file (created if needed and
    never deleted, so every process locks the same inode) for the block. Concurrent upgrades of
    one SQLite database run one after the other; SQLite's own locks do not last across the
    per-revision transactions."""
    descriptor = os.open(migration_lock_path(url), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the flock; this descriptor is not the database's


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Re-raise driver and SQLAlchemy errors as `StorageError`, chained, naming the action."""
    try:
        yield
    except SessionJournalError:
        raise
    except (exc.SQLAlchemyError, sqlite3.Error, psycopg.Error) as error:
        # Driver errors arrive bare from statements sent straight to the driver (BEGIN on
        # SQLite, the page fetch): "database is locked" after the busy timeout, for one.
        raise storage_error(action, error) from error


def storage_error(action: str, error: BaseException) -> StorageError:
    """The `StorageError` that reports `error` as the failure of `action`, chained to it."""
    failure = StorageError(f"{action} failed: {error_detail(error)}")
    failure.__cause__ = error
    return failure


def is_database_error(error: BaseException) -> bool:
    """Whether `error` comes from SQLAlchemy or a driver (what `translate_errors` translates)."""
    return isinstance(error, exc.SQLAlchemyError | sqlite3.Error | psycopg.Error)


def error_detail(error: BaseException) -> str:
    """The first line of what the driver said (SQLAlchemy wraps it as `orig`), else the
    error's repr for anything that is not a database error."""
    if is_database_error(error):
        text = str(getattr(error, "orig", None) or error)
        return text.splitlines()[0] if text else type(error).__name__
    return str(error) if isinstance(error, SessionJournalError) else repr(error)
