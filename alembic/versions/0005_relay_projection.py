"""Relay projection: each session's relay frontier with its projection state, and its transcript.

Level 5; code of level 2 may still use the database (it ignores the new tables).

Revision ID: 0005_relay_projection
Revises: 0004_outcome_bodies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_relay_projection"
down_revision = "0004_outcome_bodies"
branch_labels = None
depends_on = None


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


def _session_fk() -> sa.ForeignKey:
    return sa.ForeignKey("sessions.session_id", ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "materialized_sessions",
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("applied_event_ordinal", sa.BigInteger, nullable=False),
        sa.Column("applied_event_digest", sa.Text, nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_materialized_sessions")),
    )
    op.create_table(
        "transcript_items",
        sa.Column("session_id", sa.Text, _session_fk(), nullable=False),
        sa.Column("position", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("stable_id", sa.Text, nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "position", name=op.f("pk_transcript_items")),
    )
    set_schema_levels(5, 2)


def downgrade() -> None:
    op.drop_table("transcript_items")
    op.drop_table("materialized_sessions")
    set_schema_levels(4, 2)
