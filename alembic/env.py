"""Alembic environment for session-journal.

URL: `config.attributes["url"]` (programmatic use), else `-x url=...`, else
`SESSION_JOURNAL_DATABASE_URL`, else `sqlite:///session-journal.db`. Engine: a "migrator"
engine of that URL in `config.attributes["engine"]` (`migrations.ENGINE`: `Store.open(upgrade=True)`
reads the revision and migrates on one engine), else one made for the run and disposed after it.

Logging: configured from the ini file (`fileConfig`) only when it has the logging sections
(`[loggers]`, `[handlers]`, `[formatters]`); a minimal ini with only `[alembic]` works.

Online, each revision runs in its own transaction (`transaction_per_migration`), so a revision
that fails midway leaves the database at the previous revision.

Offline (`--sql`), the script is ONE transaction for the whole range (`BEGIN;` ... `COMMIT;`): run
by a DBA, it moves the database from FROM to TO or, if a statement fails, leaves it at FROM. A
range holding a revision that cannot be rendered (`RENDERS_OFFLINE = False`: it reads rows) is
refused before anything is printed.

Downgrades that would lose data this database holds are refused before anything runs
(`DataLossRefused`, each revision's `downgrade_loss`), unless `-x allow_data_loss=yes`
(`config.attributes["allow_data_loss"]` in programmatic use). Under the `alembic` command the
refusals are one line (`FAILED: ...`, exit 1), not a traceback.

SQLite: a batch migration rebuilds a table by dropping it; with foreign keys on, dropping
`sessions` would cascade and empty every child table. `PRAGMA foreign_keys=OFF` is a no-op inside
a transaction, so the migration engine sets it when it connects, before the first `BEGIN`, and
`PRAGMA foreign_key_check` runs before each revision commits (a violation aborts it).

A command that only reads the database (`current`, `check`, `history -i`, `show current`: no
destination revision, see `migrates`) refuses a missing SQLite file as `session-journal db
current` does, before anything (the file, its lock file) is created, and creates no PostgreSQL
schema.

Concurrent upgrades (two operators, or several controllers starting at once) are serialised from
before the current revision is read until the last revision is done: on PostgreSQL by a
session-level advisory lock, on SQLite by `flock` on a lock file beside the database
(`sqlite_migration_lock`; never on the database file itself, see there).

Embedding: the revision is recorded in `session_journal_version`, or in `alembic_version` for a
database that already records it there (`migrations.version_table`, read under the upgrade
lock); offline, `session_journal_version` unless `-x version_table=alembic_version` (or
`config.attributes["version_table"]`) says otherwise. Only this package's tables are compared
(`include_name`), so a host application's tables in the same schema are no drift. On
PostgreSQL, a missing schema named first in the `search_path` is created before migrating
(`migrations.ensure_schema`).
"""

from __future__ import annotations

import configparser
import logging.config
from contextlib import nullcontext
from typing import NoReturn

import sqlalchemy as sa
from alembic import context
from alembic.runtime.migration import MigrationContext
from alembic.util import CommandError

from session_journal import migrations
from session_journal.config import StoreOptions, resolve_url
from session_journal.errors import InvalidRecord, SessionJournalError
from session_journal.migrations import planned_data_loss, refuse_data_loss, refuse_offline
from session_journal.storage.engines import (
    check_url,
    create_engine,
    require_database,
    sqlite_migration_lock,
)
from session_journal.storage.models import Base

# Key of the upgrade lock; the second key is the schema, so separate schemas do not wait on
# each other.
ADVISORY_LOCK_KEY = 0x53_4A_4D_47  # "SJMG"

LOGGING_SECTIONS = ("loggers", "handlers", "formatters")

config = context.config


def refuse(error: SessionJournalError) -> NoReturn:
    """Raise `error`; under the `alembic` command as a `CommandError`, which it prints as one
    line (`FAILED: ...`, exit 1) instead of a traceback."""
    if config.cmd_opts is not None:
        raise CommandError(str(error)) from error
    raise error


def configure_logging(path: str) -> None:
    """`fileConfig` the ini at `path` if it has the logging sections; an ini without them (only
    `[alembic]`) leaves logging alone, and one with only some of them is refused by name."""
    parser = configparser.ConfigParser()
    parser.read(path)
    present = [section for section in LOGGING_SECTIONS if parser.has_section(section)]
    if not present:
        return
    if len(present) < len(LOGGING_SECTIONS):
        missing = ", ".join(f"[{s}]" for s in LOGGING_SECTIONS if s not in present)
        refuse(
            InvalidRecord(
                f"{path} configures logging but lacks {missing}: give [loggers], [handlers] "
                "and [formatters], or none of them"
            )
        )
    logging.config.fileConfig(path, disable_existing_loggers=False)


if config.config_file_name is not None and config.attributes.get("url") is None:
    configure_logging(config.config_file_name)

x_arguments = context.get_x_argument(as_dictionary=True)
try:
    # An empty `-x url=` is refused (resolve_url), not taken for the default database.
    url = check_url(config.attributes.get("url") or resolve_url(x_arguments.get("url")))
except SessionJournalError as error:
    refuse(error)
is_sqlite = sa.make_url(url).get_backend_name() == "sqlite"


