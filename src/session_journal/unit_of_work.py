"""The unit of work (one transaction with repositories bound to it) and the store's write path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .config import StoreOptions
from .db import begin_write, create_engine, translate_errors
from .errors import SessionJournalError, StorageError, StoreClosed
from .repositories import (
    ActivityRepository,
    CheckpointRepository,
    EventRepository,
    ProjectEventRepository,
    ProjectionRepository,
    SessionRepository,
)


class UnitOfWork:
    """One database transaction. Leaving its block without `commit()` rolls everything back."""

    def __init__(self, connection: sa.Connection, options: StoreOptions | None = None) -> None:
        options = options or StoreOptions()
        self.connection = connection
        self.sessions = SessionRepository(connection)
        self.events = EventRepository(connection, options.max_body_bytes)
        self.activity = ActivityRepository(connection, options.max_body_bytes)
        self.checkpoints = CheckpointRepository(connection)
        self.projection = ProjectionRepository(connection)
        self.project_events = ProjectEventRepository(connection)

    def commit(self) -> None:
        """Assign seqs to the appended events, then commit the transaction."""
        self.events.flush()
        self.connection.commit()  # what SQLAlchemy began, if anything
        self.connection.connection.dbapi_connection.commit()  # type: ignore[union-attr]


class Database:
    """The engines of one store and its write path.

    Every write runs in `writing()`: one transaction, serialised per process by a lock (on SQLite
    threads of one process would otherwise only queue on the busy handler; on PostgreSQL it keeps
    one process from holding several connections on the sequence row lock). Across processes,
    SQLite's `BEGIN IMMEDIATE` and PostgreSQL's row lock on `event_sequences` order writers.
    Reads run in `reading()` on their own engine and never wait for the write lock.
    """

    def __init__(self, url: str, options: StoreOptions) -> None:
        self.options = options
        self.writer: Engine = create_engine(url, options, role="writer")
        self.reader: Engine = create_engine(url, options, role="reader")
        self._write_lock = threading.Lock()
        self._writer_thread: int | None = None  # the thread inside `writing()`, if any
        # Writes are serialised, so they share one connection, kept between writes: checking a
        # connection out of the pool and back costs about as much as the statements of a
        # single-event append.
        self._idle_writer: sa.Connection | None = None
        self._closed = False

    @contextmanager
    def writing(self, action: str = "write") -> Iterator[UnitOfWork]:
        """A write transaction; commits only if the block calls `uow.commit()`."""
        if self.writing_in_this_thread():
            # A service called inside `store.unit_of_work()` would wait for its own lock.
            raise SessionJournalError(
                f"{action}: a write was started inside a unit of work of the same store; "
                "use the unit of work's repositories instead"
            )
        with self._write_lock, translate_errors(action):
            self._check_open(action)
            connection, self._idle_writer = self._idle_writer or self.writer.connect(), None
            self._writer_thread, sound = threading.get_ident(), False
            try:
                begin_write(connection)
                yield UnitOfWork(connection, self.options)
                sound = True
            except SessionJournalError as error:  # a refusal of ours leaves the connection sound
                sound = not isinstance(error, StorageError)
                raise
            finally:
                self._writer_thread = None
                self._release(connection, sound)

    def _release(self, connection: sa.Connection, sound: bool) -> None:
        """After a write: keep its connection for the next write if it is as the pool gave it;
        else hand it back to the pool, which resets it, or discard it if it may be broken."""
        if not sound or connection.invalidated:
            _discard(connection)
            return
        if connection.closed:  # closed by the block itself
            return
        try:
            if connection.in_transaction():
                connection.rollback()
            # Also what the driver alone knows of: psycopg opens a transaction for a statement
            # sent to it directly after `commit()`; it must not reach the next write.
            connection.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
        except BaseException:
            _discard(connection)
            raise
        if (
            self._closed
            or connection.get_execution_options() != self.writer.get_execution_options()
        ):
            connection.close()
        else:
            self._idle_writer = connection

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside `writing()`."""
        return self._writer_thread == threading.get_ident()

    def _check_open(self, action: str) -> None:
        if self._closed:
            raise StoreClosed(f"{action}: the store is closed")

    @contextmanager
    def _reader_connection(self, action: str) -> Iterator[sa.Connection]:
        """A reader connection, refused once the store is closed. Checked again after the
        connect: a read that began while `dispose()` ran must not bring a connection back."""
        self._check_open(action)
        with self.reader.connect() as connection:
            self._check_open(action)
            yield connection

    @contextmanager
    def reading(self, action: str = "read") -> Iterator[UnitOfWork]:
        """A read-only snapshot: every query in the block sees the same committed state."""
        with (
            translate_errors(action),
            self._reader_connection(action) as connection,
            connection.begin(),
        ):
            yield UnitOfWork(connection, self.options)

    @contextmanager
    def reading_one_statement(self, action: str = "read") -> Iterator[UnitOfWork]:
        """For a read made of one statement, which sees one snapshot by itself: no transaction
        is opened around it (on PostgreSQL the connection is in autocommit for the block, which
        saves the BEGIN and COMMIT round trips). Use `reading()` for anything more."""
        with translate_errors(action), self._reader_connection(action) as connection:
            driver = connection.connection.driver_connection
            if not isinstance(driver, psycopg.Connection):  # SQLite: pysqlite's autocommit
                yield UnitOfWork(connection, self.options)
                return
            driver.autocommit = True
            try:
                yield UnitOfWork(connection, self.options)
            finally:
                try:
                    driver.autocommit = False
                except psycopg.Error:  # the connection died: the pool must not keep it
                    connection.invalidate()

    def dispose(self) -> None:
        """Close every pooled connection and the idle writer connection; every later read or
        write raises `StoreClosed`. A write in progress in another thread is waited for; one in
        progress in this thread (inside a unit of work) closes its connection when it ends.
        Calling it again does nothing more."""
        self._closed = True
        if not self.writing_in_this_thread():
            with self._write_lock:
                idle, self._idle_writer = self._idle_writer, None
                if idle is not None:
                    idle.close()
        self.writer.dispose()
        self.reader.dispose()


def _discard(connection: sa.Connection) -> None:
    """Close a connection that may be broken (say, the server dropped it, or a driver error left
    it in an unknown state) without talking to the database; the next write connects afresh."""
    connection.invalidate()
    connection.close()
