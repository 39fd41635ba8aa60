"""Programmatic Alembic: upgrade, downgrade (refusing to lose data unless allowed), offline SQL,
history, current revision and the schema check behind `Store.open`.

Each revision module declares `DOWNGRADE_LOSES` (what its downgrade loses, in general),
`downgrade_loss(connection)` (what it would lose in this database, or `None`) and
`RENDERS_OFFLINE` (whether it can be rendered as SQL); env.py calls `refuse_data_loss` and
`refuse_offline` with them before anything runs or is printed.

The scripts live in the repository's `alembic/` (editable installs) and, in a wheel, in the copy
the build places at `session_journal/_alembic`.

The revision is recorded in this package's own version table, `session_journal_version`, so that
a host application's Alembic (and its `alembic_version`) can share the database; a database that
already records this package's revision in `alembic_version` keeps it there (`version_table`).
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
from .errors import (
    DataLossRefused,
    IncompatibleSchema,
    InvalidRecord,
    MigrationFailed,
    PermanentStorageError,
    SchemaOutOfDate,
    SessionJournalError,
)
from .storage import backfill
from .storage.engines import create_engine, error_detail, require_database, translate_errors
from .storage.models import Base

SCHEMA_LEVEL = 10
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


@lru_cache(maxsize=1)
def revision_ids() -> frozenset[str]:
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
    if not any(revision in revision_ids() for revision in legacy) and (
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


def status_at(
    url: str, options: StoreOptions | None = None, *, role: str = "inspector"
) -> SchemaStatus:
    """`status` of the database at `url`, read through a one-shot engine of `role` disposed
    before it returns (the "engine, status, dispose" of every command that only needs the
    revision; the CLI's read-only commands read as the store's "reader", with its timeouts)."""
    engine = create_engine(url, options or StoreOptions.from_env(), role=role)
    try:
        return status(engine)
    finally:
        engine.dispose()


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
    upgrade_from(url, status_at(url, options).revision, revision, options)


def upgrade_from(
    url: str, current: str | None, revision: str = "head", options: StoreOptions | None = None
) -> None:
    """`upgrade` of a database whose revision the caller has just read (`current`, by
    `status`): `Store.open(upgrade=True)` reads it on the store's reader, so no engine is made
    to read it again."""
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "upgrade session-journal instead"
        )
    _run(command.upgrade, alembic_config(url), url, revision, _where(current))
    _finish_backfill(url, options)


def _finish_backfill(url: str, options: StoreOptions | None) -> None:
    """Mark the bodies 0009 left to mark, if any (`backfill`: a revision may not import the
    package's body models); once done, one read of `event_sequences`."""
    engine = create_engine(url, options or StoreOptions.from_env(), role="migrator")
    try:
        with translate_errors("mark the canonical bodies"), engine.connect() as connection:
            columns = {c["name"] for c in sa.inspect(connection).get_columns("api_events")}
        if "body_canonical" in columns:  # at 0009 or above
            with translate_errors("mark the canonical bodies"):
                backfill.mark_canonical_bodies(engine)
    finally:
        engine.dispose()


def downgrade(
    url: str,
    revision: str,
    *,
    allow_data_loss: bool = False,
    options: StoreOptions | None = None,
) -> tuple[str, ...]:
    """Migrate the database at `url` down to `revision` (a revision id or a unique prefix of
    one, `-N` steps back, or `base`, which removes every table); what was lost of the data the
    database held, one text per revision (`"REV: what"`, as `DataLossRefused.losses`; empty when
    nothing was). A downgrade that would lose data raises `DataLossRefused` naming it, before
    anything runs, unless `allow_data_loss`; an unknown revision, or one that is not below the
    database's, is an `InvalidRecord`; a database that does not exist is `DatabaseNotFound`
    (none is created).
    `options` are used to read the database's revision; the migration's own connection takes
    its options from the environment, as `upgrade`'s does."""
    if not revision.strip("@"):
        raise InvalidRecord(
            f"cannot migrate to {revision!r}: no revision given; nothing was changed"
        )
    require_database(url)
    current = status_at(url, options).revision
    config = alembic_config(url)
    # Checked by env.py once it holds the migration lock, so no upgrade slips in between.
    config.attributes["allow_data_loss"] = allow_data_loss
    _run(command.downgrade, config, url, revision, _where(current))
    lost: tuple[str, ...] = config.attributes.get(DATA_LOST, ())
    return lost


DATA_LOST = "data_lost"
"""The key of `Config.attributes` where env.py leaves what an allowed downgrade lost."""


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


def _module(script: Script) -> Any:
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
        if (loss := _module(script).downgrade_loss(context.connection)) is not None
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
    table = VERSION_TABLE
    if not colon:
        current, table = _database_revision(url, options)
        start = current or "base"
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
    config = alembic_config(url, output_buffer=buffer)
    config.attributes["version_table"] = table  # the database's own, when FROM was read from it
    try:
        command.upgrade(config, f"{start}:{target}", sql=True)
    except SessionJournalError:
        raise
    except CommandError as error:
        raise InvalidRecord(
            f"cannot render {start}:{target} as SQL: {str(error).splitlines()[0]}; "
            "nothing was rendered"
        ) from error
    return buffer.getvalue()


def _database_revision(url: str, options: StoreOptions | None) -> tuple[str | None, str]:
    """The revision of the database at `url` (which must exist) and the table it is recorded
    in, refusing a revision newer than this code."""
    require_database(url)
    found = status_at(url, options)
    current = found.revision
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "use the code that migrated it"
        )
    return current, found.version_table


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
    try:
        revision = status_at(url).revision
    except SessionJournalError:
        return "the database cannot be read"
    return _where(revision)


def _where(revision: str | None) -> str:
    return "the database has no revision" if revision is None else f"the database is at {revision}"
