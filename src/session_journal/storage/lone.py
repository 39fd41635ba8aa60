"""Lone writes: calls whose statements and arguments are fixed before their transaction, handed
to the write path as data (`Transactions.submit_lone`), so that a caller alone on the write path
pays for its statements and little else.

A lone write says what to run, twice: `run(uow)`, its work on a unit of work (in a batch of the
write path, when other calls are queued or running, or inside a caller's unit of work with
`uow=`), and `run_alone(statements, cursor)`, the same work as the statements of `LoneStatements`
on the write connection's `driver.LoneCursor` (on SQLite two: the seq, taken only if the session
exists, and the insert, between `BEGIN IMMEDIATE` and `COMMIT`), which the write path runs
when it finds nobody else writing (`WritePath.submit_lone`): no batch, no unit of work or
repository, no savepoint, the statements compiled once per engine. Both produce the same rows,
seqs, notifications and results; the write path owns the transaction either way.

Which calls are lone writes: those without `uow=` whose statements and arguments do not depend
on what a read in their transaction finds, today `faults.record_startup_fault` (one event,
if its session exists) and `consumers.ack` (one statement on both backends).

On PostgreSQL a lone append is one statement, a call of the function `session_journal_append_event`
(revision 0011), sent in autocommit: one round trip (an async store sends the same statement
from its event loop, on a connection of its own: `loop_writes.py`, `run_on_loop`). The function
keeps every writer's lock order:
the session row first (`FOR KEY SHARE`: nothing is written and no seq is taken when the session
is missing; a session locked for update by another writer is waited for, as by the batch path),
the `event_sequences` row last (taken with the insert and the followers' `NOTIFY`, held to the
commit at the end of the statement). Each statement of a PL/pgSQL function takes a fresh snapshot,
so a writer that waited for a lock sees the rows as they are once it holds it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from .._validation import EncodedJson
from . import driver
from .clock import CLOCK_PARAMETER, DATABASE_CLOCK
from .models import EventSequenceRow, SessionRow
from .protocols import WriteContext
from .repositories.consumers import STATEMENTS
from .repositories.event_pages import API_EVENTS
from .repositories.events import INSERT_EVENT

APPEND_FUNCTION = "session_journal_append_event"
"""The PostgreSQL function of a lone append (revision 0011): the seq, or NULL when the session
does not exist."""

_EVENT_COLUMNS = ("seq", "session_id", "recorded_at_ms", "body", "body_canonical")
_APPEND_CALL = sa.select(
    getattr(sa.func, APPEND_FUNCTION)(
        sa.bindparam("session_id", type_=sa.Text),
        sa.bindparam("recorded_at_ms", type_=sa.BigInteger),
        sa.bindparam("body", type_=sa.Text),
        sa.bindparam("body_canonical", type_=sa.Boolean),
    )
)


# SQLite: the seq, taken only if the session exists (the write lock, held from `BEGIN
# IMMEDIATE`, keeps it from being deleted before the insert): one statement for the check and
# the seq. Its constants are in its text, so that its one parameter is the session id.
_TAKE_SEQ_IF_SESSION = (
    sa.update(EventSequenceRow)
    .where(EventSequenceRow.name == sa.literal_column(f"'{API_EVENTS}'"))
    .where(sa.exists().where(SessionRow.session_id == sa.bindparam("session_id", type_=sa.Text)))
    .values({EventSequenceRow.last_seq: EventSequenceRow.last_seq + sa.literal_column("1")})
    .returning(EventSequenceRow.last_seq)
)


class LoneStatements:
    """The statements of lone writes for one engine's dialect, compiled once (the write path
    makes them with its first lone write)."""

    __slots__ = ("ack", "ack_leased", "append_call", "insert_event", "postgresql", "take_seq")

    def __init__(self, dialect: Dialect) -> None:
        self.postgresql = dialect.name == "postgresql"
        consumers = STATEMENTS[dialect.name]
        self.ack = driver.Prepared(dialect, consumers.ack)
        self.ack_leased = driver.Prepared(dialect, consumers.ack_leased)
        if self.postgresql:
            self.append_call = driver.Prepared(dialect, _APPEND_CALL, _EVENT_COLUMNS[1:])
        else:
            self.take_seq = driver.Prepared(dialect, _TAKE_SEQ_IF_SESSION, ("session_id",))
            self.insert_event = driver.Prepared(dialect, INSERT_EVENT, _EVENT_COLUMNS)


class AppendIfSessionExists:
    """Append one event, encoded by the services, if its session exists; whether it did. A
    lone write (see the module docstring)."""

    __slots__ = ("body", "recorded_at_ms", "session_id")
    appends = True  # a true result is one event appended

    def __init__(self, session_id: str, recorded_at_ms: int, body: EncodedJson) -> None:
        """Arguments checked by the caller (`session_id` an id, `body` encoded by `encode_json`
        within the store's `max_body_bytes`)."""
        self.session_id = session_id
        self.recorded_at_ms = recorded_at_ms
        self.body = body

    def run(self, uow: WriteContext) -> bool:
        """The append on a unit of work (a batch's, or the caller's)."""
        appended = uow.events.append_if_session_exists(
            self.session_id, self.recorded_at_ms, self.body
        )
        uow.commit()
        return appended

    def run_together(
        self, writes: Sequence[AppendIfSessionExists], uow: WriteContext
    ) -> list[bool]:
        """The appends of a batch at once: their sessions checked by one statement."""
        return uow.events.append_if_sessions_exist(
            [(write.session_id, write.recorded_at_ms, write.body) for write in writes]
        )

    def run_alone(self, statements: LoneStatements, cursor: driver.LoneCursor) -> bool:
        """The append by itself, in the transaction the write path began."""
        if statements.postgresql:
            return cursor.first(statements.append_call, self._call_args())[0] is not None
        taken = cursor.first(statements.take_seq, (self.session_id,))
        if taken is None:  # no such session: no seq taken, nothing written
            return False
        cursor.run(
            statements.insert_event,
            (taken[0], self.session_id, self.recorded_at_ms, self.body, True),
        )
        return True

    async def run_on_loop(
        self, statements: LoneStatements, connection: driver.LoopConnection
    ) -> bool:
        """PostgreSQL: the append by itself on an event loop's connection (`loop_writes.py`),
        the statement `run_alone` sends, in autocommit."""
        return (await connection.first(statements.append_call, self._call_args()))[0] is not None

    def _call_args(self) -> tuple[str, int, str, bool]:
        """The arguments of the PostgreSQL function's call."""
        return (self.session_id, self.recorded_at_ms, self.body, True)


class Ack:
    """Move a durable consumer's position up to a seq (never down), recording the ack's time, if
    the lease allows it; `True` when it acked, `False` when the lease refused it (nothing
    changed), `None` when the consumer does not exist or the seq is above the frontier (the
    caller says which). A lone write: on both backends one statement (`consumers.STATEMENTS`'
    `ack` and `ack_leased`, which also notify `wait_until`'s waiters on PostgreSQL)."""

    __slots__ = ("acked_at_ms", "lease", "name", "seq")
    appends = False  # it moves a position: no event

    def __init__(
        self, name: str, seq: int, acked_at_ms: int, lease: tuple[str, int] | None = None
    ) -> None:
        """Arguments checked by the caller (`name` an id, `seq` a seq, `lease` the holder and
        generation of a lease of this consumer, or `None`)."""
        self.name = name
        self.seq = seq
        self.acked_at_ms = acked_at_ms
        self.lease = lease

    def run(self, uow: WriteContext) -> bool | None:
        """The ack on a unit of work (a batch's, or the caller's)."""
        acked = uow.consumers.ack(self.name, self.seq, self.acked_at_ms, self.lease)
        uow.commit()
        return acked

    def run_together(self, writes: Sequence[Ack], uow: WriteContext) -> list[bool | None]:
        """The acks of a batch, in order (one statement each: an ack is one already)."""
        return [
            uow.consumers.ack(write.name, write.seq, write.acked_at_ms, write.lease)
            for write in writes
        ]

    def run_alone(self, statements: LoneStatements, cursor: driver.LoneCursor) -> bool | None:
        """The ack by itself, in the transaction the write path began."""
        statement = statements.ack if self.lease is None else statements.ack_leased
        row = cursor.first(statement, statement.arguments(self._values()))
        return None if row is None else bool(row[0])

    async def run_on_loop(
        self, statements: LoneStatements, connection: driver.LoopConnection
    ) -> bool | None:
        """PostgreSQL: the ack by itself on an event loop's connection, in autocommit."""
        statement = statements.ack if self.lease is None else statements.ack_leased
        row = await connection.first(statement, statement.arguments(self._values()))
        return None if row is None else bool(row[0])

    def _values(self) -> dict[str, object]:
        """The arguments of the ack's statement, by name."""
        values: dict[str, object] = {
            "consumer": self.name,
            "seq": self.seq,
            "acked_at_ms": self.acked_at_ms,
            CLOCK_PARAMETER: DATABASE_CLOCK.argument(),
        }
        if self.lease is not None:
            values["lease_holder"], values["lease_generation"] = self.lease
        return values
