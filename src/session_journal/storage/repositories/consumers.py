"""Durable consumers (`consumers` rows): named positions in the log that the store keeps, moved
forward by acks, and the lowest position that still holds retention back."""

from __future__ import annotations

import builtins
from typing import Any, NamedTuple, cast

import sqlalchemy as sa

from .. import driver
from ..clock import CLOCK_PARAMETER, DATABASE_CLOCK, now_ms
from ..models import ApiEventRow, ConsumerRow, EventSequenceRow, SchemaCompatibilityRow
from ._dialect import dialect_insert
from .event_pages import API_EVENTS

CONSUMERS_LEVEL = 12
"""The schema level of code that knows consumers: the first `register` raises the database's
`minimum_compatible_level` to it, so that older code, which would prune past a consumer's
position, refuses the database."""
LEASES_LEVEL = 13
"""The schema level of code that knows leases: the first `acquire` raises the minimum compatible
level to it (older code would ack without looking at the lease)."""


ACK_CHANNEL = "session_journal_acks"
"""The PostgreSQL notification channel of consumers' acks (its payload: the store's schema):
`wait_until` is woken by it, and the followers are not (`session_journal.follow.wakeups`)."""


class StoredConsumer(NamedTuple):
    """A `consumers` row as stored."""

    name: str
    filter_json: str
    position: int
    registered_at_ms: int
    last_ack_at_ms: int | None
    max_idle_ms: int | None
    holder: str | None = None
    generation: int = 0
    lease_expires_at_ms: int | None = None
    stuck_after_ms: int = 300_000


class LeaseTaken(NamedTuple):
    """A lease `ConsumerRepository.acquire` took or `renew` extended."""

    generation: int
    expires_at_ms: int


class LeaseHolder(NamedTuple):
    """Who holds a consumer's lease, until when, and the database's time of the read."""

    holder: str | None
    generation: int
    expires_at_ms: int | None
    now_ms: int


_COLUMNS = (
    ConsumerRow.name,
    ConsumerRow.filter_json,
    ConsumerRow.position,
    ConsumerRow.registered_at_ms,
    ConsumerRow.last_ack_at_ms,
    ConsumerRow.max_idle_ms,
    ConsumerRow.holder,
    ConsumerRow.generation,
    ConsumerRow.lease_expires_at_ms,
    ConsumerRow.stuck_after_ms,
)
_GET = sa.select(*_COLUMNS).where(ConsumerRow.name == sa.bindparam("name", type_=sa.Text))
_LIST = sa.select(*_COLUMNS).order_by(ConsumerRow.name)
# Each consumer with the time of the first event after its position: one index probe of the
# log's primary key a consumer, in the same statement (`store.metrics()` reads it per scrape).
_NEXT_RECORDED = (
    sa.select(ApiEventRow.recorded_at_ms)
    .where(ApiEventRow.seq > ConsumerRow.position)
    .order_by(ApiEventRow.seq)
    .limit(1)
    .correlate(ConsumerRow)
    .scalar_subquery()
)
_LIST_WITH_NEXT = sa.select(*_COLUMNS, _NEXT_RECORDED).order_by(ConsumerRow.name)
# Its constant in its text, so that the ack's statement binds only its arguments.
_FRONTIER = (
    sa.select(EventSequenceRow.last_seq)
    .where(EventSequenceRow.name == sa.literal_column(f"'{API_EVENTS}'"))
    .scalar_subquery()
)
_SEQ = sa.bindparam("seq", type_=sa.BigInteger)
_NAME = sa.bindparam("consumer", type_=sa.Text)
_HOLDER = sa.bindparam("lease_holder", type_=sa.Text)
_GENERATION = sa.bindparam("lease_generation", type_=sa.BigInteger)
_TTL_MS = sa.bindparam("ttl_ms", type_=sa.BigInteger)
# PostgreSQL: an ack's statement also sends its `NOTIFY` (delivered at commit, dropped by a
# rollback): no round trip of its own.
_ACK_NOTIFY: sa.ColumnElement[Any] = sa.literal_column(
    f"pg_notify('{ACK_CHANNEL}', current_schema())"
)
_NOTIFY_MOVED = sa.select(_ACK_NOTIFY)


