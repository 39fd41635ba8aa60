"""Mark the event bodies stored in their canonical form, so that JSON pages splice them.

A column `api_events.body_canonical` (boolean, NOT NULL, default false): true when the stored
body is exactly the canonical JSON of the body it decodes to (pydantic's `model_dump_json()` of
the decoded body, which is what a JSON page holds), so that `load_json` puts the stored text
into the page as it is, with no decoding. The write path of level 9 sets it for what it writes;
rows of earlier code, hand-written bodies in another form and bodies that do not decode keep
false and are decoded when read, so a page is the same either way, only slower.

The rows already stored are marked by the package after the migration (`migrations.upgrade`,
`session-journal db upgrade`, `Store.open(upgrade=True)`: it needs the package's body models,
which a revision must not import); `alembic upgrade` alone leaves them unmarked, which is
correct and slower. What is left to mark is recorded here, in an `event_sequences` row named
`api_events_to_mark` (`last_seq`: the frontier when this revision ran, the last seq to check;
`pruned_through`: the seq checked through so far), which the package's backfill moves with
each batch and deletes when it is done, so an upgrade interrupted during the backfill finishes
it the next time.

Level 9; the minimum compatible level is left as it is: older code ignores the column and its
inserts take the default, false. Downgrade drops the column; it loses nothing (the mark is
derived from the bodies).

Revision ID: 0009_canonical_bodies
Revises: 0008_deletion_counter
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_canonical_bodies"
down_revision = "0008_deletion_counter"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "nothing (the mark is derived from the bodies)"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


# Plain ALTER TABLE on both backends, never SQLite's batch "move and copy", which would drop
# `api_events` with the trigger of 0008 on it.
TO_MARK = "api_events_to_mark"


def sequences() -> sa.TableClause:
    """`event_sequences` as this revision knows it (frozen)."""
    return sa.table(
        "event_sequences",
        sa.column("name", sa.Text),
        sa.column("last_seq", sa.BigInteger),
        sa.column("pruned_through", sa.BigInteger),
    )


def upgrade() -> None:
    op.add_column(
        "api_events",
        sa.Column("body_canonical", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    table = sequences()
    frontier = sa.select(sa.literal(TO_MARK), table.c.last_seq, sa.literal(0)).where(
        table.c.name == "api_events"
    )
    op.execute(table.insert().from_select(["name", "last_seq", "pruned_through"], frontier))
    set_schema_level(9)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing."""
    return None


def downgrade() -> None:
    table = sequences()
    op.execute(table.delete().where(table.c.name == TO_MARK))
    op.drop_column("api_events", "body_canonical")  # SQLite 3.35 and later drop it in place
    set_schema_level(8)
