"""Programmatic Alembic: upgrade, current revision and the schema check behind `Store.open`.

The scripts live in the repository's `alembic/` (editable installs) and, in a wheel, in the copy
the build places at `session_journal/_alembic`.

The revision is recorded in this package's own version table, `session_journal_version`, so that
a host application's Alembic (and its `alembic_version`) can share the database; a database that
already records this package's revision in `alembic_version` keeps it there (`version_table`).
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
from .db import create_engine, error_detail, translate_errors
from .errors import (
    IncompatibleSchema,
    InvalidRecord,
    MigrationFailed,
    PermanentStorageError,
    SchemaOutOfDate,
    SessionJournalError,
)
from .models import Base

SCHEMA_LEVEL = 6
"""The schema level of this code's head revision (see `schema_compatibility`)."""

UPGRADE_HINT = "run `alembic upgrade head` (or `session-journal db upgrade`)"

VERSION_TABLE = "session_journal_version"
"""The table in which this package records its revision (never a host's `alembic_version`)."""
LEGACY_VERSION_TABLE = "alembic_version"
"""Alembic's default version table, where databases migrated before `VERSION_TABLE` existed
record this package's revision; they keep it there (`version_table`)."""
VERSION_TABLES = (VERSION_TABLE, LEGACY_VERSION_TABLE)
"""The tables this package's revision may be recorded in (`-x version_table=` offline)."""


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


@lru_cache(maxsize=1)
def revisions() -> frozenset[str]:
    """The ids of every revision of this code."""
    return frozenset(script.revision for script in _scripts().walk_revisions())


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


def _recorded(connection: sa.Connection, table: str) -> list[str] | None:
    """The revisions recorded in the version table `table`, or `None` when there is no such
    table (in the connection's schema, as Alembic looks for it)."""
    if not sa.inspect(connection).has_table(table):
        return None
    rows = connection.execute(sa.text(f"SELECT version_num FROM {table}")).scalars()
    return [str(row) for row in rows]


def version_table(connection: sa.Connection) -> str:
    """The table that holds this package's revision in the connection's database (and schema):
    `alembic_version` when it already holds this package's revision (a database migrated before
    `session_journal_version` existed, so older code and rolling upgrades keep working), else
    `session_journal_version`. Every reader and writer of the revision asks here: `env.py`,
    `status` (so `Store.open`, `db check`, `db current`).

    A revision in `alembic_version` is this package's when this code knows it, or, for one it
    does not know (newer code), when this package's `schema_compatibility` table is there and
    `session_journal_version` holds nothing. Any other `alembic_version` is a host
    application's, and is never read or written. A revision recorded in both tables is an
    unfinished move (see the README): `IncompatibleSchema`, as neither can be trusted."""
    legacy = _recorded(connection, LEGACY_VERSION_TABLE)
    if not legacy:
        return VERSION_TABLE
    own = _recorded(connection, VERSION_TABLE)
    if not any(revision in revisions() for revision in legacy) and (
        own or not sa.inspect(connection).has_table("schema_compatibility")
    ):
        return VERSION_TABLE  # the host application's alembic_version
    if own:
        raise IncompatibleSchema(
            f"this package's revision is recorded in both {LEGACY_VERSION_TABLE} "
            f"({', '.join(legacy)}) and {VERSION_TABLE} ({', '.join(own)}): finish moving it "
            f"(delete this package's row from {LEGACY_VERSION_TABLE}, or drop {VERSION_TABLE}; "
            'README, "Embedding in an application with its own migrations")'
        )
    return LEGACY_VERSION_TABLE


FULL_TEXT_TABLES = "project_events_fts"
"""The prefix of SQLite's FTS5 table and its shadow tables, which only the migration knows."""


def is_own_table(name: str) -> bool:
    """Whether `name` is a table of this package: one of its models, its full-text tables, or
    its version table. A host application's Alembic `include_name` hook passes over these, so
    that its autogenerate (`alembic revision --autogenerate`, `alembic check`) neither drops
    nor compares them (README, "Embedding in an application with its own migrations")."""
    return (
        name in Base.metadata.tables or name.startswith(FULL_TEXT_TABLES) or name == VERSION_TABLE
    )


