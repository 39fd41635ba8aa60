"""The error tree: every failure a public call reports derives from `SessionJournalError`."""

from __future__ import annotations

import datetime


class SessionJournalError(Exception):
    """Base of every error raised by session-journal."""


class SchemaOutOfDate(SessionJournalError):
    """The database has no schema or an older revision than this code's head."""


class IncompatibleSchema(SessionJournalError):
    """The database was migrated by newer code that this code may not use."""


class InvalidRecord(SessionJournalError, ValueError):
    """Bad input: a malformed id, record, body or argument. Nothing was written."""


class MigrationFailed(SessionJournalError):
    """A revision failed and was rolled back: the database is at the revision before it."""


class DataLossRefused(SessionJournalError):
    """A downgrade would lose data this database holds, and losing it was not allowed: nothing
    was changed. `current` is the database's revision, `target` the revision the downgrade aims
    at (`base`: no schema), `losses` one text per revision that would lose something
    (`"0003_checkpoint_operations: 1 open checkpoint operation ..."`). Allow it with
    `--allow-data-loss` (`session-journal db downgrade`), `allow_data_loss=True`
    (`session_journal.migrations.downgrade`) or `-x allow_data_loss=yes` (`alembic downgrade`)."""

    def __init__(self, current: str, target: str, losses: tuple[str, ...]) -> None:
        self.current = current
        self.target = target
        self.losses = losses
        super().__init__(
            f"downgrading from {current} to {target} would lose data: {'; '.join(losses)}; "
            "nothing was changed. To downgrade anyway: session-journal db downgrade "
            "--allow-data-loss, migrations.downgrade(..., allow_data_loss=True) or "
            "alembic -x allow_data_loss=yes downgrade"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.current, self.target, self.losses))


class SessionNotFound(SessionJournalError):
    """The session named by a call does not exist."""


class ConsumerNotFound(SessionJournalError):
    """The durable consumer named by a call is not registered (`store.consumers`)."""


class LeaseHeld(SessionJournalError):
    """`store.consumers.acquire` found the consumer's lease held by another holder, live until
    `expires_at_ms` (milliseconds since the epoch, by the database's clock), for longer than it
    was told to wait. `holder` names the replica that holds it."""

    def __init__(self, name: str, holder: str, expires_at_ms: int) -> None:
        self.name = name
        self.holder = holder
        self.expires_at_ms = expires_at_ms
        super().__init__(
            f"consumer {name!r} is held by {holder!r} until {_utc(expires_at_ms)} (its lease "
            "expires then unless renewed); nothing was written"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.name, self.holder, self.expires_at_ms))


class LeaseLost(SessionJournalError):
    """A consumer's lease is no longer the caller's (`store.consumers`): it expired, was
    released or was taken over by another holder (a newer generation), or the consumer is held
    by a live lease the call did not carry. Nothing was written, and a unit of work in which an
    ack was refused for this cannot commit: stop handling events, and `acquire` again."""


def _utc(ms: int) -> str:
    """A time in milliseconds since the epoch, as operators read it (UTC, to the millisecond)."""
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):  # outside the years datetime knows
        return f"{ms} ms after the epoch"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LifecycleConflict(SessionJournalError):
    """A lifecycle operation is already running for the session."""


class NotOperationOwner(SessionJournalError):
    """The caller does not own the session's open checkpoint operation."""


class ChainBroken(SessionJournalError):
    """A relay event's ordinal or digest does not follow the stored chain."""


class StorageError(SessionJournalError):
    """The database failed (unreachable, locked too long, disk full); the driver error is
    chained. Raised as one of its subclasses when the failure is known to be worth a retry
    (`TransientStorageError`) or not (`PermanentStorageError`); a plain `StorageError` is a
    failure of neither kind for certain."""


class TransientStorageError(StorageError):
    """A failure that a later attempt of the same call may not meet: the database was locked
    past the busy timeout, the connection was lost or refused, the transaction lost a deadlock
    or a serialization conflict, the server is shutting down, or the write queue stayed full.
    Nothing of the call was committed; retry it."""


class PermanentStorageError(StorageError):
    """A failure that the same call meets again until someone changes the database or the
    call: a damaged schema (a table or column missing), a damaged database file, a full disk,
    a read-only database, a value the column cannot hold. Nothing of the call was committed; do
    not retry it as it is."""


class IntegrityViolation(PermanentStorageError):
    """The caller's own statements broke a constraint of the schema (a foreign key, a unique
    key, a check), in a `unit_of_work()` block or a function run on the write path. Nothing of
    the call was committed; the same statements break it again."""


