"""Materialized sessions: the relay frontier with its projection state, and the transcript."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa
from pydantic import TypeAdapter

from ...relay.state import ProjectionState, TranscriptBody, TranscriptItem
from ..models import MaterializedSessionRow, TranscriptItemRow
from ._dialect import upsert


class StoredProjection(NamedTuple):
    """A session's relay frontier and the state that applying the next event needs."""

    ordinal: int
    digest: str
    state: ProjectionState


class ProjectionRepository:
    """`materialized_sessions` and `transcript_items`."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def get(self, session_id: str) -> StoredProjection | None:
        """The stored frontier and state, or `None` before the first relay event."""
        row = self._connection.execute(
            sa.select(
                MaterializedSessionRow.applied_event_ordinal,
                MaterializedSessionRow.applied_event_digest,
                MaterializedSessionRow.state,
            ).where(MaterializedSessionRow.session_id == session_id)
        ).one_or_none()
        if row is None:
            return None
        state = ProjectionState.model_validate_json(row.state)
        return StoredProjection(row.applied_event_ordinal, row.applied_event_digest, state)

    def put(self, session_id: str, stored: StoredProjection) -> None:
        """Replace the frontier and state."""
        upsert(
            self._connection,
            MaterializedSessionRow,
            {
                MaterializedSessionRow.session_id: session_id,
                MaterializedSessionRow.applied_event_ordinal: stored.ordinal,
                MaterializedSessionRow.applied_event_digest: stored.digest,
                MaterializedSessionRow.state: stored.state.model_dump_json(),
            },
        )

    def add_items(self, session_id: str, items: list[TranscriptItem]) -> None:
        """Append transcript items."""
        if items:
            rows = [
                {
                    "session_id": session_id,
                    "position": item.position,
                    "stable_id": item.stable_id,
                    "body": item.body.model_dump_json(),
                }
                for item in items
            ]
            self._connection.execute(sa.insert(TranscriptItemRow), rows)

    def transcript(self, session_id: str) -> list[TranscriptItem]:
        """The whole transcript, by position."""
        query = _ITEMS.where(TranscriptItemRow.session_id == session_id)
        return _items(self._connection.execute(query.order_by(TranscriptItemRow.position)))

    def transcript_before(
        self, session_id: str, before_position: int | None, limit: int
    ) -> list[TranscriptItem]:
        """The newest `limit` items below `before_position` (`None`: of the whole transcript),
        newest first: a backward walk of the (session_id, position) key."""
        query = _ITEMS.where(TranscriptItemRow.session_id == session_id)
        if before_position is not None:
            query = query.where(TranscriptItemRow.position < before_position)
        query = query.order_by(TranscriptItemRow.position.desc()).limit(limit)
        return _items(self._connection.execute(query))


_ITEMS = sa.select(TranscriptItemRow.position, TranscriptItemRow.stable_id, TranscriptItemRow.body)


def _items(rows: Iterable[Any]) -> list[TranscriptItem]:
    return [
        TranscriptItem(stable_id=stable_id, position=position, body=_BODY.validate_json(body))
        for position, stable_id, body in rows
    ]


_BODY: TypeAdapter[TranscriptBody] = TypeAdapter(TranscriptBody)