_PATH_ENTRY = re.compile(r'\s*(?:"(?P<quoted>(?:[^"]|"")*)"|(?P<bare>[^,\s]+))\s*(?:,|$)')


def search_path_schemas(search_path: str) -> list[str]:
    """The schema names of a PostgreSQL `search_path` setting, in order, as the server reads
    them: quoted names as written, unquoted ones in lower case (`"$user"` stays as it is)."""
    names, position = [], 0
    while position < len(search_path.rstrip()):
        entry = _PATH_ENTRY.match(search_path, position)
        if entry is None:
            raise InvalidRecord(f"cannot read the PostgreSQL search_path {search_path!r}")
        quoted = entry["quoted"]
        names.append(quoted.replace('""', '"') if quoted is not None else entry["bare"].lower())
        position = entry.end()
    return names


def missing_schema(connection: sa.Connection) -> str | None:
    """On PostgreSQL, the schema this package's tables would be created in when it does not
    exist: the first schema of the `search_path` (`"$user"` as the role's name) when none of
    the path's schemas exists (PostgreSQL then has no schema to create tables in). `None` on
    SQLite and whenever a schema of the path exists (the tables go there, as before)."""
    if connection.dialect.name != "postgresql":
        return None
    row = connection.execute(
        sa.text("SELECT current_schema(), current_setting('search_path'), current_user")
    ).one()
    if row[0] is not None:
        return None
    path = search_path_schemas(row[1])
    if not path:
        return None
    return str(row[2]) if path[0] == "$user" else path[0]


def ensure_schema(connection: sa.Connection, *, lock_key: int) -> str | None:
    """Create the schema `missing_schema` names, if any (`CREATE SCHEMA IF NOT EXISTS`, under a
    transaction-level advisory lock on `lock_key` and the schema's name, so that concurrent
    upgrades create it once), and commit; the schema created, or `None`. A role that may not
    create it gets a `PermanentStorageError` that says what to do."""
    schema = missing_schema(connection)
    connection.rollback()
    if schema is None:
        return None
    preparer = connection.dialect.identifier_preparer
    quoted = preparer.quote(schema)
    try:
        connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(:key, hashtext(:schema))"),
            {"key": lock_key, "schema": schema},
        )
        connection.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))
        connection.commit()
    except sa.exc.DBAPIError as error:
        connection.rollback()
        role = preparer.quote(str(connection.execute(sa.text("SELECT current_user")).scalar()))
        connection.rollback()
        raise PermanentStorageError(
            f"PostgreSQL schema {schema!r} (first in the search_path) does not exist and cannot "
            f"be created: {error_detail(error)}; create it (CREATE SCHEMA {quoted} "
            f"AUTHORIZATION {role}) or grant the role CREATE on the database; nothing was "
            "migrated"
        ) from error
    return schema


@dataclass(frozen=True)
class SchemaStatus:
    """What `db check` reports: the revision, the levels, whether this code may use it, and
    the table the revision is recorded in (`version_table`)."""

    revision: str | None
    schema_level: int | None
    minimum_compatible_level: int | None
    usable: bool
    verdict: str
    version_table: str = VERSION_TABLE


def status(engine: Engine) -> SchemaStatus:
    """Read the database's revision and compatibility levels and judge them."""
    with translate_errors("read the schema revision"), engine.connect() as connection:
        missing = missing_schema(connection)
        table = version_table(connection)
        context = MigrationContext.configure(connection, opts={"version_table": table})
        revision = context.get_current_revision()
        levels = None
        if sa.inspect(connection).has_table("schema_compatibility"):
            levels = connection.execute(
                sa.text("SELECT schema_level, minimum_compatible_level FROM schema_compatibility")
            ).first()
    level, minimum = (levels[0], levels[1]) if levels else (None, None)
    expected = head()
    if revision is None and missing is not None:
        usable, verdict = (
            False,
            f"no schema: PostgreSQL schema {missing!r} does not exist yet (expected {expected}): "
            f"{UPGRADE_HINT}, which creates it",
        )
    elif revision is None:
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
    return SchemaStatus(revision, level, minimum, usable, verdict, table)


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
