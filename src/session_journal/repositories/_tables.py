"""The tables repositories query, and the in-place upsert they share."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..models import Base

sessions = Base.metadata.tables["sessions"]
contexts = Base.metadata.tables["session_contexts"]
checkpoints = Base.metadata.tables["session_checkpoints"]
events = Base.metadata.tables["api_events"]
sequences = Base.metadata.tables["event_sequences"]
activity = Base.metadata.tables["api_session_activity"]
operations = Base.metadata.tables["checkpoint_operations"]
materialized = Base.metadata.tables["materialized_sessions"]
transcript = Base.metadata.tables["transcript_items"]
project_events = Base.metadata.tables["project_events"]


def upsert(
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
