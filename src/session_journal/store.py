"""`Store`: opens the database, checks its schema and exposes the services."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from . import migrations
from .config import StoreOptions, resolve_url
from .follow.following import Following
from .migrations import SchemaStatus
from .records import StoreMetrics
from .services.activity import ActivityService
from .services.checkpoints import CheckpointService
from .services.consumers import ConsumerService
from .services.events import EventService
from .services.faults import FaultService
from .services.index import ProjectIndex
from .services.metrics import MetricsService
from .services.projection import ProjectionService
from .services.sessions import SessionService
from .storage.database import Database
from .storage.engines import check_url, require_database
from .storage.protocols import Transactions
from .storage.unit_of_work import UnitOfWork

T = TypeVar("T")


class _Reads:
    """The services that read (a `Snapshot` has these; a `Store` has them, `faults` and
    `consumers`)."""

    def __init__(self, transactions: Transactions, following: Following | None) -> None:
        self.sessions = SessionService(transactions)
        self.events = EventService(transactions, following)
        self.activity = ActivityService(transactions)
        self.checkpoints = CheckpointService(transactions)
        self.projection = ProjectionService(transactions)
        self.index = ProjectIndex(transactions)


class Store(_Reads):
    """The durable memory of a session controller. Open with `Store.open(url)`."""

    def __init__(self, url: str, database: Database, schema: SchemaStatus) -> None:
        following = Following(database)
        super().__init__(database, following)
        self.following = following
        """What following the log takes (`session_journal.follow`): the commit signal, the
        wake-up source of other processes' commits and the window of recent events, one of
        each per store, shared by every follower and stream of the process."""
        self.url = url
        self.schema = schema
        self._database = database
        self.faults = FaultService(database)
        self.consumers = ConsumerService(database, self.events.load, following)
        """Durable consumers: named positions in the log that the store keeps."""
        self._metrics = MetricsService(database, following)

    def metrics(self) -> StoreMetrics:
        """The store now, for monitoring (`StoreMetrics`): the frontier, the floor, sessions by
        state and every consumer's status from one read of the database, and this process's
        counts since the store opened (write calls and their latency, events appended,
        commits, wake-ups, followers, `CursorExpired` raised, prunes). `GET /metrics` serves
        them to Prometheus."""
        return self._metrics.read()

    @classmethod
    def open(
        cls, url: str | None = None, *, upgrade: bool = False, options: StoreOptions | None = None
    ) -> Store:
        """Open the database at `url` (else `SESSION_JOURNAL_DATABASE_URL`, else
        `sqlite:///session-journal.db`).

        Raises `SchemaOutOfDate` for an empty or older database unless `upgrade=True` migrates it
        first, and `IncompatibleSchema` for a database migrated by newer, incompatible code.
        Without `upgrade` a missing database is `DatabaseNotFound` (a SQLite file is never
        created then); with it, a SQLite file is created.
        """
        url = check_url(resolve_url(url))
        options = options or StoreOptions.from_env()
        if not upgrade:  # never create a database that is not there
            require_database(url)
        database = Database(url, options)
        try:
            if upgrade:  # read and judged on the reader, migrated on one engine of its own
                schema = migrations.upgrade_for_store(url, options, database.reader)
            else:
                schema = migrations.verify(database.reader)
        except BaseException:
            database.dispose()
            raise
        return cls(url, database, schema)

    def close(self) -> None:
        """Release every connection. Every call on the store afterwards (any service, a unit of
        work) raises `StoreClosed`; closing again does nothing. A write in progress in another
        thread finishes first."""
        self.following.close()  # every follower returns
        self._database.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({sa.make_url(self.url).render_as_string(hide_password=True)!r})"

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """A block of reads that all see one moment of the database: `snapshot.as_of_seq` is
        the frontier of that moment, and the snapshot's services (`sessions`, `events`,
        `activity`, `checkpoints`, `projection`, `index`) read what it held, whatever commits
        meanwhile, on one reader connection (held until the block ends; keep it short). Their
        writes, waits and follows raise `ReadOnlySnapshot`; any call after the block,
        `SnapshotEnded`. A server answers a list and its details from one snapshot, with
        `as_of_seq` for the client to follow the log from."""
        with self._database.snapshot() as (transactions, as_of_seq):
            yield Snapshot(transactions, as_of_seq)

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """A write transaction of its own on the store's write path, for work the services do
        not cover, or several service calls made atomic together (`uow=uow`). Call
        `uow.commit()`; leaving the block without it rolls back. The block runs the caller's
        code inside the transaction, so it never joins a batch of other calls: it waits for its
        turn in the queue, then holds the write path until it ends."""
        with self._database.writing("unit of work") as uow:
            yield uow

    def bind(self, connection_or_session: sa.Connection | Session) -> UnitOfWork:
        """A unit of work on the caller's own transaction, for writing the caller's rows and
        this store's atomically (the transactional outbox): a SQLAlchemy `Connection` or ORM
        `Session` of the store's database. Pass it to services (`uow=`) or use its
        repositories; the caller commits or rolls back its transaction as usual, and the
        appended events take their seqs at that commit. Binding the same transaction again
        gives the same unit of work; once the transaction ends the unit of work refuses further
        use. On SQLite, binding a connection outside a transaction begins one with
        `BEGIN IMMEDIATE` (the write lock, now). See the docs, "Composing transactions"."""
        return self._database.bind(connection_or_session)

    def run_in_unit_of_work(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run `fn(uow)` on the write path and return its result, as the services do: it joins
        the next batch (group commit) in its own savepoint. Its work is kept only if it calls
        `uow.commit()` (which then commits with the batch, before this returns); an exception
        of `fn` undoes its work and is raised here. `fn` runs on whichever thread leads the
        batch: keep it short and free of waits."""
        return self._database.submit(fn, getattr(fn, "__name__", "unit of work"))


class Snapshot(_Reads):
    """The reads of one moment of the database (`Store.snapshot()`): the store's services, read
    only, every call in the snapshot's one transaction; `as_of_seq`, the frontier it saw."""

    def __init__(self, transactions: Transactions, as_of_seq: int) -> None:
        super().__init__(transactions, None)  # nothing commits into a snapshot
        self.as_of_seq = as_of_seq
        """The frontier of the snapshot: every event up to it is in it, none after."""

    def __repr__(self) -> str:
        return f"Snapshot(as_of_seq={self.as_of_seq})"
