"""Retention: `event_sequences.pruned_through`, the highest seq pruned from the log.

Level 7. The revision itself keeps the minimum compatible level at 2: a database that was
never pruned holds every event, and older code reads it correctly. The first prune
(`store.events.prune`) raises the minimum to 7 in the transaction that records
`pruned_through`, so that code which does not know the floor (and would silently serve the
pruned prefix as a hole) refuses the database from then on. A later revision must keep the
minimum at 7 or above when `pruned_through > 0`.

Downgrade drops the column. In a pruned database that loses the floor: older code would then
page over the missing prefix without telling the client it missed events, and the minimum
compatible level goes back to 2. Refused unless data loss is allowed.

Revision ID: 0007_pruned_through
Revises: 0006_project_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_pruned_through"
down_revision = "0006_project_index"
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = (
    "the pruned_through floor of a pruned log (older code would serve the pruned prefix as a "
    "hole, without CursorExpired)"
)
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


def event_sequences_table() -> sa.Table:
    """`event_sequences` as this revision leaves it (frozen), for SQLite's table rebuild on
    downgrade (given, not reflected, so that the downgrade also renders offline)."""
    return sa.Table(
        "event_sequences",
        sa.MetaData(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("pruned_through", sa.BigInteger, server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_event_sequences"),
    )


def upgrade() -> None:
    # A plain ADD COLUMN on both backends (a constant default: no table rebuild on SQLite).
    op.add_column(
        "event_sequences",
        sa.Column("pruned_through", sa.BigInteger, server_default=sa.text("0"), nullable=False),
    )
    set_schema_levels(7, 2)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    pruned = connection.execute(
        sa.text("SELECT MAX(pruned_through) FROM event_sequences")
    ).scalar_one()
    if not pruned:
        return None
    return (
        f"the pruned_through floor {pruned} (events up to seq {pruned} were pruned; older code "
        "would serve that prefix as a hole, without CursorExpired)"
    )


def downgrade() -> None:
    with op.batch_alter_table("event_sequences", copy_from=event_sequences_table()) as batch:
        batch.drop_column("pruned_through")
    set_schema_levels(6, 2)