def _clock(dialect_name: str) -> sa.ColumnElement[Any]:
    """The time a statement of this module reads, once per statement: SQLite's `'now'` is one
    value for the whole statement; PostgreSQL's `clock_timestamp()` moves as the statement runs,
    so it is read once in a subquery the statement joins (`UPDATE ... FROM`)."""
    if dialect_name != "postgresql":
        return now_ms(dialect_name)
    return sa.select(now_ms(dialect_name).label("now_ms")).subquery("lease_clock").c.now_ms


class _Statements:
    """The statements of consumers that read the database's clock, for one dialect."""

    def __init__(self, dialect_name: str) -> None:
        postgresql = dialect_name == "postgresql"
        notify = [_ACK_NOTIFY] if postgresql else []
        now = _clock(dialect_name)
        # A lease is live until it expires; released, it has no expiry (nor holder). Written
        # without IS NULL: SQLite 3.40's RETURNING reads `column IS NULL` of a column the
        # UPDATE leaves alone as false (the ack returns the check).
        expires = sa.func.coalesce(ConsumerRow.lease_expires_at_ms, sa.literal_column("0"))
        live = expires > now
        unheld = expires <= now
        carried = sa.and_(
            ConsumerRow.generation == _GENERATION, ConsumerRow.holder == _HOLDER, live
        )
        self.ack = _ack(unheld, notify)
        self.ack_leased = _ack(carried, notify)
        named = ConsumerRow.name == _NAME
        self.acquire = (
            sa.update(ConsumerRow)
            .where(named, sa.or_(unheld, ConsumerRow.holder == _HOLDER))
            .values(
                {
                    ConsumerRow.holder: _HOLDER,
                    ConsumerRow.generation: ConsumerRow.generation + sa.literal_column("1"),
                    ConsumerRow.lease_expires_at_ms: now + _TTL_MS,
                }
            )
            .returning(ConsumerRow.generation, ConsumerRow.lease_expires_at_ms)
        )
        self.holder = sa.select(  # one row: its clock is read once without a subquery
            ConsumerRow.holder,
            ConsumerRow.generation,
            ConsumerRow.lease_expires_at_ms,
            now_ms(dialect_name),
        ).where(named)
        self.renew = (
            sa.update(ConsumerRow)
            .where(named, carried)
            .values({ConsumerRow.lease_expires_at_ms: now + _TTL_MS})
            .returning(ConsumerRow.lease_expires_at_ms)
        )


def _ack(lease_ok: sa.ColumnElement[bool], notify: list[Any]) -> sa.Update:
    """An ack whose lease is checked by `lease_ok`. Monotonic: a seq at or below the position
    moves nothing (but counts as an ack); a seq above the frontier matches no row (the caller
    says why); an ack the lease refuses changes nothing and returns false. One statement, so
    atomic without a savepoint, and its row lock (PostgreSQL) orders concurrent acks of one
    consumer and a lease taken meanwhile."""
    ok = sa.func.coalesce(lease_ok, sa.false())
    return (
        sa.update(ConsumerRow)
        .where(ConsumerRow.name == _NAME)
        .where(_SEQ <= _FRONTIER)
        .values(
            {
                ConsumerRow.position: sa.case(
                    (sa.and_(ok, ConsumerRow.position < _SEQ), _SEQ), else_=ConsumerRow.position
                ),
                ConsumerRow.last_ack_at_ms: sa.case(
                    (ok, sa.bindparam("acked_at_ms", type_=sa.BigInteger)),
                    else_=ConsumerRow.last_ack_at_ms,
                ),
            }
        )
        .returning(ok, *notify)
    )


