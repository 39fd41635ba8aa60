"""Repositories: the only code that builds queries. They receive a connection from the unit of
work, speak domain types, and never begin, commit or close anything."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .events import EVENT_LIST, ApiEvent, ApiEventFilter, decode_body
from .models import Base
from .records import CheckpointMetadata, SessionRecord, SessionState

_sessions = Base.metadata.tables["sessions"]
_contexts = Base.metadata.tables["session_contexts"]
_checkpoints = Base.metadata.tables["session_checkpoints"]
_events = Base.metadata.tables["api_events"]
_sequences = Base.metadata.tables["event_sequences"]
_activity = Base.metadata.tables["api_session_activity"]

API_EVENTS = "api_events"


def _upsert(
    connection: sa.Connection,
    table: sa.Table,
    values: dict[str, Any],
    also: dict[str, Any] | None = None,
) -> None:
    """Insert a row or update it in place by primary key (`also`: extra columns to set on
    update). Never delete-and-insert (nor SQLite's INSERT OR REPLACE): a delete fires
    ON DELETE CASCADE and would erase the session's events."""
    keys = [column.name for column in table.primary_key]
    if connection.dialect.name == "postgresql":
        pg = postgresql.insert(table).values(values)
        updates = {key: pg.excluded[key] for key in values if key not in keys}
        statement: sa.Executable = pg.on_conflict_do_update(
            index_elements=keys, set_=updates | (also or {})
        )
    else:
        lite = sqlite.insert(table).values(values)
        updates = {key: lite.excluded[key] for key in values if key not in keys}
        statement = lite.on_conflict_do_update(index_elements=keys, set_=updates | (also or {}))
    connection.execute(statement)


class SessionRepository:
    """Sessions with their workspace context and checkpoint metadata."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    _select = (
        sa.select(
            _sessions.c.session_id,
            _sessions.c.project_id,
            _contexts.c.workspace_id,
            _sessions.c.state,
            _sessions.c.native_session_id,
            _sessions.c.last_error,
            _sessions.c.last_checkpoint_error,
            _checkpoints.c.archive_path,
            _checkpoints.c.sha256,
            _checkpoints.c.created_at,
            _checkpoints.c.event_frontier,
        )
        .select_from(_sessions)
        .outerjoin(_contexts, _contexts.c.session_id == _sessions.c.session_id)
        .outerjoin(_checkpoints, _checkpoints.c.session_id == _sessions.c.session_id)
    )

    def get(self, session_id: str) -> SessionRecord | None:
        """The session, or `None`."""
        row = self._connection.execute(
            self._select.where(_sessions.c.session_id == session_id)
        ).one_or_none()
        return None if row is None else _record(row)

    def list(self, *, workspace_id: str | None, project_id: str | None) -> list[SessionRecord]:
        """Sessions matching both optional filters, by id."""
        query = self._select.order_by(_sessions.c.session_id)
        if workspace_id is not None:
            query = query.where(_contexts.c.workspace_id == workspace_id)
        if project_id is not None:
            query = query.where(_sessions.c.project_id == project_id)
        return [_record(row) for row in self._connection.execute(query)]

    def lock(self, session_id: str) -> tuple[bool, str | None]:
        """Whether the session exists and its stored `last_error`, locking the row (PostgreSQL)
        until the transaction ends, so concurrent saves compare against committed state."""
        row = self._connection.execute(
            sa.select(_sessions.c.last_error)
            .where(_sessions.c.session_id == session_id)
            .with_for_update()
        ).one_or_none()
        return (False, None) if row is None else (True, row.last_error)

    def exists(self, session_id: str) -> bool:
        """Whether the session exists; on PostgreSQL the row is share-locked until the end of the
        transaction, so it cannot be deleted between this check and an append."""
        query = (
            sa.select(_sessions.c.session_id)
            .where(_sessions.c.session_id == session_id)
            .with_for_update(read=True)
        )
        return self._connection.execute(query).first() is not None

    def lock_existing(self, session_ids: Collection[str]) -> set[str]:
        """Which of the sessions exist, locking their rows (PostgreSQL) in id order.

        Every writer that touches several sessions locks them in the same order first, so two
        transactions that update the same sessions' rows cannot deadlock.
        """
        query = (
            sa.select(_sessions.c.session_id)
            .where(_sessions.c.session_id.in_(sorted(set(session_ids))))
            .order_by(_sessions.c.session_id)
            .with_for_update()
        )
        return set(self._connection.execute(query).scalars())

    def upsert(self, record: SessionRecord) -> None:
        """Insert or update the session, its context and its checkpoint metadata in place."""
        values = _lifecycle(record) | {
            "session_id": record.id,
            "project_id": record.project_id,
            "native_session_id": record.native_session_id,
        }
        _upsert(self._connection, _sessions, values, {"updated_at": sa.func.current_timestamp()})
        _upsert(
            self._connection,
            _contexts,
            {"session_id": record.id, "workspace_id": record.workspace_id},
        )
        self.replace_checkpoint(record.id, record.checkpoint)

    def replace_checkpoint(self, session_id: str, checkpoint: CheckpointMetadata | None) -> None:
        """Store the checkpoint metadata; `None` removes it."""
        if checkpoint is None:
            self._connection.execute(
                sa.delete(_checkpoints).where(_checkpoints.c.session_id == session_id)
            )
            return
        _upsert(
            self._connection, _checkpoints, checkpoint.model_dump() | {"session_id": session_id}
        )

    def update_lifecycle(self, record: SessionRecord) -> bool:
        """Update `state`, `last_error` and `last_checkpoint_error`; whether the session existed."""
        result = self._connection.execute(
            sa.update(_sessions)
            .where(_sessions.c.session_id == record.id)
            .values(_lifecycle(record) | {"updated_at": sa.func.current_timestamp()})
        )
        return result.rowcount > 0

    def delete(self, session_id: str) -> bool:
        """Delete the session and, by cascade, everything that belongs to it."""
        result = self._connection.execute(
            sa.delete(_sessions).where(_sessions.c.session_id == session_id)
        )
        return result.rowcount > 0


def _lifecycle(record: SessionRecord) -> dict[str, Any]:
    return {
        "state": record.state.value,
        "last_error": record.last_error,
        "last_checkpoint_error": record.last_checkpoint_error,
    }


def _record(row: Any) -> SessionRecord:
    checkpoint = None
    if row.archive_path is not None:
        checkpoint = CheckpointMetadata(
            archive_path=row.archive_path,
            sha256=row.sha256,
            created_at=row.created_at,
            event_frontier=row.event_frontier,
        )
    # Stored rows were validated when written; construct without re-running the id rules.
    return SessionRecord.model_construct(
        id=row.session_id,
        project_id=row.project_id,
        workspace_id=row.workspace_id if row.workspace_id is not None else "default",
        state=SessionState(row.state),
        native_session_id=row.native_session_id,
        last_error=row.last_error,
        last_checkpoint_error=row.last_checkpoint_error,
        checkpoint=checkpoint,
    )


def _page_query(*, by_session: bool, by_workspace: bool) -> sa.Select[Any]:
    # One statement per filter combination, so each gets its own plan: a generic
    # `(:sid IS NULL OR session_id = :sid)` keeps SQLite off the (session_id, seq) index, and the
    # workspace filter is a semi-join (IN) so both backends walk events in seq order instead of
    # sorting the join.
    query = sa.select(
        _events.c.seq, _events.c.session_id, _events.c.recorded_at_ms, _events.c.body
    ).where(_events.c.seq > sa.bindparam("after_seq"))
    if by_session:
        query = query.where(_events.c.session_id == sa.bindparam("session_id"))
    if by_workspace:
        # A correlated EXISTS, not IN (subquery): with IN, SQLite reads every event of the
        # workspace's sessions through the (session_id, seq) index and sorts them all on each
        # page; with EXISTS it walks the log in seq order and stops when the page is full.
        in_workspace = (
            sa.select(_contexts.c.session_id)
            .where(_contexts.c.session_id == _events.c.session_id)
            .where(_contexts.c.workspace_id == sa.bindparam("workspace_id"))
        )
        query = query.where(in_workspace.exists())
    return query.order_by(_events.c.seq).limit(sa.bindparam("limit"))


_PAGE_QUERIES = {
    (by_session, by_workspace): _page_query(by_session=by_session, by_workspace=by_workspace)
    for by_session in (False, True)
    for by_workspace in (False, True)
}


class EventRepository:
    """The ordered log. Appends are buffered and receive their seqs in `flush`, which the unit of
    work calls just before committing: the `event_sequences` row lock that orders appenders is
    then held only for the inserts and the commit."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection
        self._pending: list[dict[str, Any]] = []

    def append(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        """Queue one event; `body` is its encoded JSON."""
        self._pending.append(
            {"session_id": session_id, "recorded_at_ms": recorded_at_ms, "body": body}
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
        last = self._connection.execute(
            sa.update(_sequences)
            .where(_sequences.c.name == API_EVENTS)
            .values(last_seq=_sequences.c.last_seq + count)
            .returning(_sequences.c.last_seq)
        ).scalar_one()
        for offset, row in enumerate(self._pending):
            row["seq"] = last - count + 1 + offset
        rows, self._pending = self._pending, []
        self._connection.execute(sa.insert(_events), rows if len(rows) > 1 else rows[0])

    def latest_seq(self) -> int:
        """The frontier: the largest seq ever assigned (deletions never lower it)."""
        latest: int = self._connection.execute(
            sa.select(_sequences.c.last_seq).where(_sequences.c.name == API_EVENTS)
        ).scalar_one()
        return latest

    def page(self, event_filter: ApiEventFilter, after_seq: int, limit: int) -> list[ApiEvent]:
        """Events after `after_seq` matching the filter, ascending, at most `limit`."""
        query = _PAGE_QUERIES[
            (event_filter.session_id is not None, event_filter.workspace_id is not None)
        ]
        params: dict[str, Any] = {"after_seq": after_seq, "limit": limit}
        if event_filter.session_id is not None:
            params["session_id"] = event_filter.session_id
        if event_filter.workspace_id is not None:
            params["workspace_id"] = event_filter.workspace_id
        rows = self._connection.execute(query, params).all()
        return _decode_page(rows)


_quote = lru_cache(maxsize=4096)(json.dumps)


def _decode_page(rows: Sequence[Any]) -> list[ApiEvent]:
    # Fast path: the page as one JSON document validated by pydantic-core in one call (several
    # times faster than a model per row). A body that does not decode, or text that does not
    # frame as exactly these rows, falls back to row-by-row decoding, where an undecodable body
    # becomes a LegacyNotice instead of failing the page.
    text = (
        "["
        + ",".join(
            f'{{"seq":{seq},"session_id":{_quote(session_id)},"recorded_at_ms":{at},"event":{body}}}'
            for seq, session_id, at, body in rows
        )
        + "]"
    )
    try:
        events = EVENT_LIST.validate_json(text)
        if [event.seq for event in events] == [row[0] for row in rows]:
            return events
    except ValueError:
        pass
    return [
        ApiEvent(seq=seq, session_id=session_id, recorded_at_ms=at, event=decode_body(body))
        for seq, session_id, at, body in rows
    ]


class ActivityRepository:
    """The latest activity snapshot per session, stored as canonical JSON."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def get(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or `None`."""
        return self._connection.execute(
            sa.select(_activity.c.body).where(_activity.c.session_id == session_id)
        ).scalar_one_or_none()

    def put(self, session_id: str, body: str) -> None:
        """Insert or replace the snapshot."""
        _upsert(self._connection, _activity, {"session_id": session_id, "body": body})
