"""Allow the `startup-cleanup` session state.

On SQLite the CHECK can only change by rebuilding `sessions` (a batch copy). env.py runs it with
foreign keys off, so dropping the old table does not cascade into contexts, checkpoints, events
and activity, and checks foreign keys before commit. The table definition is given explicitly
(`copy_from`), so the rebuild needs no reflection and also works in offline (`--sql`) mode.

Downgrade: sessions in `startup-cleanup` become `error` (the legacy CHECK cannot hold them).

Revision ID: 0002_startup_cleanup
Revises: 0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_startup_cleanup"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = "the startup-cleanup state: such sessions become error"
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = True
"""Whether this revision can be rendered as SQL (`--sql`)."""

LEGACY_STATES = (
    "provisioning",
    "running",
    "checkpointing",
    "closing",
    "closed",
    "destroying",
    "error",
)
STATES = (*LEGACY_STATES, "startup-cleanup")
CHECK = "ck_sessions_state"


def state_check(states: tuple[str, ...]) -> str:
    """The `sessions.state` CHECK expression for a list of states (frozen with this revision)."""
    return "state IN (" + ", ".join(f"'{state}'" for state in states) + ")"


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


def sessions_table(states: tuple[str, ...]) -> sa.Table:
    now = sa.text("CURRENT_TIMESTAMP")
    return sa.Table(
        "sessions",
        sa.MetaData(),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("project_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("native_session_id", sa.Text),
        sa.Column("last_error", sa.Text),
        sa.Column("last_checkpoint_error", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_sessions"),
        sa.CheckConstraint(state_check(states), name=CHECK),
    )


def replace_check(old: tuple[str, ...], new: tuple[str, ...]) -> None:
    with op.batch_alter_table("sessions", copy_from=sessions_table(old)) as batch:
        batch.drop_constraint(op.f(CHECK), type_="check")
        batch.create_check_constraint(op.f(CHECK), state_check(new))


def upgrade() -> None:
    replace_check(LEGACY_STATES, STATES)
    # Code of level 1 cannot read a session in `startup-cleanup`.
    set_schema_levels(2, 2)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`."""
    count = connection.execute(
        sa.text("SELECT COUNT(*) FROM sessions WHERE state = 'startup-cleanup'")
    ).scalar_one()
    return f"{count} session(s) in startup-cleanup would become error" if count else None


def downgrade() -> None:
    sessions = sa.table("sessions", sa.column("state", sa.Text))
    op.execute(sessions.update().where(sessions.c.state == "startup-cleanup").values(state="error"))
    replace_check(STATES, LEGACY_STATES)
    set_schema_levels(1, 1)
