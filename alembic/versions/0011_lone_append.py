"""PostgreSQL: a function that appends one event in one statement, for the write path's lone
appends (one round trip instead of four).

`session_journal_append_event(session_id, recorded_at_ms, body, body_canonical)` returns the
event's seq, or NULL (nothing written, no seq taken) when the session does not exist. It keeps
the lock order of every writer: the session row first (`FOR KEY SHARE`: the weakest lock that
keeps the session from being deleted before the insert), the `event_sequences` row last (the
seq, the followers' `NOTIFY` with the schema as payload, the insert). It is PL/pgSQL, so each of
its statements takes a fresh snapshot: a call that waited for a lock sees the rows as they are
once it holds it. Table names resolve through the caller's `search_path`, as every statement of
the package's does. SQLite needs no function (the write lock orders writers).

Level 11; the minimum compatible level is left as it is: older code does not call the function.
Downgrade drops it; it loses nothing.

Revision ID: 0011_lone_append
Revises: 0010_event_types
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_lone_append"
down_revision = "0010_event_types"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "nothing (a function, no data)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

# Frozen here as revision 0011 made it (the package calls it by name and signature).
POSTGRESQL_FUNCTION = """\
CREATE FUNCTION session_journal_append_event(
    p_session_id text, p_recorded_at_ms bigint, p_body text, p_body_canonical boolean
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    taken bigint;
BEGIN
    PERFORM 1 FROM sessions WHERE session_id = p_session_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = 'api_events'
        RETURNING last_seq INTO taken;
    PERFORM pg_notify('session_journal_events', current_schema());
    INSERT INTO api_events (seq, session_id, recorded_at_ms, body, body_canonical)
        VALUES (taken, p_session_id, p_recorded_at_ms, p_body::json, p_body_canonical);
    RETURN taken;
END
$$"""
POSTGRESQL_DROP = "DROP FUNCTION session_journal_append_event(text, bigint, text, boolean)"


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(POSTGRESQL_FUNCTION)
    set_schema_level(11)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing."""
    return None


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(POSTGRESQL_DROP)
    set_schema_level(10)
