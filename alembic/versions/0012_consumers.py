"""Durable consumers: `consumers`, one row per named reader of the log whose position the store
keeps (`store.consumers`).

Each row holds the consumer's name (the session id rules), its filter (an `ApiEventFilter` as
JSON), its position (the seq through which it acked), when it registered and last acked, and how
long it may go without acking before it no longer holds retention back (`max_idle_ms`, NULL:
always).

Level 12. The revision itself leaves the minimum compatible level as it is: a database without
consumers is read correctly by older code. The first `register` raises the minimum to 12 in its
own transaction (older code would prune past a consumer's position); a later revision must keep
it at 12 or above while consumers exist.

Downgrade drops the table, and with it every consumer and its position; refused while consumers
exist unless data loss is allowed. It puts the minimum compatible level back where the first
`register` found it: 7 in a pruned log (revision 0007's rule), 2 otherwise.

Revision ID: 0012_consumers
Revises: 0011_lone_append
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_consumers"
down_revision = "0011_lone_append"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "every durable consumer and its position (the consumers table)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

CONSUMERS_LEVEL = 12
"""The minimum compatible level the first `register` sets (frozen here)."""


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def upgrade() -> None:
    op.create_table(
        "consumers",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("filter_json", sa.JSON, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("registered_at_ms", sa.BigInteger, nullable=False),
        sa.Column("last_ack_at_ms", sa.BigInteger, nullable=True),
        sa.Column("max_idle_ms", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_consumers"),
    )
    set_schema_level(12)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    count = connection.execute(sa.text("SELECT COUNT(*) FROM consumers")).scalar_one()
    if not count:
        return None
    return f"{count} durable consumer(s) and their positions (the consumers table)"


def downgrade() -> None:
    op.drop_table("consumers")
    levels = sa.table("schema_compatibility", sa.column("minimum_compatible_level", sa.Integer))
    sequences = sa.table(
        "event_sequences", sa.column("name", sa.Text), sa.column("pruned_through", sa.BigInteger)
    )
    pruned = (
        sa.select(sa.literal(1))
        .where(sequences.c.name == "api_events", sequences.c.pruned_through > 0)
        .exists()
    )
    op.execute(
        levels.update()
        .where(levels.c.minimum_compatible_level == CONSUMERS_LEVEL)
        .values(minimum_compatible_level=sa.case((pruned, sa.literal(7)), else_=sa.literal(2)))
    )
    set_schema_level(11)
