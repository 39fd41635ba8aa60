"""Programmatic Alembic: upgrade, current revision and the schema check behind `Store.open`.

The scripts live in the repository's `alembic/` (editable installs) and, in a wheel, in the copy
the build places at `session_journal/_alembic`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Engine

from .config import StoreOptions
from .db import create_engine, translate_errors
from .errors import (
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


def alembic_config(url: str) -> Config:
    """An Alembic configuration for `url`, without reading `alembic.ini`."""
    config = Config()
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
    engine = create_engine(url, options or StoreOptions.from_env(), role="inspector")
    try:
        current = status(engine).revision
    finally:
        engine.dispose()
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "upgrade session-journal instead"
        )
    _run(command.upgrade, url, revision, _where(current))


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` (`base` removes every table)."""
    _run(command.downgrade, url, revision, _current_revision(url))


def _run(action: object, url: str, revision: str, before: str) -> None:
    """Run the Alembic command; `before` says where the database was (`_where`)."""
    try:
        action(alembic_config(url), revision)  # type: ignore[operator]
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


def _current_revision(url: str) -> str:
    """Where the database is, in words: at a revision, at none, or unreadable."""
    engine = create_engine(url, StoreOptions.from_env(), role="inspector")
    try:
        revision = status(engine).revision
    except SessionJournalError:
        return "the database cannot be read"
    finally:
        engine.dispose()
    return _where(revision)


def _where(revision: str | None) -> str:
    return "the database has no revision" if revision is None else f"the database is at {revision}"
