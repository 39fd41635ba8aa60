"""Relay projection: each session's relay frontier with its projection state, and its transcript.

Level 5; code of level 2 may still use the database (it ignores the new tables).

Downgrade keeps the projection: it renames `materialized_sessions` and `transcript_items` to
`retired_0005_materialized_sessions` and `retired_0005_transcript_items` (their rows, keys and
foreign keys unchanged, so deleting a session still deletes its rows), and this upgrade renames
them back when they are there. So a relay chain that was applied before a downgrade is still
applied after the next upgrade: delivering it again adds no API event a second time. Only
`0001_initial`'s downgrade drops the retired tables. Code below level 5 ignores them.

The upgrade is the same SQL whether or not the retired tables exist, so it renders offline too:
`CREATE TABLE IF NOT EXISTS` each retired table (new and empty, or the one kept), then rename it.

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


DOWNGRADE_LOSES = (
    "nothing: the projection state is kept in retired_0005_* tables and comes back with the "
    "next upgrade (until 0001_initial is downgraded)"
)
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

RETIRED = "retired_0005_"
"""The prefix of the tables the downgrade keeps the projection in."""


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


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"],
        ["sessions.session_id"],
        ondelete="CASCADE",
        name=op.f(f"fk_{table}_session_id_sessions"),
    )


def upgrade() -> None:
    # The constraints have the live tables' names (not the naming convention's for the retired
    # name): a retired table holds them while it is retired (PostgreSQL's index names are per
    # schema, and the live table is absent then).
    op.create_table(
        f"{RETIRED}materialized_sessions",
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("applied_event_ordinal", sa.BigInteger, nullable=False),
        sa.Column("applied_event_digest", sa.Text, nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_materialized_sessions")),
        _session_fk("materialized_sessions"),
        if_not_exists=True,
    )
    op.create_table(
        f"{RETIRED}transcript_items",
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("stable_id", sa.Text, nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "position", name=op.f("pk_transcript_items")),
        _session_fk("transcript_items"),
        if_not_exists=True,
    )
    op.rename_table(f"{RETIRED}materialized_sessions", "materialized_sessions")
    op.rename_table(f"{RETIRED}transcript_items", "transcript_items")
    set_schema_levels(5, 2)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing, the
    projection is kept (see the module's docstring)."""
    return None


def downgrade() -> None:
    op.rename_table("transcript_items", f"{RETIRED}transcript_items")
    op.rename_table("materialized_sessions", f"{RETIRED}materialized_sessions")
    set_schema_levels(4, 2)
