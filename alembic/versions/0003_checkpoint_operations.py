"""Checkpoint operations: at most one checkpoint in flight per session, with its owner.

Level 3; code of level 2 may still use the database (it ignores the new table).

Revision ID: 0003_checkpoint_operations
Revises: 0002_startup_cleanup
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from session_journal.migrations import set_schema_levels

revision = "0003_checkpoint_operations"
down_revision = "0002_startup_cleanup"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "checkpoint_operations",
        sa.Column(
            "session_id",
            sa.Text,
            sa.ForeignKey("sessions.session_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("command_id", sa.Text, nullable=False),
        sa.Column("related_command_ids", sa.JSON, server_default=sa.text("'[]'"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_checkpoint_operations")),
    )
    set_schema_levels(3, 2)


def downgrade() -> None:
    op.drop_table("checkpoint_operations")
    set_schema_levels(2, 2)
