"""Leases of durable consumers: one holder at a time, and acks of older holders refused
(`store.consumers.acquire`).

`consumers` gains `holder`, `generation` and `lease_expires_at_ms`.

`holder` is the caller's id of the replica holding the lease (NULL: none, or released),
`lease_expires_at_ms` when it expires by the database's clock (NULL with `holder`), and
`generation` counts the leases taken (0: none ever); an ack given a lease of another generation,
or none while a lease is live, is refused.

Level 13. The revision itself leaves the minimum compatible level as it is: a database where no
lease was taken is read correctly by older code. The first `acquire` raises the minimum to 13 in
its own transaction (older code would ack without looking at the lease).

Downgrade drops the three columns; refused while a consumer is held (its holder not released,
expired or not: a paused replica that wakes up would ack unfenced) unless data loss is allowed.
It puts a minimum compatible level of 13 back to 12 (a lease was taken, so consumers exist).

Revision ID: 0013_consumer_leases
Revises: 0012_consumers
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_consumer_leases"
down_revision = "0012_consumers"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "the leases of durable consumers and their generations (fencing)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

LEASES_LEVEL = 13
"""The minimum compatible level the first `acquire` sets (frozen here)."""
CONSUMERS_LEVEL = 12
"""The minimum compatible level the downgrade puts back (revision 0012's)."""


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def lease_columns() -> list[sa.Column[int | str]]:
    """The columns this revision adds (frozen)."""
    return [
        sa.Column("holder", sa.Text, nullable=True),
        sa.Column("generation", sa.BigInteger, server_default=sa.text("0"), nullable=False),
        sa.Column("lease_expires_at_ms", sa.BigInteger, nullable=True),
    ]


def consumers_table() -> sa.Table:
    """`consumers` as this revision leaves it (frozen), for SQLite's table rebuild on downgrade
    (given, not reflected, so that the downgrade also renders offline)."""
    return sa.Table(
        "consumers",
        sa.MetaData(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("filter_json", sa.JSON, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("registered_at_ms", sa.BigInteger, nullable=False),
        sa.Column("last_ack_at_ms", sa.BigInteger, nullable=True),
        sa.Column("max_idle_ms", sa.BigInteger, nullable=True),
        *lease_columns(),
        sa.PrimaryKeyConstraint("name", name="pk_consumers"),
    )


def upgrade() -> None:
    # Plain ADD COLUMNs on both backends (nullable, or a constant default: no table rebuild).
    for column in lease_columns():
        op.add_column("consumers", column)
    set_schema_level(13)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    held = connection.execute(
        sa.text("SELECT COUNT(*) FROM consumers WHERE holder IS NOT NULL")
    ).scalar_one()
    if not held:
        return None
    return f"{held} held lease(s) of durable consumers (a paused holder would ack unfenced)"


def downgrade() -> None:
    with op.batch_alter_table("consumers", copy_from=consumers_table()) as batch:
        batch.drop_column("lease_expires_at_ms")
        batch.drop_column("generation")
        batch.drop_column("holder")
    levels = sa.table("schema_compatibility", sa.column("minimum_compatible_level", sa.Integer))
    op.execute(
        levels.update()
        .where(levels.c.minimum_compatible_level == LEASES_LEVEL)
        .values(minimum_compatible_level=CONSUMERS_LEVEL)
    )
    set_schema_level(12)
