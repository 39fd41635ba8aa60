"""The project index: `project_events` with full-text search over `text_content`.

SQLite: an external-content FTS5 table `project_events_fts` kept in sync by SQLite triggers (the
FTS5 table and its shadow tables are hidden from `alembic check` by env.py).
PostgreSQL: a generated column `tsv` (`to_tsvector('simple', ...)`; the one-argument form is not
immutable) with a GIN index.

Level 6; code of level 2 may still use the database (it ignores the new table).

Downgrade drops the index; after upgrading again, `store.index.rebuild` re-indexes a session from
its `events.jsonl`.

Revision ID: 0006_project_index
Revises: 0005_relay_projection
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_project_index"
down_revision = "0005_relay_projection"
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = "the project index (project_events; store.index.rebuild re-indexes a session)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

SQLITE_FTS = [
    "CREATE VIRTUAL TABLE project_events_fts USING fts5("
    "text_content, content='project_events', content_rowid='id')",
    "CREATE TRIGGER project_events_fts_insert AFTER INSERT ON project_events BEGIN "
    "INSERT INTO project_events_fts(rowid, text_content) VALUES (new.id, new.text_content); END",
    "CREATE TRIGGER project_events_fts_delete AFTER DELETE ON project_events BEGIN "
    "INSERT INTO project_events_fts(project_events_fts, rowid, text_content) "
    "VALUES ('delete', old.id, old.text_content); END",
    "CREATE TRIGGER project_events_fts_update AFTER UPDATE ON project_events BEGIN "
    "INSERT INTO project_events_fts(project_events_fts, rowid, text_content) "
    "VALUES ('delete', old.id, old.text_content); "
    "INSERT INTO project_events_fts(rowid, text_content) VALUES (new.id, new.text_content); END",
]


def set_schema_levels(schema_level: int, minimum_compatible_level: int) -> None:
    """Record the level this revision brings and the oldest level of code that may still use
    the database after it (frozen here, as every helper of a revision is: history must not
    change when the package's code does)."""
    levels = sa.table(
        "schema_compatibility",
        sa.column("schema_level", sa.Integer),
        sa.column("minimum_compatible_level", sa.Integer),
    )
    op.execute(
        levels.update().values(
            schema_level=schema_level, minimum_compatible_level=minimum_compatible_level
        )
    )


def upgrade() -> None:
    op.create_table(
        "project_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("ts", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("turn_id", sa.Text),
        sa.Column("flow_run_id", sa.Text),
        sa.Column("text_content", sa.Text),
        sa.Column("payload_json", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_events")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_project_events_session_id_seq")),
    )
    # The context's dialect, not the connection's: offline (`--sql`) there is no connection.
    if op.get_context().dialect.name == "sqlite":
        for statement in SQLITE_FTS:
            op.execute(statement)
    else:
        op.execute(
            "ALTER TABLE project_events ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
            "(to_tsvector('simple'::regconfig, coalesce(text_content, ''))) STORED"
        )
        op.execute("CREATE INDEX ix_project_events_tsv ON project_events USING gin (tsv)")
    set_schema_levels(6, 2)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    count = connection.execute(sa.text("SELECT COUNT(*) FROM project_events")).scalar_one()
    return f"{count} row(s) of the project index (project_events)" if count else None


def downgrade() -> None:
    # The context's dialect, not the connection's: offline (`--sql`) there is no connection.
    if op.get_context().dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER project_events_fts_{trigger}")
        op.execute("DROP TABLE project_events_fts")
    op.drop_table("project_events")
    set_schema_levels(5, 2)
