"""The latest activity snapshot of each session."""

from __future__ import annotations

import sqlalchemy as sa

from ..._validation import EncodedJson, check_json_body, require_id
from ...api_events import ApiActivityState
from ...config import StoreOptions
from ..models import ActivityRow
from ._dialect import upsert


class ActivityRepository:
    """The latest activity snapshot per session, stored as canonical JSON."""

    def __init__(
        self, connection: sa.Connection, max_body_bytes: int = StoreOptions.max_body_bytes
    ) -> None:
        self._connection = connection
        self._max_body_bytes = max_body_bytes

    def get(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or `None`."""
        return self._connection.execute(
            sa.select(ActivityRow.body).where(ActivityRow.session_id == session_id)
        ).scalar_one_or_none()

    def put(self, session_id: str, body: str) -> None:
        """Insert or replace the snapshot. A body the services encoded (`EncodedJson`) is stored
        as it is; other text must be a standard JSON `ApiActivityState` of at most
        `max_body_bytes` (`InvalidRecord` otherwise, nothing written)."""
        if not isinstance(body, EncodedJson):
            require_id(session_id, "session_id")
            validate = ApiActivityState.model_validate_json
            check_json_body(body, validate, "an activity state", self._max_body_bytes)
        upsert(
            self._connection,
            ActivityRow,
            {ActivityRow.session_id: session_id, ActivityRow.body: body},
        )
