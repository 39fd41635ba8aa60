"""Checkpoint operations: at most one checkpoint in flight per session, with its owner.

Level 3; code of level 2 may still use the database (it ignores the new table).

Downgrade: drops `checkpoint_operations`, so an open checkpoint loses its owner (the command
that may save it).

Revision ID: 0003_checkpoint_operations
Revises: 0002_startup_cleanup
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_checkpoint_operations"
down_revision = "0002_startup_cleanup"
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = "open checkpoint operations (which command owns each checkpoint in flight)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""


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


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    count = connection.execute(sa.text("SELECT COUNT(*) FROM checkpoint_operations")).scalar_one()
    return f"{count} open checkpoint operation(s) and their owners" if count else None


def downgrade() -> None:
    op.drop_table("checkpoint_operations")
    set_schema_levels(2, 2)
