"""Sessions with their context and checkpoint metadata."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from pydantic import ValidationError

from ...api_events import ApiActivityState
from ...errors import InvalidRecord
from ...records import (
    CheckpointMetadata,
    CheckpointOperation,
    SessionRecord,
    SessionState,
    SessionSummary,
)
from ..models import (
    ActivityRow,
    CheckpointOperationRow,
    SessionCheckpointRow,
    SessionContextRow,
    SessionRow,
)
from ._dialect import IN_LIST_CHUNK, ColumnValues, dialect_insert, upsert

_COUNT_BY_STATE = sa.select(SessionRow.state, sa.func.count()).group_by(SessionRow.state)


class StoredLifecycle(NamedTuple):
    """The lifecycle fields a writer decides on."""

    state: SessionState
    last_error: str | None


class SessionRepository:
    """Sessions with their workspace context and checkpoint metadata."""

    def __init__(
        self, connection: sa.Connection, on_delete: Callable[[str], None] | None = None
    ) -> None:
        self._connection = connection
        self._on_delete = on_delete  # told of each deleted session (the unit of work's events)

    _select = (
        sa.select(
            SessionRow.session_id,
            SessionRow.project_id,
            SessionContextRow.workspace_id,
            SessionRow.state,
            SessionRow.native_session_id,
            SessionRow.last_error,
            SessionRow.last_checkpoint_error,
            SessionCheckpointRow.archive_path,
            SessionCheckpointRow.sha256,
            SessionCheckpointRow.created_at,
            SessionCheckpointRow.event_frontier,
        )
        .select_from(SessionRow)
        .outerjoin(SessionContextRow, SessionContextRow.session_id == SessionRow.session_id)
        .outerjoin(SessionCheckpointRow, SessionCheckpointRow.session_id == SessionRow.session_id)
    )

    def get(self, session_id: str) -> SessionRecord | None:
        """The session, or `None`."""
        row = self._connection.execute(
            self._select.where(SessionRow.session_id == session_id)
        ).one_or_none()
        return None if row is None else _record(row)

    def list(self, *, workspace_id: str | None, project_id: str | None) -> list[SessionRecord]:
        """Sessions matching both optional filters, by id."""
        query = self._select.order_by(SessionRow.session_id)
        if workspace_id is not None:
            query = query.where(SessionContextRow.workspace_id == workspace_id)
        if project_id is not None:
            query = query.where(SessionRow.project_id == project_id)
        return [_record(row) for row in self._connection.execute(query)]

    def page(
        self,
        *,
        workspace_id: str | None,
        state: SessionState | None,
        before: tuple[str, str] | None,
        limit: int,
    ) -> builtins.list[tuple[SessionSummary, tuple[str, str]]]:
        """Sessions matching both optional filters, newest first by `created_at` then by id
        (descending), below the keyset `before` (`(created key, id)` of the last row of the
        previous page), at most `limit`, each with its activity snapshot and open checkpoint
        operation, by one statement; each with its keyset. The created key is the stored text
        on SQLite (compared as stored: CURRENT_TIMESTAMP's text) and the ISO timestamp on
        PostgreSQL."""
        sqlite = self._connection.dialect.name == "sqlite"
        created_key: Any = sa.type_coerce(SessionRow.created_at, sa.Text) if sqlite else None
        query = self._select.add_columns(
            SessionRow.created_at.label("row_created_at"),
            SessionRow.updated_at.label("row_updated_at"),
            ActivityRow.body.label("activity_body"),
            CheckpointOperationRow.command_id.label("operation_command_id"),
            CheckpointOperationRow.related_command_ids.label("operation_related"),
        )
        if sqlite:
            query = query.add_columns(created_key.label("created_key"))
        query = query.outerjoin(
            ActivityRow, ActivityRow.session_id == SessionRow.session_id
        ).outerjoin(
            CheckpointOperationRow, CheckpointOperationRow.session_id == SessionRow.session_id
        )
        if workspace_id is not None:
            query = query.where(SessionContextRow.workspace_id == workspace_id)
        if state is not None:
            query = query.where(SessionRow.state == state.value)
        column = created_key if sqlite else SessionRow.created_at
        if before is not None:
            key: Any = before[0] if sqlite else _timestamp(before[0])
            query = query.where(
                sa.tuple_(column, SessionRow.session_id) < sa.tuple_(key, before[1])
            )
        query = query.order_by(column.desc(), SessionRow.session_id.desc()).limit(limit)
        found = []
        for row in self._connection.execute(query):
            summary = SessionSummary.model_construct(
                session=_record(row),
                created_at=_utc(row.row_created_at),
                updated_at=_utc(row.row_updated_at),
                activity=_activity(row.activity_body),
                checkpoint_operation=None
                if row.operation_command_id is None
                else CheckpointOperation(
                    session_id=row.session_id,
                    command_id=row.operation_command_id,
                    related_command_ids=json.loads(row.operation_related),
                ),
            )
            keyset = row.created_key if sqlite else _utc(row.row_created_at).isoformat()
            found.append((summary, (keyset, row.session_id)))
        return found

    def ids_in_states(
        self,
        states: Collection[SessionState],
        *,
        updated_before: datetime | None,
        after_id: str | None,
        limit: int,
    ) -> builtins.list[str]:
        """Ids of sessions in `states`, by id, after `after_id`, last saved (`updated_at`)
        before `updated_before` (timezone-aware), at most `limit`."""
        query = (
            sa.select(SessionRow.session_id)
            .where(SessionRow.state.in_(sorted(state.value for state in states)))
            .order_by(SessionRow.session_id)
            .limit(limit)
        )
        if after_id is not None:
            query = query.where(SessionRow.session_id > after_id)
        if updated_before is not None:  # UTC: SQLite keeps CURRENT_TIMESTAMP's UTC text
            query = query.where(SessionRow.updated_at < updated_before.astimezone(UTC))
        return list(self._connection.scalars(query))

    def count_by_state(self, workspace_id: str | None = None) -> dict[str, int]:
        """How many sessions are in each state (states without a session left out), of one
        workspace when `workspace_id` is given."""
        query = _COUNT_BY_STATE
        if workspace_id is not None:
            query = query.join(
                SessionContextRow, SessionContextRow.session_id == SessionRow.session_id
            ).where(SessionContextRow.workspace_id == workspace_id)
        rows = self._connection.execute(query)
        return {str(state): int(count) for state, count in rows}

    def lock(self, session_id: str) -> StoredLifecycle | None:
        """The stored state and `last_error`, or `None`; the row stays locked (PostgreSQL) until
        the transaction ends, so concurrent writers decide on committed state."""
        row = self._connection.execute(
            sa.select(SessionRow.state, SessionRow.last_error)
            .where(SessionRow.session_id == session_id)
            .with_for_update()
        ).one_or_none()
        return None if row is None else StoredLifecycle(SessionState(row.state), row.last_error)

    def lock_existing(self, session_ids: Collection[str]) -> set[str]:
        """Which of the sessions exist, locking their rows (PostgreSQL) in id order.

        Every writer that touches several sessions locks them in the same order first, so two
        transactions that update the same sessions' rows cannot deadlock. Ids go in chunks that
        stay under the drivers' limits on bound parameters.
        """
        ordered = sorted(set(session_ids))
        existing: set[str] = set()
        for start in range(0, len(ordered), IN_LIST_CHUNK):
            query = (
                sa.select(SessionRow.session_id)
                .where(SessionRow.session_id.in_(ordered[start : start + IN_LIST_CHUNK]))
                .order_by(SessionRow.session_id)
                .with_for_update()
            )
            existing.update(self._connection.execute(query).scalars())
        return existing

    def insert_if_absent(self, record: SessionRecord) -> bool:
        """Insert the session row unless it exists; whether it was inserted. A concurrent
        insert of the same id waits for this one, then finds the row (PostgreSQL)."""
        statement = (
            dialect_insert(self._connection, SessionRow)
            .values(_session_row(record))
            .on_conflict_do_nothing()
            .returning(SessionRow.session_id)
        )
        return self._connection.execute(statement).first() is not None

    def upsert(self, record: SessionRecord) -> None:
        """Insert or update the session, its context and its checkpoint metadata in place."""
        upsert(
            self._connection,
            SessionRow,
            _session_row(record),
            {SessionRow.updated_at: sa.func.current_timestamp()},
        )
        upsert(
            self._connection,
            SessionContextRow,
            {
                SessionContextRow.session_id: record.id,
                SessionContextRow.workspace_id: record.workspace_id,
            },
        )
        self.replace_checkpoint(record.id, record.checkpoint)

    def replace_checkpoint(self, session_id: str, checkpoint: CheckpointMetadata | None) -> None:
        """Store the checkpoint metadata; `None` removes it."""
        if checkpoint is None:
            self._connection.execute(
                sa.delete(SessionCheckpointRow).where(SessionCheckpointRow.session_id == session_id)
            )
            return
        upsert(
            self._connection,
            SessionCheckpointRow,
            {
                SessionCheckpointRow.archive_path: checkpoint.archive_path,
                SessionCheckpointRow.sha256: checkpoint.sha256,
                SessionCheckpointRow.created_at: checkpoint.created_at,
                SessionCheckpointRow.event_frontier: checkpoint.event_frontier,
                SessionCheckpointRow.session_id: session_id,
            },
        )

    def set_native_session_id(self, session_id: str, native_session_id: str | None) -> None:
        """Store the runtime's own id for the session."""
        self._connection.execute(
            sa.update(SessionRow)
            .where(SessionRow.session_id == session_id)
            .values({SessionRow.native_session_id: native_session_id})
        )

    def update_lifecycle(self, record: SessionRecord) -> None:
        """Update `state`, `last_error` and `last_checkpoint_error`."""
        self._connection.execute(
            sa.update(SessionRow)
            .where(SessionRow.session_id == record.id)
            .values({**_lifecycle(record), SessionRow.updated_at: sa.func.current_timestamp()})
        )

    def delete(self, session_id: str) -> bool:
        """Delete the session and, by cascade, everything that belongs to it, including events
        appended in this transaction and not inserted yet."""
        result = self._connection.execute(
            sa.delete(SessionRow).where(SessionRow.session_id == session_id)
        )
        if self._on_delete is not None:
            self._on_delete(session_id)
        return result.rowcount > 0


def _session_row(record: SessionRecord) -> ColumnValues:
    return {
        **_lifecycle(record),
        SessionRow.session_id: record.id,
        SessionRow.project_id: record.project_id,
        SessionRow.native_session_id: record.native_session_id,
    }


def _lifecycle(record: SessionRecord) -> ColumnValues:
    return {
        SessionRow.state: record.state.value,
        SessionRow.last_error: record.last_error,
        SessionRow.last_checkpoint_error: record.last_checkpoint_error,
    }


def _utc(value: datetime) -> datetime:
    """A stored timestamp as an aware UTC datetime (SQLite keeps CURRENT_TIMESTAMP's naive UTC
    text)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _timestamp(text: str) -> datetime:
    """The created key of a PostgreSQL cursor: an ISO timestamp with its offset (as the page
    wrote it; a naive one would be read in the server's time zone)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise InvalidRecord(f"before is not a cursor that sessions.page gave: {text[:80]!r}")
    return value


def _activity(body: str | None) -> ApiActivityState | None:
    """A stored snapshot, `None` for none or one this code cannot decode (as `activity.get`)."""
    if body is None:
        return None
    try:
        return ApiActivityState.model_validate_json(body)
    except ValidationError:
        return None


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
