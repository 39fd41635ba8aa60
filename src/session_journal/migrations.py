"""Programmatic Alembic: upgrade, downgrade (refusing to lose data unless allowed), offline SQL,
history, current revision and the schema check behind `Store.open`.

Each revision module declares `DOWNGRADE_LOSES` (what its downgrade loses, in general),
`downgrade_loss(connection)` (what it would lose in this database, or `None`) and
`RENDERS_OFFLINE` (whether it can be rendered as SQL); env.py calls `refuse_data_loss` and
`refuse_offline` with them before anything runs or is printed.

The scripts live in the repository's `alembic/` (editable installs) and, in a wheel, in the copy
the build places at `session_journal/_alembic`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext, RevisionStep
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Engine

from .config import StoreOptions
from .db import create_engine, require_database, translate_errors
from .errors import (
    DataLossRefused,
    IncompatibleSchema,
    InvalidRecord,
    MigrationFailed,
    SchemaOutOfDate,
    SessionJournalError,
)

SCHEMA_LEVEL = 6
"""The schema level of this code's head revision (see `schema_compatibility`)."""

UPGRADE_HINT = "run `alembic upgrade head` (or `session-journal db upgrade`)"


def script_location() -> Path:
    """The folder holding `env.py` and `versions/`."""
    packaged = Path(__file__).with_name("_alembic")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "alembic"


def alembic_config(url: str, output_buffer: io.StringIO | None = None) -> Config:
    """An Alembic configuration for `url`, without reading `alembic.ini`; offline SQL goes to
    `output_buffer` when given."""
    config = Config(output_buffer=output_buffer)
    config.set_main_option("script_location", str(script_location()))
    # Passed as an attribute, not an ini option, so `%` in a password needs no escaping.
    config.attributes["url"] = url
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config("sqlite://"))


def head() -> str:
    """The head revision of this code."""
    revision = _scripts().get_current_head()
    assert revision is not None
    return revision


def is_known(revision: str) -> bool:
    """Whether this code's scripts contain `revision` (an id, a unique prefix of one, `head`)."""
    if not revision.strip("@"):
        return False  # Alembic asserts on a revision without an id ('', '@')
    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


_FORWARD = re.compile(r"(?P<base>[^+]*)\+[0-9]+")


def check_upgrade_target(revision: str) -> str:
    """`InvalidRecord` unless `revision` is a target an upgrade may have: `head`, a revision of
    this code, or a step forward (`+1`, `0003+1`, which Alembic resolves against the database).
    Alembic itself reports an unknown target as a failure, as if something had run."""
    forward = _FORWARD.fullmatch(revision)
    base = forward["base"] if forward else revision
    if (forward and not base) or is_known(base):
        return revision
    raise InvalidRecord(
        f"unknown revision {revision!r}: expected head or a revision of this code "
        f"(head {head()}); nothing was migrated"
    )


@dataclass(frozen=True)
class SchemaStatus:
    """What `db check` reports: the revision, the levels, and whether this code may use it."""

    revision: str | None
    schema_level: int | None
    minimum_compatible_level: int | None
    usable: bool
    verdict: str


def status(engine: Engine) -> SchemaStatus:
    """Read the database's revision and compatibility levels and judge them."""
    with translate_errors("read the schema revision"), engine.connect() as connection:
        revision = MigrationContext.configure(connection).get_current_revision()
        levels = None
        if sa.inspect(connection).has_table("schema_compatibility"):
            levels = connection.execute(
                sa.text("SELECT schema_level, minimum_compatible_level FROM schema_compatibility")
            ).first()
    level, minimum = (levels[0], levels[1]) if levels else (None, None)
    expected = head()
    if revision is None:
        usable, verdict = False, f"no schema (expected {expected}): {UPGRADE_HINT}"
    elif revision == expected:
        usable, verdict = True, "up to date"
    elif is_known(revision):
        usable, verdict = False, f"revision {revision} is older than {expected}: {UPGRADE_HINT}"
    elif minimum is not None and minimum <= SCHEMA_LEVEL:
        usable, verdict = (
            True,
            (
                f"newer revision {revision} (level {level}) is compatible with this code's level "
                f"{SCHEMA_LEVEL}"
            ),
        )
    else:
        usable, verdict = (
            False,
            (
                f"revision {revision} needs code of schema level {minimum} or later; this code is "
                f"level {SCHEMA_LEVEL}"
            ),
        )
    return SchemaStatus(revision, level, minimum, usable, verdict)


