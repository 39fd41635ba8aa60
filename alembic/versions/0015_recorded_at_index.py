"""The event rate on an index: `ix_api_events_recorded_at_ms` on `api_events.recorded_at_ms`, so
that `store.events.rate()` (`GET /api/events/rate`) counts the events recorded in its window by
one range of the index, whatever order they were stored in, and whatever the log's length.

Level 15. The minimum compatible level stays as it is: older code never reads the index, and its
appends keep it up to date as every other index.

Downgrade drops the index; it loses nothing (the rate is then counted without it, by older
code's walk back along the log).

Revision ID: 0015_recorded_at_index
Revises: 0014_consumer_stuck_after
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_recorded_at_index"
down_revision = "0014_consumer_stuck_after"
branch_labels = None
depends_on = None

DOWNGRADE_LOSES = "nothing (an index, derived from the rows)"
"""What downgrading this revision loses, in general."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

INDEX = "ix_api_events_recorded_at_ms"
"""The index this revision adds (frozen)."""


def set_schema_level(schema_level: int) -> None:
    """Record the level this revision brings; the minimum compatible level stays (frozen here,
    as every helper of a revision is)."""
    levels = sa.table("schema_compatibility", sa.column("schema_level", sa.Integer))
    op.execute(levels.update().values(schema_level=schema_level))


def upgrade() -> None:
    # Built in the migration's transaction: appends wait while it is built (about 0.6 s per
    # million events, see the docs' upgrading notes), as for every index of the log.
    op.create_index(INDEX, "api_events", ["recorded_at_ms"])
    set_schema_level(15)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`: nothing."""
    return None


def downgrade() -> None:
    op.drop_index(INDEX, table_name="api_events")
    set_schema_level(14)
