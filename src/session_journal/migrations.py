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

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Engine

# Exported here for env.py and for the public API of this module (they live in smaller modules).
from ._revision_checks import planned_data_loss as planned_data_loss
from ._revision_checks import refuse_data_loss as refuse_data_loss
from ._revision_checks import refuse_offline as refuse_offline
from ._revision_checks import revision_module
from .config import StoreOptions
from .errors import (
    IncompatibleSchema,
    InvalidRecord,
    MigrationFailed,
    SchemaOutOfDate,
    SessionJournalError,
)
from .storage import backfill
from .storage.engines import create_engine, require_database, translate_errors
from .storage.models import Base
from .storage.schemas import ensure_schema as ensure_schema
from .storage.schemas import missing_schema
from .storage.schemas import search_path_schemas as search_path_schemas

SCHEMA_LEVEL = 15
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
    unfinished move (see the docs, Embedding): `IncompatibleSchema`, as neither can be trusted."""
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
            'docs, "Embedding in an application with its own migrations")'
        )
    return LEGACY_VERSION_TABLE


FULL_TEXT_TABLES = "project_events_fts"
"""The prefix of SQLite's FTS5 table and its shadow tables, which only the migration knows."""


def is_own_table(name: str) -> bool:
    """Whether `name` is a table of this package: one of its models, its full-text tables, or
    its version table. A host application's Alembic `include_name` hook passes over these, so
    that its autogenerate (`alembic revision --autogenerate`, `alembic check`) neither drops
    nor compares them (docs, "Embedding in an application with its own migrations")."""
    return (
        name in Base.metadata.tables or name.startswith(FULL_TEXT_TABLES) or name == VERSION_TABLE
    )


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
    url: str,
    current: str | None,
    revision: str = "head",
    options: StoreOptions | None = None,
    *,
    engine: Engine | None = None,
) -> None:
    """`upgrade` of a database whose revision the caller has just read (`current`, by
    `status`), so that nothing reads it again first. With `engine` (a "migrator" engine of
    `url`, which the caller disposes), Alembic and the backfill after it run on that engine
    instead of engines of their own (`upgrade_for_store`)."""
    if current is not None and not is_known(current):
        raise IncompatibleSchema(
            f"database revision {current} is newer than this code (head {head()}); "
            "upgrade session-journal instead"
        )
    config = alembic_config(url)
    if engine is not None:
        config.attributes[ENGINE] = engine
    _run(command.upgrade, config, url, revision, _where(current))
    if engine is not None:
        _finish_backfill(engine)
        return
    engine = create_engine(url, options or StoreOptions.from_env(), role="migrator")
    try:
        _finish_backfill(engine)
    finally:
        engine.dispose()


def upgrade_for_store(url: str, options: StoreOptions, reader: Engine) -> SchemaStatus:
    """What `Store.open(upgrade=True)` does before the store is used: read the revision on the
    store's `reader` (a plain read, with the store's PostgreSQL timeouts: it waits for no write
    lock, so a controller opening while another migrates waits in the migration's own lock,
    as before), migrate to head unless newer code migrated the database, Alembic and the
    backfill after it on one "migrator" engine disposed before this returns, and judge the
    result on the reader (`verify`)."""
    current = status(reader).revision
    if current is None or is_known(current):
        engine = create_engine(url, options, role="migrator")
        try:
            upgrade_from(url, current, options=options, engine=engine)
        finally:
            engine.dispose()
    return verify(reader)


def _finish_backfill(engine: Engine) -> None:
    """Mark the bodies 0009 left to mark, if any (`backfill`: a revision may not import the
    package's body models); once done, one read of `event_sequences`."""
    with translate_errors("mark the canonical bodies"), engine.connect() as connection:
        columns = {c["name"] for c in sa.inspect(connection).get_columns("api_events")}
    if "body_canonical" in columns:  # at 0009 or above
        with translate_errors("mark the canonical bodies"):
            backfill.mark_canonical_bodies(engine)


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

ENGINE = "engine"
"""The key of `Config.attributes` holding an engine for env.py to migrate on (it does not
dispose it) instead of one of its own."""


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
        module = revision_module(script)
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
