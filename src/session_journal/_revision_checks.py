"""What env.py checks before a revision runs or is printed: the steps Alembic is about to run
(`opts["fn"]`, the step function given to `configure`), what their downgrades would lose of the
data the database holds (`planned_data_loss`, `refuse_data_loss`: each revision's
`downgrade_loss`), and whether each can be rendered as SQL (`refuse_offline`: each revision's
`RENDERS_OFFLINE`). `session_journal.migrations` exports them."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.runtime.migration import MigrationContext, RevisionStep
from alembic.script import Script

from .errors import DataLossRefused, InvalidRecord

_PLANNING_COMMANDS = frozenset({"upgrade", "downgrade"})
"""The `alembic.command` functions whose step function only computes the steps; the others'
(`current` prints, `check` compares the schema) must run once, by Alembic."""


def _planned_steps(context: MigrationContext) -> list[RevisionStep]:
    """The steps Alembic is about to run, from the database's revision (offline: FROM), for an
    upgrade or a downgrade; none for any other command (`current`, `stamp`, `check`).
    `opts["fn"]`, the function given to `configure(fn=...)`, is what Alembic's own
    `run_migrations` calls for them."""
    plan = context.opts.get("fn")
    if (
        plan is None
        or getattr(plan, "__module__", None) != command.__name__
        or getattr(plan, "__name__", None) not in _PLANNING_COMMANDS
    ):
        return []
    return [step for step in plan(context.get_current_heads(), context) if step is not None]


def revision_module(script: Script) -> Any:
    return script.module


def planned_data_loss(context: MigrationContext) -> tuple[str, ...]:
    """What the downgrade `context` is about to run would lose of the data the database holds,
    one text per revision that loses some (`"REV: what"`, each revision's `downgrade_loss`);
    nothing for an upgrade."""
    downgrades = [step.revision for step in _planned_steps(context) if not step.is_upgrade]
    if not downgrades:
        return ()
    assert context.connection is not None
    return tuple(
        f"{script.revision}: {loss}"
        for script in downgrades
        if (loss := revision_module(script).downgrade_loss(context.connection)) is not None
    )


def refuse_data_loss(context: MigrationContext) -> None:
    """`DataLossRefused` if the downgrade `context` is about to run would lose data the
    database holds (`planned_data_loss`); nothing for an upgrade. Called by env.py before any
    revision runs."""
    losses = planned_data_loss(context)
    if losses:
        downgrades = [step.revision for step in _planned_steps(context) if not step.is_upgrade]
        target = downgrades[-1].down_revision
        raise DataLossRefused(
            context.get_current_revision() or "base",
            target if isinstance(target, str) else "base",
            losses,
        )


def refuse_offline(context: MigrationContext, target: str) -> None:
    """`InvalidRecord` if a revision of the range `context` is about to render as SQL cannot be
    rendered (`RENDERS_OFFLINE = False`). Called by env.py before anything is printed."""
    steps = _planned_steps(context)
    start = ",".join(context.get_current_heads()) or "base"
    for step in steps:
        if revision_module(step.revision).RENDERS_OFFLINE:
            continue
        name = step.revision.revision
        down = step.revision.down_revision
        below = down if isinstance(down, str) else "base"
        if step.is_upgrade:
            online = f"session-journal db upgrade {name}"
            before, after = below, name
        else:
            online = f"session-journal db downgrade {below}"
            before, after = name, below
        raise InvalidRecord(
            f"cannot render {start}:{target} as SQL: {name} reads and rewrites rows and runs "
            f"online only; render up to {before}, run {name} online ({online}), then render "
            f"from {after}; nothing was printed"
        )
