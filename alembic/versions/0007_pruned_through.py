"""Retention: `event_sequences.pruned_through`, the highest seq pruned from the log.

Level 7. The revision itself keeps the minimum compatible level at 2: a database that was
never pruned holds every event, and older code reads it correctly. The first prune
(`store.events.prune`) raises the minimum to 7 in the transaction that records
`pruned_through`, so that code which does not know the floor (and would silently serve the
pruned prefix as a hole) refuses the database from then on. A later revision must keep the
minimum at 7 or above when `pruned_through > 0`.

Downgrade drops the column, keeping a floor above 0 in a row of its own, `event_sequences`
named `api_events_pruned_through` (`last_seq` is the floor), which code of every level ignores
(it reads only the row named `api_events`). The upgrade moves that floor back into
`pruned_through`, raises the minimum compatible level to 7 (as the first prune did) and deletes
the row, so that cursors into the pruned prefix expire again after a round trip; a database
without that row (never pruned) upgrades with floor 0 and the minimum at 2, as before. Both
directions are plain statements over the table (no value read in Python), so they render
offline. (Edited in place after release: at first the downgrade dropped the floor, and a round
trip lost it.) What the downgrade still loses, while the database is below this revision: the
expiry of cursors. Code below level 7 pages over the pruned prefix without telling a client it
missed events, and the minimum compatible level goes back to 2 so that such code may open the
database. Refused in a pruned database unless data loss is allowed.

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
    "while the database is below it, the expiry of cursors into a pruned prefix (older code "
    "would serve the prefix as a hole, without CursorExpired); the pruned_through floor is kept "
    "and comes back with the upgrade"
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


KEPT_FLOOR = "api_events_pruned_through"
"""The `event_sequences` row that keeps the floor of a pruned log below this revision."""


def sequences() -> sa.TableClause:
    """`event_sequences` as the statements that keep and restore the floor see it (frozen)."""
    return sa.table(
        "event_sequences",
        sa.column("name", sa.Text),
        sa.column("last_seq", sa.BigInteger),
        sa.column("pruned_through", sa.BigInteger),
    )


def kept_floor() -> sa.Select[tuple[int]]:
    """The floor kept by a downgrade, if any (a subquery: nothing is read in Python)."""
    kept = sequences().alias("kept")
    return sa.select(kept.c.last_seq).where(kept.c.name == KEPT_FLOOR)


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
    # A floor kept by a downgrade comes back, with the minimum level its first prune set:
    # without it, cursors into the pruned prefix would read on across the hole.
    table = sequences()
    op.execute(
        table.update()
        .where(table.c.name == "api_events", kept_floor().exists())
        .values(pruned_through=kept_floor().scalar_subquery())
    )
    levels = sa.table("schema_compatibility", sa.column("minimum_compatible_level", sa.Integer))
    op.execute(
        levels.update()
        .where(levels.c.minimum_compatible_level < 7, kept_floor().exists())
        .values(minimum_compatible_level=7)
    )
    op.execute(table.delete().where(table.c.name == KEPT_FLOOR))


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    pruned = connection.execute(
        sa.text("SELECT MAX(pruned_through) FROM event_sequences")
    ).scalar_one()
    if not pruned:
        return None
    return (
        "while the database is below 0007_pruned_through, the expiry of cursors below the "
        f"pruned_through floor {pruned} (events up to seq {pruned} were pruned; older code would "
        "serve that prefix as a hole, without CursorExpired); the floor is kept and comes back "
        "with the upgrade"
    )


def downgrade() -> None:
    # Keep a floor above 0 where the upgrade finds it again (on SQLite the table rebuild below
    # copies the row with the others).
    table = sequences()
    op.execute(
        table.insert().from_select(
            ["name", "last_seq"],
            sa.select(sa.literal(KEPT_FLOOR, sa.Text), table.c.pruned_through).where(
                table.c.name == "api_events", table.c.pruned_through > 0
            ),
        )
    )
    with op.batch_alter_table("event_sequences", copy_from=event_sequences_table()) as batch:
        batch.drop_column("pruned_through")
    set_schema_levels(6, 2)