def verify(engine: Engine) -> SchemaStatus:
    """Raise `SchemaOutOfDate` or `IncompatibleSchema` unless this code may use the database."""
    found = status(engine)
    if found.usable:
        return found
    if found.revision is None or is_known(found.revision):
        raise SchemaOutOfDate(f"database schema is out of date: {found.verdict}")
    raise IncompatibleSchema(f"database schema is incompatible: {found.verdict}")


def upgrade(url: str, revision: str = "head", options: StoreOptions | None = None) -> None:
    """Migrate the database at `url` to `revision`; never from a revision this code does not
    know (a database migrated by newer code). An unknown target is an `InvalidRecord`, before
    anything runs."""
    check_upgrade_target(revision)
    engine = create_engine(url, options or StoreOptions.from_env(), role="reader")
    try:
        current = status(engine).revision
    finally:
        engine.dispose()
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "upgrade session-journal instead"
        )
    _run(command.upgrade, alembic_config(url), url, revision, _where(current))


def downgrade(
    url: str,
    revision: str,
    *,
    allow_data_loss: bool = False,
    options: StoreOptions | None = None,
) -> None:
    """Migrate the database at `url` down to `revision` (a revision id or a unique prefix of
    one, `-N` steps back, or `base`, which removes every table). A downgrade that would lose
    data this database holds raises `DataLossRefused` naming it, before anything runs, unless
    `allow_data_loss`; an unknown revision, or one that is not below the database's, is an
    `InvalidRecord`; a database that does not exist is `DatabaseNotFound` (none is created).
    `options` are used to read the database's revision; the migration's own connection takes
    its options from the environment, as `upgrade`'s does."""
    if not revision.strip("@"):
        raise InvalidRecord(
            f"cannot migrate to {revision!r}: no revision given; nothing was changed"
        )
    require_database(url)
    engine = create_engine(url, options or StoreOptions.from_env(), role="reader")
    try:
        current = status(engine).revision
    finally:
        engine.dispose()
    config = alembic_config(url)
    # Checked by env.py once it holds the migration lock, so no upgrade slips in between.
    config.attributes["allow_data_loss"] = allow_data_loss
    _run(command.downgrade, config, url, revision, _where(current))


def _run(
    action: Callable[[Config, str], None], config: Config, url: str, revision: str, before: str
) -> None:
    """Run the Alembic command; `before` says where the database was (`_where`)."""
    try:
        action(config, revision)
    except SessionJournalError:
        raise
    except Exception as error:
        detail = str(getattr(error, "orig", None) or error).splitlines()[0]
        after = _current_revision(url)
        if isinstance(error, CommandError) and after == before:
            # Alembic refused the request itself (an unknown revision, say): nothing ran.
            raise InvalidRecord(
                f"cannot migrate to {revision!r}: {detail}; nothing was changed ({after})"
            ) from error
        raise MigrationFailed(
            f"migration to {revision} failed and its revision was rolled back: {detail} ({after})"
        ) from error


_PLANNING_COMMANDS = frozenset({"upgrade", "downgrade"})
"""The `alembic.command` functions whose step function only computes the steps; the others'
(`current` prints, `check` compares the schema) must run once, by Alembic."""


def _planned_steps(context: MigrationContext) -> list[RevisionStep]:
    """The steps Alembic is about to run, from the database's revision (offline: FROM), for an
    upgrade or a downgrade; none for any other command (`current`, `stamp`, `check`).
    `_migrations_fn` is how Alembic's own `run_migrations` gets them."""
    plan = context._migrations_fn
    if (
        plan is None
        or getattr(plan, "__module__", None) != command.__name__
        or getattr(plan, "__name__", None) not in _PLANNING_COMMANDS
    ):
        return []
    return [step for step in plan(context.get_current_heads(), context) if step is not None]


def _module(script: Script) -> Any:
    return script.module


