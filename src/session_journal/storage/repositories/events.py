"""The ordered log: appends with seqs from `event_sequences`, and pages by cursor."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..._validation import EncodedJson, check_json_body, require_id, require_int
from ...api_events import (
    ApiEventData,
    ApiEventFilter,
    StoredRow,
    validate_stored_body,
)
from ...config import StoreOptions
from ...errors import PermanentStorageError, SessionNotFound, UnitOfWorkEnded
from .. import driver
from ..engines import translate_errors
from ..models import (
    ApiEventRow,
    EventSequenceRow,
    SchemaCompatibilityRow,
    SessionContextRow,
    SessionRow,
    StoredType,
)
from .event_pages import API_EVENTS, checked_types, page_query, split_floor

CHANNEL = "session_journal_events"
"""The PostgreSQL notification channel of appended events (its payload: the store's schema),
which the followers' wake-up source `LISTEN`s on (`session_journal.follow.wakeups`)."""

# Statements of the hot paths, built once: building a statement and its cache key on every call
# costs more than executing it.
_TAKE_SEQS = (
    sa.update(EventSequenceRow)
    .where(EventSequenceRow.name == API_EVENTS)
    .values(
        {
            EventSequenceRow.last_seq: EventSequenceRow.last_seq
            + sa.bindparam("count", type_=sa.BigInteger)
        }
    )
    .returning(EventSequenceRow.last_seq)
)
# PostgreSQL: the statement that takes the seqs also sends the followers' `NOTIFY` (delivered
# when the transaction commits, dropped if it rolls back; see `follow.wakeups`): no round trip
# of its own. The payload is the schema, so that stores of other schemas of the database ignore it.
_NOTIFY: sa.ColumnElement[Any] = sa.literal_column(f"pg_notify('{CHANNEL}', current_schema())")
_TAKE_SEQS_PG = _TAKE_SEQS.returning(_NOTIFY)
INSERT_EVENT = sa.insert(ApiEventRow)
# PostgreSQL, where the body goes to the driver as text: cast to the column's `json`.
_INSERT_EVENT_PG = sa.insert(ApiEventRow).values(
    {
        ApiEventRow.seq: sa.bindparam("seq", type_=sa.BigInteger),
        ApiEventRow.session_id: sa.bindparam("session_id", type_=sa.Text),
        ApiEventRow.recorded_at_ms: sa.bindparam("recorded_at_ms", type_=sa.BigInteger),
        ApiEventRow.body: sa.cast(sa.bindparam("body", type_=sa.Text), sa.JSON),
        ApiEventRow.body_canonical: sa.bindparam("body_canonical", type_=sa.Boolean),
    }
)
# PostgreSQL: FOR KEY SHARE keeps the session from being deleted before the event is inserted
# at commit (on SQLite the write lock does). It is the weakest lock that does, the one the
# foreign key check takes anyway; unlike FOR SHARE it blocks no update of non-key columns.
_SESSION_EXISTS = (
    sa.select(SessionRow.session_id)
    .where(SessionRow.session_id == sa.bindparam("session_id"))
    .with_for_update(read=True, key_share=True)
)
# Several sessions at once (a batch's lone appends), locked in the order of their ids.
_SESSIONS_EXIST = (
    sa.select(SessionRow.session_id)
    .where(SessionRow.session_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(SessionRow.session_id)
    .with_for_update(read=True, key_share=True)
)
# PostgreSQL: the seq and the insert of one event in one statement (one round trip). The
# existence check (a row lock) stays a separate statement before it: a writer that waited for the
# sequence row lock re-checks its statement against the new row version, and a row-locking
# subquery in that statement then finds nothing (seen under load, also with the check in a CTE),
# so the event would be silently refused.
_taken = (
    sa.update(EventSequenceRow)
    .where(EventSequenceRow.name == API_EVENTS)
    .values({EventSequenceRow.last_seq: EventSequenceRow.last_seq + 1})
    .returning(EventSequenceRow.last_seq, _NOTIFY)
    .cte("taken")
)
_EVENT_COLUMNS = [
    ApiEventRow.seq,
    ApiEventRow.session_id,
    ApiEventRow.recorded_at_ms,
    ApiEventRow.body,
    ApiEventRow.body_canonical,
]
_APPEND_ONE = (
    sa.insert(ApiEventRow)
    .from_select(
        _EVENT_COLUMNS,
        sa.select(
            _taken.c.last_seq,
            sa.bindparam("session_id", type_=sa.Text),
            sa.bindparam("recorded_at_ms", type_=sa.BigInteger),
            sa.cast(sa.bindparam("body", type_=sa.Text), sa.JSON),
            sa.bindparam("body_canonical", type_=sa.Boolean),
        ),
    )
    .add_cte(_taken, nest_here=True)
)
# PostgreSQL: the seqs and the insert of several events in one statement, the events given as
# one array per column (their order is their seqs' order).
_events = (
    sa.func.unnest(
        sa.cast(sa.bindparam("session_ids"), postgresql.ARRAY(sa.Text)),
        sa.cast(sa.bindparam("recorded_at_ms"), postgresql.ARRAY(sa.BigInteger)),
        sa.cast(sa.bindparam("bodies"), postgresql.ARRAY(sa.Text)),
        sa.cast(sa.bindparam("canonical"), postgresql.ARRAY(sa.Boolean)),
    )
    .table_valued("session_id", "recorded_at_ms", "body", "body_canonical", with_ordinality="n")
    .render_derived(name="events")
)
_taken_many = _TAKE_SEQS_PG.cte("taken")
_APPEND_MANY = (
    sa.insert(ApiEventRow)
    .from_select(
        _EVENT_COLUMNS,
        sa.select(
            _taken_many.c.last_seq - sa.bindparam("count", type_=sa.BigInteger) + _events.c.n,
            _events.c.session_id,
            _events.c.recorded_at_ms,
            sa.cast(_events.c.body, sa.JSON),
            _events.c.body_canonical,
        ).select_from(_taken_many.join(_events, sa.true())),
    )
    .add_cte(_taken_many, nest_here=True)
)
# The most body text one `_APPEND_MANY` carries, in bytes at most (4 a character): all of a
# statement's parameters travel in one message, and PostgreSQL refuses a message over 1 GB.
APPEND_MANY_MAX_BYTES = 64 << 20


def _chunks(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`rows` cut, in order, into runs whose bodies hold at most `APPEND_MANY_MAX_BYTES` (a
    body larger than that alone in its run)."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        weight = len(row["body"]) * 4
        if chunks[-1] and size + weight > APPEND_MANY_MAX_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(row)
        size += weight
    return chunks


_IN_RANGE = (
    ApiEventRow.seq > sa.bindparam("after_seq", type_=sa.BigInteger),
    ApiEventRow.seq <= sa.bindparam("through_seq", type_=sa.BigInteger),
)
_PRESENT_AFTER = sa.select(ApiEventRow.seq).where(*_IN_RANGE)
_COUNT_BETWEEN = sa.select(sa.func.count()).select_from(ApiEventRow).where(*_IN_RANGE)
# Integer division (`//`: SQLAlchemy's `/` divides as numbers with fractions).
_MINUTE = (ApiEventRow.recorded_at_ms - sa.bindparam("since_ms", type_=sa.BigInteger)) // 60_000
_IN_MINUTES = (
    # One range of `ix_api_events_recorded_at_ms` (revision 0015).
    ApiEventRow.recorded_at_ms >= sa.bindparam("since_ms", type_=sa.BigInteger),
    ApiEventRow.recorded_at_ms < sa.bindparam("until_ms", type_=sa.BigInteger),
    # The frontier read with it: under READ COMMITTED (`uow=` on PostgreSQL) a commit between
    # the two statements must not be counted above the `as_of_seq` given with the counts.
    ApiEventRow.seq <= sa.bindparam("through_seq", type_=sa.BigInteger),
)
_MINUTE_COUNTS = (
    sa.select(_MINUTE.label("minute"), sa.func.count())
    .where(*_IN_MINUTES)
    .group_by(sa.literal_column("minute"))
)
# Of one workspace: counted per minute and session first, along the same index (SQLite's
# planner would otherwise walk a session index for each of the workspace's sessions), then the
# sessions of the workspace kept.
_BY_SESSION = (
    sa.select(
        _MINUTE.label("minute"),
        ApiEventRow.session_id.label("session_id"),
        sa.func.count().label("events"),
    )
    .where(*_IN_MINUTES)
    .group_by(sa.literal_column("minute"), ApiEventRow.session_id)
    .subquery("by_session")
)
_MINUTE_COUNTS_OF_WORKSPACE = (
    sa.select(_BY_SESSION.c.minute, sa.func.sum(_BY_SESSION.c.events))
    .join(SessionContextRow, SessionContextRow.session_id == _BY_SESSION.c.session_id)
    .where(SessionContextRow.workspace_id == sa.bindparam("workspace_id"))
    .group_by(_BY_SESSION.c.minute)
)
_LATEST_SEQ = sa.select(EventSequenceRow.last_seq).where(EventSequenceRow.name == API_EVENTS)
_PRUNED_THROUGH = sa.select(EventSequenceRow.pruned_through).where(
    EventSequenceRow.name == API_EVENTS
)
DELETED_COUNTER = "api_events_deleted"
"""The `event_sequences` row whose `last_seq` counts deletions of events: a trigger of the
database moves it whoever deletes them (revision 0008)."""
_VERSION = sa.select(
    EventSequenceRow.name, EventSequenceRow.last_seq, EventSequenceRow.pruned_through
).where(sa.or_(EventSequenceRow.name == API_EVENTS, EventSequenceRow.name == DELETED_COUNTER))
PRUNED_LEVEL = 7
"""The schema level of code that knows `pruned_through`: the first prune raises the database's
`minimum_compatible_level` to it, so that older code refuses a pruned log."""
# The floor moves up only (`pruned_through < :through`), never past the frontier.
_RAISE_FLOOR = (
    sa.update(EventSequenceRow)
    .where(EventSequenceRow.name == API_EVENTS)
    .where(EventSequenceRow.pruned_through < sa.bindparam("through", type_=sa.BigInteger))
    .where(EventSequenceRow.last_seq >= sa.bindparam("through", type_=sa.BigInteger))
    .values({EventSequenceRow.pruned_through: sa.bindparam("through", type_=sa.BigInteger)})
)
_RAISE_MINIMUM_LEVEL = (
    sa.update(SchemaCompatibilityRow)
    .where(SchemaCompatibilityRow.minimum_compatible_level < PRUNED_LEVEL)
    .values({SchemaCompatibilityRow.minimum_compatible_level: PRUNED_LEVEL})
)
# One bounded batch of the pruned prefix, oldest first (the primary key's order).
_PRUNE_BATCH = sa.delete(ApiEventRow).where(
    ApiEventRow.seq.in_(
        sa.select(ApiEventRow.seq)
        .where(ApiEventRow.seq <= sa.bindparam("through", type_=sa.BigInteger))
        .order_by(ApiEventRow.seq)
        .limit(sa.bindparam("limit", type_=sa.Integer))
        .scalar_subquery()
    )
)
# The first retained event recorded at or after a time: the prefix before it is all older.
# It walks the log in seq order from the floor and stops at the first match.
_FIRST_NOT_OLDER = (
    sa.select(ApiEventRow.seq)
    .where(ApiEventRow.seq > sa.bindparam("after_seq", type_=sa.BigInteger))
    .where(ApiEventRow.recorded_at_ms >= sa.bindparam("older_than_ms", type_=sa.BigInteger))
    .order_by(ApiEventRow.seq)
    .limit(1)
)
_COUNT_THROUGH = sa.select(sa.func.count()).where(
    ApiEventRow.seq <= sa.bindparam("through", type_=sa.BigInteger)
)
# The log's row, locked: writers that check the floor against what they write (a consumer's
# position) take it as prune's first transaction does, so one waits for the other.
_LOCK_LOG = (
    sa.select(EventSequenceRow.last_seq, EventSequenceRow.pruned_through)
    .where(EventSequenceRow.name == API_EVENTS)
    .with_for_update()
)
# When the first event after a seq was recorded: one seek of the primary key.
_RECORDED_AFTER = (
    sa.select(ApiEventRow.recorded_at_ms)
    .where(ApiEventRow.seq > sa.bindparam("after_seq", type_=sa.BigInteger))
    .order_by(ApiEventRow.seq)
    .limit(1)
)
_STORED_TYPES = sa.select(ApiEventRow.seq, StoredType(ApiEventRow.body)).where(
    ApiEventRow.seq.in_(sa.bindparam("seqs", expanding=True))
)
_by_seq = itemgetter(0)
_NO_FRONTIER = "event_sequences has no 'api_events' row: the schema is damaged"


class EventRepository:
    """The ordered log. Appends are buffered and receive their seqs in `flush`, which the unit of
    work calls just before committing: the `event_sequences` row lock that orders appenders is
    then held only for the inserts and the commit."""

    def __init__(
        self, connection: sa.Connection, max_body_bytes: int = StoreOptions.max_body_bytes
    ) -> None:
        self._connection = connection
        self._max_body_bytes = max_body_bytes
        self._pending: list[dict[str, Any]] = []
        self._sessions_seen: set[str] = set()  # known to exist in this transaction
        self._ended: str | None = None  # how the transaction ended, once it has
        self._inserted = 0  # events inserted by `flush` since the last `take_inserted`

    def end(self, reason: str) -> None:
        """The transaction is over (`reason`: how): queued events are dropped and every later
        append is refused, rather than queued for a commit that will never come."""
        self._ended = reason
        self._pending = []
        self._sessions_seen.clear()

    def check_open(self, action: str) -> None:
        """`UnitOfWorkEnded` if the transaction has ended (see `end`)."""
        if self._ended is not None:
            raise UnitOfWorkEnded(
                f"{action}: this unit of work has ended ({self._ended}); nothing was written; "
                "use a new one (store.unit_of_work(), or store.bind of the next transaction)"
            )

    def append(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        """Queue one event; `body` is its encoded JSON, which must be standard JSON (no `NaN`
        or `Infinity`) of at most the store's `max_body_bytes` and decode as an API event body.
        `InvalidRecord` otherwise, like a bad id or time; nothing is queued."""
        self.check_open("append an event")
        canonical = self._check(session_id, recorded_at_ms, body)
        self._require_session(session_id)
        self._queue(session_id, recorded_at_ms, body, canonical)

    def append_encoded(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        """`append` for a body the services encoded from a validated model (`encode_json`):
        such a body is not decoded again on the write path, nor its session checked (the
        services lock the session row first); any other text is checked as `append` checks
        it."""
        if not isinstance(body, EncodedJson):
            self.append(session_id, recorded_at_ms, body)
            return
        require_int(recorded_at_ms, "recorded_at_ms")
        self._queue(session_id, recorded_at_ms, body, True)

    def _check(self, session_id: str, recorded_at_ms: int, body: str) -> bool:
        """Check what `append` was given; whether the body is in its canonical form (see
        `ApiEventRow.body_canonical`): a body the services encoded is; a hand-written one is
        stored as given, and is only when it is exactly what its decoded body encodes to."""
        require_id(session_id, "session_id")
        require_int(recorded_at_ms, "recorded_at_ms")
        if isinstance(body, EncodedJson):
            return True
        decoded: list[ApiEventData] = []

        def validate(text: str) -> None:
            decoded.append(validate_stored_body(text))

        check_json_body(body, validate, "an API event body", self._max_body_bytes)
        return decoded[0].model_dump_json() == body

    def _require_session(self, session_id: str) -> None:
        """`SessionNotFound` now, rather than a foreign-key failure when the events are inserted
        at commit (which would fail every call of a batch, not only this one)."""
        if not self._session_exists(session_id):
            raise SessionNotFound(f"session {session_id!r} does not exist")

    def _session_exists(self, session_id: str) -> bool:
        """Whether the session exists; once it did, it stays until the transaction ends (on
        PostgreSQL its row is key-share-locked, on SQLite the write lock keeps it), so it is asked
        once per session and transaction."""
        if session_id in self._sessions_seen:
            return True
        with translate_errors("append an event"):
            found = driver.run(self._connection, _SESSION_EXISTS, {"session_id": session_id})
            if found.fetchone() is None:
                return False
        self._sessions_seen.add(session_id)
        return True

    def _queue(self, session_id: str, recorded_at_ms: int, body: str, canonical: bool) -> None:
        self.check_open("append an event")
        self._pending.append(
            {
                "session_id": session_id,
                "recorded_at_ms": recorded_at_ms,
                "body": body,
                "body_canonical": canonical,
            }
        )

    def flush(self) -> None:
        """Assign consecutive seqs to the queued events and insert them.

        `UPDATE ... RETURNING` locks the `event_sequences` row until commit, so appenders commit in
        seq order and a follower paging by cursor never skips an event that commits later with a
        lower seq; a rollback releases the seqs, leaving no hole.
        """
        if not self._pending:
            return
        count = len(self._pending)
        postgresql = self._connection.dialect.name == "postgresql"
        if count == 1 and postgresql:  # the seq and the insert in one statement
            driver.run(self._connection, _APPEND_ONE, self._pending.pop())
            self._inserted += 1
            return
        if postgresql:  # the seqs and the inserts in one statement a chunk (consecutive
            rows, self._pending = self._pending, []  # seqs: the seq row stays locked)
            for chunk in _chunks(rows):
                columns = {
                    "count": len(chunk),
                    "session_ids": [row["session_id"] for row in chunk],
                    "recorded_at_ms": [row["recorded_at_ms"] for row in chunk],
                    "bodies": [row["body"] for row in chunk],
                    "canonical": [row["body_canonical"] for row in chunk],
                }
                driver.run(self._connection, _APPEND_MANY, columns)
            self._inserted += count
            return
        take = _TAKE_SEQS_PG if postgresql else _TAKE_SEQS
        last = driver.run(self._connection, take, {"count": count}).fetchone()[0]
        for offset, row in enumerate(self._pending):
            row["seq"] = last - count + 1 + offset
        rows, self._pending = self._pending, []
        driver.run_many(self._connection, _INSERT_EVENT_PG if postgresql else INSERT_EVENT, rows)
        self._inserted += count  # counted once inserted (a failed flush inserted nothing)

    def append_if_session_exists(self, session_id: str, recorded_at_ms: int, body: str) -> bool:
        """Queue one event if its session exists; whether it did. On PostgreSQL the session row
        is key-share-locked until commit, so it cannot be deleted before the insert. `body` is
        checked as `append_encoded` checks it."""
        self.check_open("append an event")
        canonical = self._check(session_id, recorded_at_ms, body)
        if not self._session_exists(session_id):
            return False
        self._queue(session_id, recorded_at_ms, body, canonical)
        return True

    def append_if_sessions_exist(self, events: Sequence[tuple[str, int, str]]) -> list[bool]:
        """`append_if_session_exists` of each `(session_id, recorded_at_ms, body)`, in order,
        with the sessions not known yet in this transaction checked by one statement (on
        PostgreSQL key-share-locked in the order of their ids); whether each was queued."""
        self.check_open("append an event")
        canonical = [self._check(*event) for event in events]
        unknown = {session_id for session_id, _, _ in events} - self._sessions_seen
        if unknown:
            with translate_errors("append an event"):
                found = self._connection.execute(_SESSIONS_EXIST, {"ids": sorted(unknown)})
                self._sessions_seen.update(found.scalars())
        queued = []
        for (session_id, recorded_at_ms, body), flag in zip(events, canonical, strict=True):
            exists = session_id in self._sessions_seen
            if exists:
                self._queue(session_id, recorded_at_ms, body, flag)
            queued.append(exists)
        return queued

    def pending_count(self) -> int:
        """How many appended events wait for `flush`."""
        return len(self._pending)

    def mark(self) -> PendingMark:
        """The queued events as they are now, to go back to with `restore` when what follows
        is undone (a savepoint rolled back). A snapshot, not a count: a session deleted after
        the mark takes its queued events out of the queue, and undoing that delete must bring
        them back."""
        return PendingMark(tuple(self._pending), self._inserted)

    def restore(self, mark: PendingMark) -> None:
        """Go back to the queue of `mark`: the events appended since are forgotten and those
        taken out since (by a session delete that was undone) come back; what the undone work
        learnt of sessions is forgotten too (a session it deleted and then checked is back)."""
        self._pending = list(mark.rows)
        self._inserted = mark.inserted
        self._sessions_seen.clear()

    def take_inserted(self) -> int:
        """How many events `flush` inserted since the last call (those of work undone to a
        mark not counted): what a commit made now appends."""
        inserted, self._inserted = self._inserted, 0
        return inserted

    def discard_session(self, session_id: str) -> None:
        """Forget the queued events of a session deleted in this transaction: had they been
        inserted, the delete would have removed them with the session."""
        self._pending = [row for row in self._pending if row["session_id"] != session_id]
        self._sessions_seen.discard(session_id)

    def latest_seq(self) -> int:
        """The frontier: the largest seq ever assigned (deletions never lower it)."""
        row = driver.run(self._connection, _LATEST_SEQ, {}).fetchone()
        if row is None:
            raise PermanentStorageError(_NO_FRONTIER)
        return int(row[0])

    def pruned_through(self) -> int:
        """The floor of the pruned log: the highest seq pruned (0: never pruned)."""
        row = driver.run(self._connection, _PRUNED_THROUGH, {}).fetchone()
        if row is None:
            raise PermanentStorageError(_NO_FRONTIER)
        return int(row[0])

    def version(self) -> LogVersion:
        """The log's version now, by one statement: it moves with every commit that appended,
        pruned or deleted events, by any process (see `LogVersion`)."""
        rows = {row[0]: row for row in driver.run(self._connection, _VERSION, {}).fetchall()}
        frontier, counter = rows.get(API_EVENTS), rows.get(DELETED_COUNTER)
        if frontier is None or counter is None:
            raise PermanentStorageError(
                f"event_sequences lacks its {API_EVENTS!r} or {DELETED_COUNTER!r} row: the "
                "schema is damaged"
            )
        return LogVersion(int(frontier[1]), int(frontier[2]), int(counter[1]))

    def page_rows(
        self, event_filter: ApiEventFilter, after_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        """The frontier, the floor of the pruned log (`pruned_through`) and the stored rows of
        the events after `after_seq` matching the filter, ascending, at most `limit`, read by
        one statement (so from one snapshot, also outside a transaction); undecoded: pages
        decode them (`decode_events`) or write them as JSON (`event_texts`)."""
        return self._page(event_filter, {"after_seq": after_seq, "limit": limit}, before=False)

    def page_rows_before(
        self, event_filter: ApiEventFilter, before_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        """`page_rows` of the matching events below `before_seq`: the newest `limit` of them
        (the rows ascending, as `page_rows` gives them), by one statement."""
        return self._page(event_filter, {"before_seq": before_seq, "limit": limit}, before=True)

    def _page(
        self, event_filter: ApiEventFilter, params: dict[str, Any], *, before: bool
    ) -> tuple[int, int, list[StoredRow]]:
        types = checked_types(event_filter.types)
        query = page_query(
            sqlite=self._connection.dialect.name == "sqlite",
            by_session=event_filter.session_id is not None,
            by_workspace=event_filter.workspace_id is not None,
            types=len(types),
            before=before,
        )
        if event_filter.session_id is not None:
            params["session_id"] = event_filter.session_id
        if event_filter.workspace_id is not None:
            params["workspace_id"] = event_filter.workspace_id
        for tag, name in enumerate(types):
            params[f"type_{tag}"] = name
        return split_floor(driver.run(self._connection, query, params).fetchall())

    def rows_after(self, after_seq: int, limit: int) -> tuple[int, int, list[StoredRow]]:
        """The frontier, the floor of the pruned log and the stored rows (`StoredRow`) of the
        events after `after_seq`, ascending, at most `limit`, by one statement."""
        query = page_query(
            sqlite=self._connection.dialect.name == "sqlite",
            by_session=False,
            by_workspace=False,
            types=0,
        )
        params = {"after_seq": after_seq, "limit": limit}
        return split_floor(driver.run(self._connection, query, params).fetchall())

    def stored_types(self, seqs: list[int]) -> dict[int, object]:
        """The type tag of each stored event of `seqs`, as the type filter reads it
        (`StoredType`: the database's own reading of the stored JSON), for the followers'
        window, which must match exactly what a filtered page in the database matches."""
        if not seqs:
            return {}
        rows = self._connection.execute(_STORED_TYPES, {"seqs": seqs}).fetchall()
        return {int(seq): tag for seq, tag in rows}

    def prune_horizon(self, older_than_ms: int) -> int:
        """The end of the longest prefix of the log whose retained events were all recorded
        before `older_than_ms`: the seq before the first retained event recorded at or after
        it, else the frontier (every event is older). Never below the current floor. A
        horizon read once stays valid: events are never re-timed, new ones come above the
        frontier, and a deleted event only lengthens such a prefix."""
        floor = self.pruned_through()
        first = driver.run(
            self._connection, _FIRST_NOT_OLDER, {"after_seq": floor, "older_than_ms": older_than_ms}
        ).fetchone()
        horizon = self.latest_seq() if first is None else int(first[0]) - 1
        return max(horizon, floor)

    def lock_log(self) -> tuple[int, int]:
        """The frontier and the floor of the pruned log, the log's row locked until the
        transaction ends (PostgreSQL; SQLite's write transactions are one at a time): the floor
        cannot move meanwhile, and a writer that waited for the lock reads it as committed."""
        row = self._connection.execute(_LOCK_LOG).one_or_none()
        if row is None:
            raise PermanentStorageError(_NO_FRONTIER)
        return int(row[0]), int(row[1])

    def recorded_at_after(self, after_seq: int) -> int | None:
        """The `recorded_at_ms` of the first stored event after `after_seq`, or `None`."""
        row = self._connection.execute(_RECORDED_AFTER, {"after_seq": after_seq}).one_or_none()
        return None if row is None else int(row[0])

    def count_through(self, through_seq: int) -> int:
        """How many events are stored with `seq <= through_seq`."""
        row = driver.run(self._connection, _COUNT_THROUGH, {"through": through_seq}).fetchone()
        return int(row[0]) if row is not None else 0

    def raise_floor(self, through_seq: int) -> bool:
        """Record `pruned_through = through_seq` if it is above the floor and not above the
        frontier, and then raise the database's minimum compatible level to `PRUNED_LEVEL` (code
        that does not know the floor must refuse a pruned log); whether the floor moved. Runs
        before any event of the prefix is deleted, in the same transaction."""
        moved = self._connection.execute(_RAISE_FLOOR, {"through": through_seq}).rowcount
        if moved:
            self._connection.execute(_RAISE_MINIMUM_LEVEL)
        return bool(moved)

    def delete_pruned(self, through_seq: int, limit: int) -> int:
        """Delete at most `limit` events with `seq <= through_seq`, the oldest first; how many
        went. The caller records the floor first (`raise_floor`)."""
        deleted = self._connection.execute(
            _PRUNE_BATCH, {"through": through_seq, "limit": limit}
        ).rowcount
        return int(deleted)

    def present_after(self, after_seq: int, through_seq: int) -> set[int]:
        """The seqs of the events stored with `after_seq < seq <= through_seq`."""
        # On the driver's cursor (the hot-path seam), as `count_between`: the followers' window
        # reads these on moves of the wake-up signal.
        rows = driver.run(
            self._connection, _PRESENT_AFTER, {"after_seq": after_seq, "through_seq": through_seq}
        ).fetchall()
        return {row[0] for row in rows}

    def minute_counts(
        self, since_ms: int, until_ms: int, workspace_id: str | None
    ) -> tuple[int, dict[int, int]]:
        """The frontier, and how many of the events stored through it were recorded in each
        minute of `[since_ms, until_ms)` (by the minute's index from `since_ms`; minutes
        without one left out), of one workspace's sessions when `workspace_id` is given: one
        range of the index on `recorded_at_ms`, whatever order the events were stored in."""
        latest = self.version().latest_seq
        window: dict[str, object] = {
            "through_seq": latest,
            "since_ms": since_ms,
            "until_ms": until_ms,
        }
        if workspace_id is None:
            rows = self._connection.execute(_MINUTE_COUNTS, window)
        else:
            window["workspace_id"] = workspace_id
            rows = self._connection.execute(_MINUTE_COUNTS_OF_WORKSPACE, window)
        return latest, {int(minute): int(count) for minute, count in rows}

    def count_between(self, after_seq: int, through_seq: int) -> int:
        """How many events are stored with `after_seq < seq <= through_seq`."""
        row = driver.run(
            self._connection, _COUNT_BETWEEN, {"after_seq": after_seq, "through_seq": through_seq}
        ).fetchone()
        return int(row[0]) if row is not None else 0


class LogVersion(NamedTuple):
    """What changes in the log whenever a commit changes its events: the frontier (appends),
    the floor of the pruned log (prunes) and the counter of deletions (prunes, deleted
    sessions, anything else that deletes events: a trigger counts them). Each part only grows,
    so a version at least as high in every part means nothing changed since."""

    latest_seq: int
    pruned_through: int
    deletions: int

    def covers(self, other: LogVersion) -> bool:
        """Whether this version is as recent as `other` in every part."""
        return (
            self.latest_seq >= other.latest_seq
            and self.pruned_through >= other.pruned_through
            and self.deletions >= other.deletions
        )


class PendingMark(NamedTuple):
    """The queued events of a unit of work at one moment (`EventRepository.mark`)."""

    rows: tuple[dict[str, Any], ...]
    inserted: int = 0
    """How many events `flush` had inserted (see `EventRepository.take_inserted`)."""


EMPTY_MARK = PendingMark(())
"""The mark of an empty queue."""
