"""The dialect's own INSERT (the one with ON CONFLICT), and the in-place upsert built on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute

from ..models import Base

ColumnValues = Mapping[InstrumentedAttribute[Any], Any]
"""Column values keyed by the model's attributes (a renamed column fails type checking)."""


IN_LIST_CHUNK = 5_000
"""Values bound in one `IN (...)` list at most (SQLite's limit on bound parameters is 32,766)."""


def dialect_insert(
    connection: sa.Connection, model: type[Base]
) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into the model's table in the connection's dialect, PostgreSQL's or SQLite's
    (the two backends): unlike `sa.insert` it has `on_conflict_do_nothing`,
    `on_conflict_do_update` and `excluded`."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(model)
    return sqlite.insert(model)


def upsert(
    connection: sa.Connection,
    model: type[Base],
    values: ColumnValues,
    also: ColumnValues | None = None,
) -> None:
    """Insert a row or update it in place by primary key (`also`: extra columns to set on
    update). Never delete-and-insert (nor SQLite's INSERT OR REPLACE): a delete fires
    ON DELETE CASCADE and would erase the session's events."""
    keys = [column.name for column in model.__table__.primary_key]
    statement = dialect_insert(connection, model).values(dict(values))
    updates = {
        attribute: statement.excluded[attribute.key]
        for attribute in values
        if attribute.key not in keys
    }
    connection.execute(
        statement.on_conflict_do_update(index_elements=keys, set_=updates | dict(also or {}))
    )
