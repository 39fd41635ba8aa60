"""`Database`: the engines of one store, its reads and its write path."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import driver
from .config import StoreOptions
from .db import create_engine, translate_errors
from .errors import StoreClosed
from .unit_of_work import ReadUnitOfWork, UnitOfWork
from .wakeups import CommitSignal, PostgresListener, SqliteWatcher
from .write_path import WritePath

T = TypeVar("T")


class Database:
    """The engines of one store: reads on a pool of their own, writes through the write path.
    It is the services' `unit_of_work.Transactions`.

    Reads run in `reading()` and never wait for writes. Writes are `submit`ted functions of a
    unit of work, or `writing()` blocks; the write path (`write_path.WritePath`) owns their
    transactions and groups concurrent calls into one commit. Across processes, SQLite's
    `BEGIN IMMEDIATE` and PostgreSQL's row lock on `event_sequences` order writers.
    """

    def __init__(self, url: str, options: StoreOptions) -> None:
        self.options = options
        self.writer: Engine = create_engine(url, options, role="writer")
        self.reader: Engine = create_engine(url, options, role="reader")
        self.write_path = WritePath(self.writer, options)
        self._pid = os.getpid()
        self._closed = False
        self._follow_lock = threading.Lock()
        self._fresh_followers()

    def _fresh_followers(self) -> None:
        # The followers' signal, pulsed by this process's commits; its source of other
        # processes' commits starts with the first follower (`commit_signal`).
        self.signal = CommitSignal()
        self.write_path.after_commit = self.signal.pulse
        self.wakeups: SqliteWatcher | PostgresListener | None = None

    def commit_signal(self) -> CommitSignal:
        """The wake-up signal of followers (see `wakeups`); the first call starts the source of
        other processes' commits: one per store, whatever the number of followers."""
        self._check_open("wait for events")
        with self._follow_lock:
            if self.wakeups is None:
                if self.reader.dialect.name == "sqlite":
                    self.wakeups = SqliteWatcher(self.signal, self._dedicated_connection)
                else:
                    self.wakeups = PostgresListener(self.signal, self._dedicated_connection)
                self.wakeups.start()
        return self.signal

    def _dedicated_connection(self) -> Any:
        """A driver connection of its own, outside the pool, in autocommit (for a wake-up
        source's thread)."""
        pooled = self.reader.raw_connection()
        connection = pooled.driver_connection
        pooled.detach()  # the pool forgets it: its thread closes it
        driver.set_autocommit(connection)
        return connection

    def submit(self, fn: Callable[[UnitOfWork], T], action: str = "write") -> T:
        """Run `fn` on the write path (see `WritePath.submit`); its result after the commit."""
        self._forget_parent_after_fork()
        return self.write_path.submit(fn, action)

    @contextmanager
    def writing(self, action: str = "write") -> Iterator[UnitOfWork]:
        """A write transaction of its own for a block of code; commits only if the block calls
        `uow.commit()`."""
        self._forget_parent_after_fork()
        with self.write_path.exclusive(action) as uow:
            yield uow

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside the write path's transaction (a `writing()` block, or
        a function of a batch)."""
        return self.write_path.writing_in_this_thread()

    def _check_open(self, action: str) -> None:
        if self._closed:
            raise StoreClosed(f"{action}: the store is closed")
        self._forget_parent_after_fork()

    def _forget_parent_after_fork(self) -> None:
        """In a child process after `fork` (a pid check, on every call): the inherited
        connections are the parent's; forget them without closing (closing would end the
        parent's sessions on PostgreSQL and drop its locks on SQLite), and give the write path
        a queue, locks and connection of the child's own."""
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self.reader.dispose(close=False)
            self.write_path.after_fork()
            self._follow_lock = threading.Lock()
            _INHERITED.append(self.wakeups)  # the parent's thread and connection: never closed
            self._fresh_followers()

    @contextmanager
    def _reader_connection(self, action: str) -> Iterator[sa.Connection]:
        """A reader connection, refused once the store is closed. Checked again after the
        connect: a read that began while `dispose()` ran must not bring a connection back."""
        self._check_open(action)
        with self.reader.connect() as connection:
            self._check_open(action)
            yield connection

    @contextmanager
    def reading(self, action: str = "read") -> Iterator[ReadUnitOfWork]:
        """A read-only snapshot: every query in the block sees the same committed state."""
        with (
            translate_errors(action),
            self._reader_connection(action) as connection,
            connection.begin(),
        ):
            yield ReadUnitOfWork(connection, self.options)

    @contextmanager
    def reading_one_statement(self, action: str = "read") -> Iterator[ReadUnitOfWork]:
        """For a read made of one statement, which sees one snapshot by itself: no transaction
        is opened around it (on PostgreSQL the connection is in autocommit for the block, which
        saves the BEGIN and COMMIT round trips). Use `reading()` for anything more."""
        with (
            translate_errors(action),
            self._reader_connection(action) as connection,
            driver.without_transaction(connection),
        ):
            yield ReadUnitOfWork(connection, self.options)

    def dispose(self) -> None:
        """Close the write path (queued calls fail with `StoreClosed`, one in progress is waited
        for unless this thread holds it) and every pooled connection; every later read or write
        raises `StoreClosed`. Calling it again does nothing more."""
        self._forget_parent_after_fork()
        self._closed = True
        self.signal.close()  # every follower returns
        with self._follow_lock:
            wakeups = self.wakeups
        if wakeups is not None:
            wakeups.stop()
        self.write_path.close()
        self.writer.dispose()
        self.reader.dispose()


_INHERITED: list[object] = []
