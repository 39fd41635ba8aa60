"""Index the stored `type` tag of event bodies, for the type filter (`ApiEventFilter.types`).

Two expression indexes on the tag as the database reads it from the stored body (SQLite
`json_extract(body, '$.type')` of a body that is valid JSON, NULL otherwise; PostgreSQL
`session_journal_event_type(body)`, a SQL function made here: `body ->> 'type'` of the body
with any `\\u0000` escape read as `\\u0001`, which PostgreSQL's JSON operators would refuse),
with `seq`: `ix_api_events_type_seq (tag, seq)` for a filter of the whole
log, `ix_api_events_session_id_type_seq (session_id, tag, seq)` for one session's. A page of a
type-filtered read is one limited scan of such an index per type, in seq order, merged.

The database fills the indexes itself, also for rows that older code writes: level 10, and the
minimum compatible level is left as it is, so older controllers go on writing during a rolling
upgrade. Downgrade drops the indexes; it loses nothing (they are derived from the bodies).

Revision ID: 0010_event_types
Revises: 0009_canonical_bodies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_event_types"
down_revision = "0009_canonical_bodies"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "nothing (the indexes are derived from the bodies)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

# The tag expressions, frozen here as the package's `models.StoredType` writes them (queries
# use the index only when their expression is the same). PostgreSQL: a SQL function (immutable,
# inlined by the planner), so that the index reads back as the one call that the models declare.
# Its backslashes are written as E'' strings, which mean the same whatever
# `standard_conforming_strings` says.
TAG = {
    "sqlite": "CASE WHEN json_valid(body) THEN json_extract(body, '$.type') END",
    "postgresql": "session_journal_event_type(body)",
}
POSTGRESQL_FUNCTION = (
    "CREATE FUNCTION session_journal_event_type(body json) RETURNS text "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT CASE "
    "WHEN strpos(body::text, E'\\\\u0000') = 0 THEN body ->> 'type' "
    "ELSE replace(body::text, E'\\\\u0000', E'\\\\u0001')::json ->> 'type' END $$"
)
INDEXES = {
    "ix_api_events_type_seq": "{tag}, seq",
    "ix_api_events_session_id_type_seq": "session_id, {tag}, seq",
}


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        op.execute(POSTGRESQL_FUNCTION)
    tag = TAG[dialect]
    for name, columns in INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON api_events ({columns.format(tag=tag)})")
    set_schema_level(10)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing."""
    return None


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX {name}")
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP FUNCTION session_journal_event_type(json)")
    set_schema_level(9)