def allow_data_loss() -> bool:
    """`config.attributes["allow_data_loss"]`, else `-x allow_data_loss=yes|no` (default no)."""
    if "allow_data_loss" in config.attributes:
        return bool(config.attributes["allow_data_loss"])
    given = x_arguments.get("allow_data_loss", "no")
    if given not in ("yes", "no"):
        refuse(InvalidRecord(f"-x allow_data_loss must be yes or no, got {given!r}"))
    return given == "yes"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Compare only this package's model tables: not a host application's tables in the same
    schema, nor what only the migrations know (SQLite's FTS5 table and its shadow tables,
    PostgreSQL's generated `tsv` column and its GIN index, the projection tables that 0005's
    downgrade keeps as `retired_0005_*`, back in place after the next upgrade)."""
    if type_ == "table":
        return name in Base.metadata.tables
    return not (type_ == "column" and name == "tsv") and name != "ix_project_events_tsv"


def offline_version_table() -> str:
    """The version table of an offline script: `session_journal_version`, unless the caller
    names `alembic_version` for a database that records its revision there."""
    table = str(
        config.attributes.get("version_table")
        or x_arguments.get("version_table")
        or migrations.VERSION_TABLE
    )
    if table not in migrations.VERSION_TABLES:
        refuse(
            InvalidRecord(
                f"version_table must be one of {', '.join(migrations.VERSION_TABLES)}, "
                f"got {table!r}"
            )
        )
    return table


options = {
    "target_metadata": Base.metadata,
    "include_name": include_name,
    "render_as_batch": is_sqlite,
    "compare_type": True,
}


def foreign_key_check(*, ctx: MigrationContext, **_: object) -> None:
    """`on_version_apply` callback: abort the revision, still inside its transaction, if it
    broke a foreign key."""
    assert ctx.connection is not None
    broken = ctx.connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"revision broke foreign keys, rolled back: {broken[:5]}")


def run_offline() -> None:
    # One transaction for the whole range (no `transaction_per_migration`): `BEGIN;`, every
    # revision with its version-table update, `COMMIT;`. Whether every revision of the range
    # renders is checked before the first line is printed. On SQLite a batch rebuild must run
    # with foreign keys off (set before BEGIN) or dropping `sessions` would cascade into every
    # child table; `PRAGMA foreign_key_check` before the commit lists any broken foreign key
    # (it prints them; it does not stop the script).
    context.configure(
        url=url,
        literal_binds=True,
        transactional_ddl=True,
        version_table=offline_version_table(),
        transaction_per_migration=False,
        **options,
    )
    try:
        refuse_offline(context.get_context(), str(context.get_revision_argument()))
    except SessionJournalError as error:
        refuse(error)
    if is_sqlite:
        context.execute("PRAGMA foreign_keys=OFF")
    with context.begin_transaction():
        context.run_migrations()
        if is_sqlite:
            context.execute("PRAGMA foreign_key_check")
    if is_sqlite:
        context.execute("PRAGMA foreign_keys=ON")


def migrates() -> bool:
    """Whether the command moves the database to a revision (`upgrade`, `downgrade`, `stamp`:
    the commands given a destination); `current`, `check`, `history -i` and `show current`
    only read it. `get_revision_argument` has no destination to give them."""
    try:
        context.get_revision_argument()
    except KeyError:
        return False
    return True


def run_online() -> None:
    writes = migrates()
    if not writes:  # a read never creates a SQLite file (nor its lock file) or a schema
        try:
            require_database(url)
        except SessionJournalError as error:
            refuse(error)
    # The caller's engine (`migrations.upgrade_for_store`: one for its reads and the migration),
    # else one of this run's own, disposed at the end.
    given: sa.Engine | None = config.attributes.get(migrations.ENGINE)
    engine = given or create_engine(url, StoreOptions.from_env(), role="migrator")
    try:
        with (
            sqlite_migration_lock(url) if is_sqlite else nullcontext(),
            engine.connect() as connection,
        ):
            if not is_sqlite:
                if writes:
                    migrations.ensure_schema(connection, lock_key=ADVISORY_LOCK_KEY)
                connection.execute(
                    sa.text("SELECT pg_advisory_lock(:key, hashtext(current_schema()))"),
                    {"key": ADVISORY_LOCK_KEY},
                )
                connection.commit()
            callbacks = [foreign_key_check] if is_sqlite else []
            try:
                # Read under the lock; the read's transaction ends before Alembic begins its own.
                version_table = migrations.version_table(connection)
                connection.commit()
                context.configure(
                    connection=connection,
                    transactional_ddl=True,
                    transaction_per_migration=True,
                    on_version_apply=callbacks,
                    version_table=version_table,
                    **options,
                )
                try:
                    if not allow_data_loss():
                        refuse_data_loss(context.get_context())
                    else:  # for the caller to report what went (`migrations.downgrade`)
                        lost = planned_data_loss(context.get_context())
                        config.attributes[migrations.DATA_LOST] = lost
                except SessionJournalError as error:
                    refuse(error)
                finally:
                    connection.rollback()  # the reads' transaction: before any revision
                with context.begin_transaction():
                    context.run_migrations()
            finally:
                if not is_sqlite:
                    connection.rollback()
                    connection.execute(
                        sa.text("SELECT pg_advisory_unlock(:key, hashtext(current_schema()))"),
                        {"key": ADVISORY_LOCK_KEY},
                    )
                    connection.commit()
    finally:
        if given is None:
            engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