class DatabaseNotFound(PermanentStorageError):
    """There is no database at the URL: a SQLite file that does not exist (read-only commands
    and `Store.open` without `upgrade` never create one), or a PostgreSQL database the server
    does not have. Check the URL; create the database with `session-journal db upgrade` (or
    `Store.open(url, upgrade=True)`)."""


class CursorAhead(SessionJournalError):
    """`wait` or `follow` was given a cursor above the frontier: it comes from a restored backup
    or from another database, and waiting would silently skip the events that will take those
    seqs here. The client must resync (`load` keeps the seed's rule for such a cursor)."""


class CursorExpired(SessionJournalError):
    """`load`, `wait` or `follow` was given a cursor below the floor of the pruned log
    (`0 < cursor < pruned_through`): events after the cursor were pruned (`store.events.prune`),
    so the client missed some and must resync from a snapshot, then follow from a cursor at or
    above `pruned_through` (or from 0: the oldest retained event). `pruned_through` is the
    floor, `cursor` the cursor given. Holes left by deleting sessions are not expiry."""

    def __init__(self, pruned_through: int, cursor: int) -> None:
        self.pruned_through = pruned_through
        self.cursor = cursor
        super().__init__(
            f"after_seq {cursor} is below the pruned floor {pruned_through}: the events up to "
            f"seq {pruned_through} were pruned, so this client missed events; resync it from a "
            f"snapshot and follow from seq {pruned_through} (or from 0: the oldest retained "
            "event)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.pruned_through, self.cursor))


class StoreClosed(SessionJournalError):
    """The store was closed (`Store.close()`, or leaving its `with` block): every call made on
    it afterwards raises this, and nothing is read or written."""


class CallWithdrawn(SessionJournalError):
    """Raised in the caller of a call withdrawn before any batch took it (an async call
    cancelled while it waited for the write path, say): it was never written."""


class MissingDependency(SessionJournalError, ImportError):
    """An optional dependency the call needs cannot be imported (psycopg for a PostgreSQL URL):
    the message names the extra to install. Nothing was opened or written."""


class JournalDamaged(SessionJournalError):
    """A session's events file has torn or undecodable lines, so what needs every line (its
    stats) is refused; `session-journal journal verify` lists them. Nothing was stored."""


class UsageError(SessionJournalError):
    """The package was used in a way it refuses (the subclass says which); the message says
    what to do instead. The refused call wrote nothing."""


class UnitOfWorkEnded(UsageError):
    """A repository of a unit of work was used after the unit of work ended (committed, rolled
    back, or its block or batch over): use a new one (`store.unit_of_work()`, or `store.bind`
    of the next transaction)."""


class WriteInsideUnitOfWork(UsageError):
    """A write through the store was started in a thread that holds the store's write path in
    a unit of work (a `unit_of_work()` block, a function the write path runs): it would wait
    for itself; use the unit of work's repositories. Also a journal writer's flush or close in a
    thread inside any unit of work of its index's store, a bound transaction included (it
    would wait for the index): call it after that unit of work ends."""


class BoundTransactionOpen(UsageError):
    """A write through the store was started in a thread holding a transaction bound to the
    store (`store.bind`) that has not ended: pass `uow=` its unit of work, or end it first."""


class CallerCommits(UsageError):
    """`commit()` of a unit of work bound to the caller's transaction: the caller commits it
    (`Session.commit()` or `Connection.commit()`)."""


class WriterClosed(UsageError):
    """An envelope was sent to a journal writer after it was closed: open a new writer."""


class PruneRefused(UsageError):
    """`session-journal db prune` would raise `minimum_compatible_level` or delete every
    retained event, and the flag allowing it (`--allow-level-change`, `--allow-empty-log`) was
    not given: nothing was deleted."""


class ConsumerChangeRefused(UsageError):
    """`session-journal consumers reset` would skip events the consumer has not read, or
    `consumers remove` would remove one that events wait for, or either would change a
    consumer a replica holds the live lease of, and the flag allowing it (`--allow-skip`,
    `--allow-unread`, `--allow-held`) was not given: nothing was changed."""


class ReadOnlySnapshot(UsageError):
    """A write, a wait or a follow on the services of a snapshot (`store.snapshot()`), which
    only read what one moment held: make the call on the store itself."""


class SnapshotEnded(UsageError):
    """A call on a snapshot after its `with` block ended: take a new `store.snapshot()`."""


class DemoRefused(UsageError):
    """`session-journal demo` was pointed at a database holding sessions the demo did not
    create: run it on another database, or pass `--into-existing`. No demo session was
    written (the database may have been migrated first: the demo opens it with `upgrade=True`)."""
