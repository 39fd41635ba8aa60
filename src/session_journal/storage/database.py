"""`Database`: the engines of one store, its reads and its write path."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..config import StoreOptions
from ..errors import InvalidRecord, StoreClosed
from . import bound, driver
from .counters import StoreCounters
from .engines import create_engine, translate_errors
from .loop_writes import LoopWrites
from .protocols import LoneWrite
from .snapshot import SnapshotTransactions
from .unit_of_work import LogRead, ReadUnitOfWork, UnitOfWork
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
        self.counters = StoreCounters()
        """This process's counts of the store (`store.metrics()`)."""
        self.write_path = WritePath(self.writer, options, self.counters)
        self.write_path.owner = self
        self._pid = os.getpid()
        self._closed = False
        self.loop_writes: LoopWrites | None = None
        """PostgreSQL: the lone writes an async store makes on its event loop (`loop_writes`)."""
        if self.writer.dialect.name == "postgresql":
            self.loop_writes = LoopWrites(self.writer, options, self.write_path, self.check_open)

    @property
    def dialect_name(self) -> str:
        """The database's dialect: `sqlite` or `postgresql`."""
        return str(self.reader.dialect.name)

    def on_commit(self, listener: Callable[[], None]) -> None:
        """Call `listener` right after each commit of the write path (the followers' signal,
        see `session_journal.follow`); one listener, the last one given."""
        self.write_path.after_commit = listener

    def check_followable(self, action: str) -> None:
        """`StoreClosed` once the store is closed."""
        self._check_open(action)

    def check_open(self, action: str) -> None:
        """`StoreClosed` once the store is closed."""
        self._check_open(action)

    def dedicated_connection(self) -> Any:
        """A driver connection of its own, outside the pool, in autocommit and without a
        statement timeout (for a wake-up source's thread, see `driver.prepare_for_wakeups`)."""
        pooled = self.reader.raw_connection()
        connection = pooled.driver_connection
        pooled.detach()  # the pool forgets it: its thread closes it
        driver.prepare_for_wakeups(connection)
        return connection

    def submit(
        self,
        fn: Callable[[UnitOfWork], T],
        action: str = "write",
        uow: object = None,
        *,
        solo: bool = False,
    ) -> T:
        """Run `fn` on the write path (see `WritePath.submit`, and its `solo`); its result after
        the commit. With `uow` (a service called with `uow=`), run it inside that unit of work
        instead, atomically (`UnitOfWork.run_nested`): it commits when the unit of work
        does."""
        if uow is not None:
            return self._own(uow, action).run_nested(fn, action)
        self._forget_parent_after_fork()
        return self.write_path.submit(fn, action, solo=solo)

    def submit_lone(self, write: LoneWrite[T], action: str = "write", uow: object = None) -> T:
        """Run a lone write (see `lone.py`): by itself on the write path's short path when no
        one else writes (`WritePath.submit_lone`), else in the next batch; with `uow`, inside
        that unit of work (`UnitOfWork.run_lone`)."""
        if uow is not None:
            return self._own(uow, action).run_lone(write, action)
        self._forget_parent_after_fork()
        return self.write_path.submit_lone(write, action)

    def _own(self, uow: object, action: str) -> UnitOfWork:
        """`uow` if it is a live unit of work of this store; `InvalidRecord` (not a unit of
        work, or another store's) or `UnitOfWorkEnded` (its transaction ended) otherwise."""
        self._check_open(action)
        if not isinstance(uow, UnitOfWork):
            raise InvalidRecord(
                f"{action}: uow must be a UnitOfWork (store.unit_of_work(), store.bind(), or "
                f"the argument of a run_in_unit_of_work function), got {type(uow).__name__}"
            )
        if uow.owner is not self:
            raise InvalidRecord(f"{action}: uow is a unit of work of another store")
        uow.events.check_open(action)
        return uow

    def bind(self, target: object) -> UnitOfWork:
        """A unit of work on the caller's own transaction (see `bound`)."""
        self._check_open("bind a unit of work")
        return bound.bind(target, self)

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
            self.counters.reset()  # the child's own counts

    @contextmanager
    def _reader_connection(self, action: str) -> Iterator[sa.Connection]:
        """A reader connection, refused once the store is closed. Checked again after the
        connect: a read that began while `dispose()` ran must not bring a connection back.
        One that comes back after the store closed (a read or a snapshot in progress then) is
        closed, see `_closing_if_closed`."""
        self._check_open(action)
        with (
            self.reader.connect() as connection,
            self._closing_if_closed(connection.invalidate),
        ):
            self._check_open(action)
            yield connection

    @contextmanager
    def _closing_if_closed(self, invalidate: Callable[[], None]) -> Iterator[None]:
        """Around the use of a reader connection: if the store closed meanwhile, `invalidate`
        it (SQLAlchemy's `invalidate`: its driver connection is closed now) before it goes
        back. The close disposed the reader engine, and a connection checked in afterwards
        goes to the pool it replaced, which no one ever closes: the connection would stay
        open until the garbage collector found it (psycopg warns then)."""
        try:
            yield
        finally:
            if self._closed:
                invalidate()

    @contextmanager
    def reading(
        self, action: str = "read", uow: object = None
    ) -> Iterator[ReadUnitOfWork | UnitOfWork]:
        """A read-only snapshot: every query in the block sees the same committed state. With
        `uow`, the read runs in that unit of work's transaction (and sees its work so far)."""
        if uow is not None:
            with translate_errors(action):
                yield self._own(uow, action)
            return
        with (
            translate_errors(action),
            self._reader_connection(action) as connection,
            connection.begin(),
        ):
            yield ReadUnitOfWork(connection, self.options)

    @contextmanager
    def snapshot(self) -> Iterator[tuple[SnapshotTransactions, int]]:
        """One read transaction for a block of reads (`store.snapshot()`): its `Transactions`
        and `as_of_seq`, the frontier its first read saw, which starts the snapshot (SQLite's
        deferred `BEGIN`; PostgreSQL's REPEATABLE READ). Only the opening and the first read
        are translated into `StorageError`s here: the block's own code is the caller's."""
        action = "take a snapshot"
        with ExitStack() as stack:
            with translate_errors(action):
                connection = stack.enter_context(self._reader_connection(action))
                stack.enter_context(connection.begin())
                read = ReadUnitOfWork(connection, self.options)
                as_of_seq = read.events.latest_seq()
            transactions = SnapshotTransactions(read, self.options, self._check_open, self.counters)
            try:
                yield transactions, as_of_seq
            finally:
                transactions.end()
                if os.getpid() != transactions.pid:
                    # A child after fork leaving the block: the connection and its transaction
                    # are the parent's; ending them here (or letting them be collected, which
                    # returns the connection to the pool, rolling back) would end the parent's
                    # snapshot. Kept, never closed, as the inherited wake-up sources are.
                    _INHERITED.append(stack.pop_all())

    @contextmanager
    def reading_one_statement(
        self, action: str = "read", uow: object = None
    ) -> Iterator[LogRead | ReadUnitOfWork | UnitOfWork]:
        """For a read of the log made of one statement, which sees one snapshot by itself: no
        transaction is opened around it (on PostgreSQL the connection is in autocommit for the
        block, which saves the BEGIN and COMMIT round trips), and the statement runs on the
        reader pool's driver connection without a SQLAlchemy `Connection` around it (the hot
        path's seam, `driver.pooled`: the tail reads of followers and servers come here). Use
        `reading()` for anything more. With `uow`, as `reading`."""
        if uow is not None:
            with self.reading(action, uow) as context:
                yield context
            return
        with translate_errors(action):
            self._check_open(action)
            with (
                driver.pooled(self.reader) as connection,
                self._closing_if_closed(connection.connection.invalidate),
            ):
                self._check_open(action)
                yield LogRead(connection, self.options)

    def dispose(self) -> None:
        """Close the write path (queued calls fail with `StoreClosed`, one in progress is waited
        for unless this thread holds it) and every pooled connection; every later read or write
        raises `StoreClosed`. Calling it again does nothing more."""
        self._forget_parent_after_fork()
        self._closed = True
        self.write_path.close()
        if self.loop_writes is not None:
            self.loop_writes.close()
        self.writer.dispose()
        self.reader.dispose()


_INHERITED: list[object] = []
