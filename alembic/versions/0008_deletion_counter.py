"""Deletions of events are counted and (PostgreSQL) notified, by the database itself.

A row `api_events_deleted` in `event_sequences` whose `last_seq` is a counter that a trigger on
`api_events` moves whenever events are deleted, whoever deletes them: a prune, a session
deleted (the events go by cascade), `remove_ended`, older code, an operator's own SQL. With
the frontier (`last_seq` of `api_events`) and the floor (`pruned_through`) it makes the log's
*version*: one statement tells a store whether the followers' window it holds in memory still
answers as the database would, whatever other processes did meanwhile.

- SQLite: a row trigger (SQLite has no statement triggers) adds one per deleted event; other
  processes' followers see the commit through `PRAGMA data_version` as they see an append.
- PostgreSQL: a statement trigger adds one per `DELETE` or `TRUNCATE` and sends the followers'
  `NOTIFY` (channel `session_journal_events`, the schema as payload, delivered at commit), so
  a prune or a delete wakes the followers of every controller as an append does. Its function
  keeps the `search_path` of its creation, so it finds its own schema's tables whoever deletes.

Level 8; the minimum compatible level is left as it is (older code ignores the row and the
triggers; the triggers count its deletions too). Downgrade drops the triggers and the row; it
loses nothing.

Revision ID: 0008_deletion_counter
Revises: 0007_pruned_through
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_deletion_counter"
down_revision = "0007_pruned_through"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "nothing (the counter of deletions is only a token of change)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

COUNTER = "api_events_deleted"

SQLITE_UPGRADE = [
    "CREATE TRIGGER api_events_deleted AFTER DELETE ON api_events BEGIN "
    f"UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = '{COUNTER}'; END",
]
SQLITE_DOWNGRADE = ["DROP TRIGGER api_events_deleted"]

POSTGRESQL_UPGRADE = [
    "CREATE FUNCTION session_journal_events_deleted() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    f"UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = '{COUNTER}'; "
    "PERFORM pg_notify('session_journal_events', current_schema()); "
    "RETURN NULL; END $$",
    "CREATE TRIGGER api_events_deleted AFTER DELETE OR TRUNCATE ON api_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION session_journal_events_deleted()",
]
POSTGRESQL_DOWNGRADE = [
    "DROP TRIGGER api_events_deleted ON api_events",
    "DROP FUNCTION session_journal_events_deleted()",
]


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def sequences() -> sa.TableClause:
    """`event_sequences` as this revision knows it (frozen)."""
    return sa.table(
        "event_sequences",
        sa.column("name", sa.Text),
        sa.column("last_seq", sa.BigInteger),
        sa.column("pruned_through", sa.BigInteger),
    )


def upgrade() -> None:
    op.execute(sequences().insert().values(name=COUNTER, last_seq=0, pruned_through=0))
    postgresql = op.get_context().dialect.name == "postgresql"
    for statement in POSTGRESQL_UPGRADE if postgresql else SQLITE_UPGRADE:
        op.execute(statement)
    set_schema_level(8)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing."""
    return None


def downgrade() -> None:
    postgresql = op.get_context().dialect.name == "postgresql"
    for statement in POSTGRESQL_DOWNGRADE if postgresql else SQLITE_DOWNGRADE:
        op.execute(statement)
    table = sequences()
    op.execute(table.delete().where(table.c.name == COUNTER))
    set_schema_level(7)
