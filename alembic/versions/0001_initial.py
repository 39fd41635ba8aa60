"""The legacy-era schema: sessions, contexts, checkpoints, the event log, activity.

Its `sessions.state` CHECK predates the `startup-cleanup` state (added by 0002).

Downgrade: drops every table, the projection state that 0005's downgrade kept in its
`retired_0005_*` tables included.

Revision ID: 0001_initial
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = "everything: every session with its events, activity and checkpoints"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

RETIRED_TABLES = ("retired_0005_transcript_items", "retired_0005_materialized_sessions")
"""Where 0005's downgrade keeps the projection state (dropped here, with everything else)."""

LEGACY_STATES = (
    "provisioning",
    "running",
    "checkpointing",
    "closing",
    "closed",
    "destroying",
    "error",
)


def state_check(states: tuple[str, ...]) -> str:
    """The `sessions.state` CHECK expression for a list of states (frozen with this revision)."""
    return "state IN (" + ", ".join(f"'{state}'" for state in states) + ")"


def _session_fk() -> sa.ForeignKey:
    return sa.ForeignKey("sessions.session_id", ondelete="CASCADE")


def upgrade() -> None:
    now = sa.text("CURRENT_TIMESTAMP")
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("project_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("native_session_id", sa.Text),
        sa.Column("last_error", sa.Text),
        sa.Column("last_checkpoint_error", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_sessions")),
        sa.CheckConstraint(state_check(LEGACY_STATES), name=op.f("ck_sessions_state")),
    )
    op.create_table(
        "session_contexts",
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("workspace_id", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_contexts")),
    )
    op.create_index(op.f("ix_session_contexts_workspace_id"), "session_contexts", ["workspace_id"])
    op.create_table(
        "session_checkpoints",
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("archive_path", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("event_frontier", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_checkpoints")),
    )
    op.create_table(
        "api_events",
        # INTEGER PRIMARY KEY on SQLite: the rowid, so the table is stored in seq order.
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_api_events")),
    )
    op.create_index(op.f("ix_api_events_session_id_seq"), "api_events", ["session_id", "seq"])
    sequences = op.create_table(
        "event_sequences",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_event_sequences")),
    )
    op.bulk_insert(sequences, [{"name": "api_events", "last_seq": 0}])
    op.create_table(
        "api_session_activity",
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_api_session_activity")),
    )
    compatibility = op.create_table(
        "schema_compatibility",
        sa.Column("schema_level", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("minimum_compatible_level", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("schema_level", name=op.f("pk_schema_compatibility")),
    )
    op.bulk_insert(compatibility, [{"schema_level": 1, "minimum_compatible_level": 1}])


def _count(connection: sa.Connection, query: str) -> int:
    return int(connection.execute(sa.text(query)).scalar_one())


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`.
    Sessions own every other row (their foreign keys cascade), so they and their events say it."""
    sessions = _count(connection, "SELECT COUNT(*) FROM sessions")
    if not sessions:
        return None
    events = _count(connection, "SELECT COUNT(*) FROM api_events")
    return (
        f"every table: {sessions} session(s) with {events} event(s), their activity, "
        "checkpoints and projection state"
    )


def downgrade() -> None:
    for retired in RETIRED_TABLES:
        op.drop_table(retired, if_exists=True)
    for table in (
        "schema_compatibility",
        "api_session_activity",
        "event_sequences",
        "api_events",
        "session_checkpoints",
        "session_contexts",
        "sessions",
    ):
        op.drop_table(table)