STATEMENTS = {name: _Statements(name) for name in ("sqlite", "postgresql")}
"""The statements of consumers that read the database's clock, by dialect name: among them
the ack (`ack`, `ack_leased`), which on PostgreSQL also sends the acks' notification."""
_NOW_MS = sa.bindparam("now_ms", type_=sa.BigInteger)
# A consumer holds retention back while it is live: it has no `max_idle_ms`, or it acked (or
# registered, or was reset) within it; and while its position is not below the floor (one that
# is has expired already: its next read raises `CursorExpired`).
_LOWEST_LIVE = (
    sa.select(ConsumerRow.position, ConsumerRow.name)
    .where(ConsumerRow.position >= sa.bindparam("floor", type_=sa.BigInteger))
    .where(
        sa.or_(
            ConsumerRow.max_idle_ms.is_(None),
            sa.func.coalesce(ConsumerRow.last_ack_at_ms, ConsumerRow.registered_at_ms)
            + ConsumerRow.max_idle_ms
            >= _NOW_MS,
        )
    )
    .order_by(ConsumerRow.position, ConsumerRow.name)
    .limit(1)
)
_RAISE_TO_LEASES_LEVEL = (
    sa.update(SchemaCompatibilityRow)
    .where(SchemaCompatibilityRow.minimum_compatible_level < LEASES_LEVEL)
    .values({SchemaCompatibilityRow.minimum_compatible_level: LEASES_LEVEL})
)
_RAISE_MINIMUM_LEVEL = (
    sa.update(SchemaCompatibilityRow)
    .where(SchemaCompatibilityRow.minimum_compatible_level < CONSUMERS_LEVEL)
    .values({SchemaCompatibilityRow.minimum_compatible_level: CONSUMERS_LEVEL})
)


def _clock_argument() -> dict[str, int | None]:
    """The clock's parameter of a statement that reads it (`storage/clock.py`)."""
    return {CLOCK_PARAMETER: DATABASE_CLOCK.argument()}


