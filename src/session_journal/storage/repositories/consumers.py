"""Durable consumers (`consumers` rows): named positions in the log that the store keeps, moved
forward by acks, and the lowest position that still holds retention back."""

from __future__ import annotations

from typing import Any, NamedTuple

import sqlalchemy as sa

from .. import driver
from ..models import ConsumerRow, EventSequenceRow, SchemaCompatibilityRow
from ._dialect import dialect_insert
from .event_pages import API_EVENTS

CONSUMERS_LEVEL = 12
"""The schema level of code that knows consumers: the first `register` raises the database's
`minimum_compatible_level` to it, so that older code, which would prune past a consumer's
position, refuses the database."""


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


_COLUMNS = (
    ConsumerRow.name,
    ConsumerRow.filter_json,
    ConsumerRow.position,
    ConsumerRow.registered_at_ms,
    ConsumerRow.last_ack_at_ms,
    ConsumerRow.max_idle_ms,
)
_GET = sa.select(*_COLUMNS).where(ConsumerRow.name == sa.bindparam("name", type_=sa.Text))
_LIST = sa.select(*_COLUMNS).order_by(ConsumerRow.name)
# Its constant in its text, so that the ack's statement binds only its arguments (`ACK_ORDER`).
_FRONTIER = (
    sa.select(EventSequenceRow.last_seq)
    .where(EventSequenceRow.name == sa.literal_column(f"'{API_EVENTS}'"))
    .scalar_subquery()
)
_SEQ = sa.bindparam("seq", type_=sa.BigInteger)
# Monotonic: a seq at or below the position moves nothing (but counts as an ack); a seq above
# the frontier matches no row (the caller says why). One statement, so atomic without a
# savepoint, and its row lock (PostgreSQL) orders concurrent acks of one consumer.
_ACK = (
    sa.update(ConsumerRow)
    .where(ConsumerRow.name == sa.bindparam("consumer", type_=sa.Text))
    .where(_SEQ <= _FRONTIER)
    .values(
        {
            ConsumerRow.position: sa.case(
                (ConsumerRow.position < _SEQ, _SEQ), else_=ConsumerRow.position
            ),
            ConsumerRow.last_ack_at_ms: sa.bindparam("acked_at_ms", type_=sa.BigInteger),
        }
    )
)
ACK_SQLITE = _ACK.returning(ConsumerRow.position)
"""SQLite's ack: a row when it matched (the consumer exists and the seq is not past the
frontier)."""
# PostgreSQL: the ack's statement also sends its `NOTIFY` (delivered at commit, dropped by a
# rollback): no round trip of its own.
_ACK_NOTIFY: sa.ColumnElement[Any] = sa.literal_column(
    f"pg_notify('{ACK_CHANNEL}', current_schema())"
)
ACK_PG = _ACK.returning(_ACK_NOTIFY)
"""PostgreSQL's ack: `ACK_SQLITE`, sending the acks' notification."""
_NOTIFY_MOVED = sa.select(_ACK_NOTIFY)
ACK_ORDER = ("seq", "seq", "acked_at_ms", "consumer", "seq")
"""The parameters of the ack's statements, in the order they appear (for `driver.Prepared`)."""
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
_RAISE_MINIMUM_LEVEL = (
    sa.update(SchemaCompatibilityRow)
    .where(SchemaCompatibilityRow.minimum_compatible_level < CONSUMERS_LEVEL)
    .values({SchemaCompatibilityRow.minimum_compatible_level: CONSUMERS_LEVEL})
)


class ConsumerRepository:
    """`consumers` rows as `StoredConsumer`s."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def get(self, name: str) -> StoredConsumer | None:
        """The consumer, or `None`."""
        row = self._connection.execute(_GET, {"name": name}).one_or_none()
        return None if row is None else StoredConsumer(*row)

    def list(self) -> list[StoredConsumer]:
        """Every consumer, by name."""
        return [StoredConsumer(*row) for row in self._connection.execute(_LIST)]

    def lock(self, name: str) -> StoredConsumer | None:
        """Like `get`, the row locked (PostgreSQL) until the transaction ends. Take the log's
        lock first (`EventRepository.lock_log`) where the floor is checked."""
        row = self._connection.execute(_GET.with_for_update(), {"name": name}).one_or_none()
        return None if row is None else StoredConsumer(*row)

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

    def ack(self, name: str, seq: int, now_ms: int) -> bool:
        """Move the consumer's position up to `seq` (never down) and record the ack's time, if
        the consumer exists and `seq` is not above the frontier; whether it did."""
        # On the driver's cursor (the hot-path seam): a projector acks in each transaction.
        connection = self._connection
        statement = ACK_PG if connection.dialect.name == "postgresql" else ACK_SQLITE
        arguments = {"consumer": name, "seq": seq, "acked_at_ms": now_ms}
        cursor = driver.run(connection, statement, arguments)
        try:
            return cursor.fetchone() is not None
        finally:
            cursor.close()

    def lowest_live(self, floor: int, now_ms: int) -> tuple[int, str] | None:
        """The lowest position of the consumers that hold retention back at `now_ms` (live,
        and not below `floor`), and the consumer's name (the first by name of a tie); `None`
        when none does."""
        row = self._connection.execute(
            _LOWEST_LIVE, {"floor": floor, "now_ms": now_ms}
        ).one_or_none()
        return None if row is None else (int(row[0]), str(row[1]))