def refuse_data_loss(context: MigrationContext) -> None:
    """`DataLossRefused` if the downgrade `context` is about to run would lose data the
    database holds (each revision's `downgrade_loss`); nothing for an upgrade. Called by env.py
    before any revision runs."""
    downgrades = [step.revision for step in _planned_steps(context) if not step.is_upgrade]
    if not downgrades:
        return
    assert context.connection is not None
    losses = tuple(
        f"{script.revision}: {loss}"
        for script in downgrades
        if (loss := _module(script).downgrade_loss(context.connection)) is not None
    )
    if losses:
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
        if _module(step.revision).RENDERS_OFFLINE:
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


def upgrade_sql(url: str, revision: str = "head", options: StoreOptions | None = None) -> str:
    """The SQL script (offline mode) that upgrades a database from FROM to TO, given as
    `FROM:TO` or `TO`; without FROM, the revision of the database at `url` (read from it, so it
    must exist). The database is not changed. The script is one transaction. A range holding a
    revision that cannot be rendered, an unknown revision or a backwards range is an
    `InvalidRecord`, with nothing rendered."""
    start, colon, target = revision.rpartition(":")
    if not colon:
        start = _database_revision(url, options) or "base"
    elif start != "base" and not is_known(start):
        raise InvalidRecord(
            f"unknown revision {start!r}: expected base or a revision of this code "
            f"(head {head()}); nothing was rendered"
        )
    if not is_known(target):
        raise InvalidRecord(
            f"unknown revision {target!r}: expected head or a revision of this code "
            f"(head {head()}); nothing was rendered"
        )
    order = [revision.revision for revision in revisions()]
    script = _scripts().get_revision(target)
    assert script is not None
    target = script.revision
    if start != "base":
        found = _scripts().get_revision(start)
        assert found is not None
        start = found.revision
        if order.index(start) > order.index(target):
            raise InvalidRecord(
                f"cannot render {start}:{target} as SQL: {start} is above {target}, and an "
                "upgrade does not go down; nothing was rendered"
            )
    buffer = io.StringIO()
    try:
        command.upgrade(alembic_config(url, output_buffer=buffer), f"{start}:{target}", sql=True)
    except SessionJournalError:
        raise
    except CommandError as error:
        raise InvalidRecord(
            f"cannot render {start}:{target} as SQL: {str(error).splitlines()[0]}; "
            "nothing was rendered"
        ) from error
    return buffer.getvalue()


def _database_revision(url: str, options: StoreOptions | None) -> str | None:
    """The revision of the database at `url` (which must exist), refusing one newer than this
    code."""
    require_database(url)
    engine = create_engine(url, options or StoreOptions.from_env(), role="reader")
    try:
        current = status(engine).revision
    finally:
        engine.dispose()
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "use the code that migrated it"
        )
    return current


@dataclass(frozen=True)
class RevisionInfo:
    """A revision of this code, as `db history` lists it."""

    revision: str
    down_revision: str | None
    summary: str
    """The first paragraph of the revision's docstring, on one line."""
    downgrade_loses: str
    """What downgrading it loses, in general (its `DOWNGRADE_LOSES`)."""
    renders_offline: bool


def revisions() -> list[RevisionInfo]:
    """This code's revisions, oldest first."""
    found = []
    for script in _scripts().walk_revisions():
        module = _module(script)
        down = script.down_revision
        found.append(
            RevisionInfo(
                revision=script.revision,
                down_revision=down if isinstance(down, str) else None,
                summary=" ".join(script.longdoc.split("\n\n")[0].split()),
                downgrade_loses=str(module.DOWNGRADE_LOSES),
                renders_offline=bool(module.RENDERS_OFFLINE),
            )
        )
    return found[::-1]


def _current_revision(url: str) -> str:
    """Where the database is, in words: at a revision, at none, or unreadable."""
    engine = create_engine(url, StoreOptions.from_env(), role="reader")
    try:
        revision = status(engine).revision
    except SessionJournalError:
        return "the database cannot be read"
    finally:
        engine.dispose()
    return _where(revision)


def _where(revision: str | None) -> str:
    return "the database has no revision" if revision is None else f"the database is at {revision}"