class ConsumerRepository:
    """`consumers` rows as `StoredConsumer`s."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def get(self, name: str) -> StoredConsumer | None:
        """The consumer, or `None`."""
        row = self._connection.execute(_GET, {"name": name}).one_or_none()
        return None if row is None else StoredConsumer._make(row)

    def list(self) -> list[StoredConsumer]:
        """Every consumer, by name."""
        return [StoredConsumer._make(row) for row in self._connection.execute(_LIST)]

    def list_with_next(self) -> builtins.list[tuple[StoredConsumer, int | None]]:
        """Every consumer, by name, with the `recorded_at_ms` of the first stored event after
        its position (`None`: none), by one statement."""
        return [
            (StoredConsumer._make(row[:-1]), None if row[-1] is None else int(row[-1]))
            for row in self._connection.execute(_LIST_WITH_NEXT)
        ]

    def lock(self, name: str) -> StoredConsumer | None:
        """Like `get`, the row locked (PostgreSQL) until the transaction ends. Take the log's
        lock first (`EventRepository.lock_log`) where the floor is checked."""
        row = self._connection.execute(_GET.with_for_update(), {"name": name}).one_or_none()
        return None if row is None else StoredConsumer._make(row)

    def insert(self, consumer: StoredConsumer) -> bool:
        """Add a consumer unless one of its name exists (one registered meanwhile: a
        concurrent insert is waited for), and then raise the database's minimum compatible
        level to `CONSUMERS_LEVEL` (older code would prune past its position); whether it was
        added."""
        statement = dialect_insert(self._connection, ConsumerRow).values(consumer._asdict())
        # RETURNING, not `rowcount`: psycopg reports -1 for an INSERT ... ON CONFLICT.
        inserted = statement.on_conflict_do_nothing().returning(ConsumerRow.name)
        if self._connection.execute(inserted).first() is None:
            return False
        self._connection.execute(_RAISE_MINIMUM_LEVEL)
        return True

    def notify_moved(self) -> None:
        """PostgreSQL: tell other processes' `wait_until` that a position moved (a reset, a
        removal), as an ack's statement does: `NOTIFY` on `ACK_CHANNEL`, sent at commit.
        SQLite's watcher sees every commit: nothing to send."""
        if self._connection.dialect.name == "postgresql":
            self._connection.execute(_NOTIFY_MOVED)

    def delete(self, name: str) -> bool:
        """Remove the consumer; whether it existed."""
        deleted = self._connection.execute(sa.delete(ConsumerRow).where(ConsumerRow.name == name))
        return bool(deleted.rowcount)

    def set_position(self, name: str, position: int, now_ms: int) -> None:
        """Move the consumer to `position`, back or forward (a reset: it counts as an ack for
        `max_idle_ms`)."""
        self._connection.execute(
            sa.update(ConsumerRow)
            .where(ConsumerRow.name == name)
            .values({ConsumerRow.position: position, ConsumerRow.last_ack_at_ms: now_ms})
        )

    def ack(
        self, name: str, seq: int, now_ms: int, lease: tuple[str, int] | None = None
    ) -> bool | None:
        """Move the consumer's position up to `seq` (never down) and record the ack's time, if
        the consumer exists, `seq` is not above the frontier and the lease allows it: `lease`
        (holder, generation) must be the consumer's live lease; without one, no lease may be
        live. `True` when it acked, `False` when the lease refused it (nothing changed), `None`
        when no consumer of that name has `seq` at or below the frontier."""
        # On the driver's cursor (the hot-path seam): a projector acks in each transaction.
        connection = self._connection
        statements = STATEMENTS[connection.dialect.name]
        arguments: dict[str, Any] = {
            "consumer": name,
            "seq": seq,
            "acked_at_ms": now_ms,
            CLOCK_PARAMETER: DATABASE_CLOCK.argument(),
        }
        if lease is None:
            statement = statements.ack
        else:
            statement = statements.ack_leased
            arguments["lease_holder"], arguments["lease_generation"] = lease
        cursor = driver.run(connection, statement, arguments)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else bool(row[0])

    def acquire(self, name: str, holder: str, ttl_ms: int) -> LeaseTaken | None:
        """Take the consumer's lease for `holder` for `ttl_ms` by the database's clock, a new
        generation, unless another holder's lease is live; `None` if it is (or no consumer has
        that name: `holder_of` says which). The first lease raises the database's minimum
        compatible level to `LEASES_LEVEL`."""
        row = self._connection.execute(
            STATEMENTS[self._connection.dialect.name].acquire,
            {"consumer": name, "lease_holder": holder, "ttl_ms": ttl_ms, **_clock_argument()},
        ).first()
        if row is None:
            return None
        self._connection.execute(_RAISE_TO_LEASES_LEVEL)
        return LeaseTaken(int(row[0]), int(cast(int, row[1])))

    def holder_of(self, name: str) -> LeaseHolder | None:
        """Who holds the consumer's lease and until when (expired or not), with the database's
        time of the read; `None` if no consumer has that name."""
        row = self._connection.execute(
            STATEMENTS[self._connection.dialect.name].holder,
            {"consumer": name, **_clock_argument()},
        ).first()
        return None if row is None else LeaseHolder(row[0], int(row[1]), row[2], int(row[3]))

    def renew(self, name: str, holder: str, generation: int, ttl_ms: int) -> int | None:
        """Extend the live lease (`holder`, `generation`) to `ttl_ms` from now; its new expiry,
        or `None` when it is not live (expired, released, taken over, or the consumer gone)."""
        row = self._connection.execute(
            STATEMENTS[self._connection.dialect.name].renew,
            {
                "consumer": name,
                "lease_holder": holder,
                "lease_generation": generation,
                "ttl_ms": ttl_ms,
                **_clock_argument(),
            },
        ).first()
        return None if row is None else int(cast(int, row[0]))

    def release(self, name: str, holder: str, generation: int) -> bool:
        """End the lease (`holder`, `generation`) if it is still the consumer's, expired or
        not (the generation stays); whether it was."""
        released = self._connection.execute(
            sa.update(ConsumerRow)
            .where(
                ConsumerRow.name == name,
                ConsumerRow.holder == holder,
                ConsumerRow.generation == generation,
            )
            .values({ConsumerRow.holder: None, ConsumerRow.lease_expires_at_ms: None})
            .returning(ConsumerRow.name)
        ).first()
        return released is not None

    def lowest_live(self, floor: int, now_ms: int) -> tuple[int, str] | None:
        """The lowest position of the consumers that hold retention back at `now_ms` (live,
        and not below `floor`), and the consumer's name (the first by name of a tie); `None`
        when none does."""
        row = self._connection.execute(
            _LOWEST_LIVE, {"floor": floor, "now_ms": now_ms}
        ).one_or_none()
        return None if row is None else (int(row[0]), str(row[1]))
