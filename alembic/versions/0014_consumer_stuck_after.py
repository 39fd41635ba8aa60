"""When a durable consumer is stuck: `consumers.stuck_after_ms`, how long it may go without
acking while events wait for it (`store.consumers.register(stuck_after_s=)`, 300 s by default).

A consumer is stuck while the frontier is past its position and it has not acked (nor
registered or been reset) for longer than that: computed from stored state, so that any process
(the CLI, a metrics scrape) tells it the same.

Level 14. The minimum compatible level stays as it is: older code inserts consumers with the
column's default and never reads it.

Downgrade drops the column; refused while a consumer has a setting other than the default
(300 s) unless data loss is allowed.

Revision ID: 0014_consumer_stuck_after
Revises: 0013_consumer_leases
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_consumer_stuck_after"
down_revision = "0013_consumer_leases"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "the stuck_after_s of durable consumers registered with another than 300 s"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

DEFAULT_STUCK_AFTER_MS = 300_000
"""The column's default (frozen here)."""


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def stuck_after_column() -> sa.Column[int]:
    """The column this revision adds (frozen)."""
    return sa.Column(
        "stuck_after_ms",
        sa.BigInteger,
        server_default=sa.text(str(DEFAULT_STUCK_AFTER_MS)),
        nullable=False,
    )


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
        sa.Column("holder", sa.Text, nullable=True),
        sa.Column("generation", sa.BigInteger, server_default=sa.text("0"), nullable=False),
        sa.Column("lease_expires_at_ms", sa.BigInteger, nullable=True),
        stuck_after_column(),
        sa.PrimaryKeyConstraint("name", name="pk_consumers"),
    )


def upgrade() -> None:
    # A plain ADD COLUMN on both backends (a constant default: no table rebuild on SQLite).
    op.add_column("consumers", stuck_after_column())
    set_schema_level(14)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    count = connection.execute(
        sa.text(f"SELECT COUNT(*) FROM consumers WHERE stuck_after_ms <> {DEFAULT_STUCK_AFTER_MS}")
    ).scalar_one()
    if not count:
        return None
    return f"the stuck_after_s of {count} durable consumer(s) registered with another than 300 s"


def downgrade() -> None:
    with op.batch_alter_table("consumers", copy_from=consumers_table()) as batch:
        batch.drop_column("stuck_after_ms")
    set_schema_level(13)
