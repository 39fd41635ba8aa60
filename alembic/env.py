"""Alembic environment for session-journal.

URL: `config.attributes["url"]` (programmatic use), else `-x url=...`, else
`SESSION_JOURNAL_DATABASE_URL`, else `sqlite:///session-journal.db`.

Each revision runs in its own transaction (`transaction_per_migration`), so a revision that fails
midway leaves the database at the previous revision.

SQLite: a batch migration rebuilds a table by dropping it; with foreign keys on, dropping
`sessions` would cascade and empty every child table. `PRAGMA foreign_keys=OFF` is a no-op inside
a transaction, so the migration engine sets it when it connects, before the first `BEGIN`, and
`PRAGMA foreign_key_check` runs before each revision commits (a violation aborts it).

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

import logging.config
from contextlib import nullcontext

import sqlalchemy as sa
from alembic import context
from alembic.runtime.migration import MigrationContext

from session_journal import migrations
from session_journal.config import StoreOptions, resolve_url
from session_journal.db import create_engine, sqlite_migration_lock
from session_journal.errors import InvalidRecord
from session_journal.models import Base

# Key of the upgrade lock; the second key is the schema, so separate schemas do not wait on
# each other.
ADVISORY_LOCK_KEY = 0x53_4A_4D_47  # "SJMG"

config = context.config
if config.config_file_name is not None and config.attributes.get("url") is None:
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

# An empty `-x url=` is refused (resolve_url), not taken for the default database.
url = config.attributes.get("url") or resolve_url(
    context.get_x_argument(as_dictionary=True).get("url")
)
is_sqlite = sa.make_url(url).get_backend_name() == "sqlite"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Compare only this package's model tables: not a host application's tables in the same
    schema, nor the full-text machinery that only the migration knows (SQLite's FTS5 table and
    its shadow tables, PostgreSQL's generated `tsv` column and its GIN index)."""
    if type_ == "table":
        return name in Base.metadata.tables
    return not (type_ == "column" and name == "tsv") and name != "ix_project_events_tsv"


def offline_version_table() -> str:
    """The version table of an offline script: `session_journal_version`, unless the caller
    names `alembic_version` for a database that records its revision there."""
    table = str(
        config.attributes.get("version_table")
        or context.get_x_argument(as_dictionary=True).get("version_table")
        or migrations.VERSION_TABLE
    )
    if table not in migrations.VERSION_TABLES:
        raise InvalidRecord(
            f"version_table must be one of {', '.join(migrations.VERSION_TABLES)}, got {table!r}"
        )
    return table


options = {
    "target_metadata": Base.metadata,
    "include_name": include_name,
    "render_as_batch": is_sqlite,
    "transaction_per_migration": True,
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
    # The script runs every revision in one transaction. On SQLite a batch rebuild must run with
    # foreign keys off (set before BEGIN) or dropping `sessions` would cascade into every child
    # table; the script checks foreign keys before it commits.
    context.configure(
        url=url,
        literal_binds=True,
        transactional_ddl=True,
        version_table=offline_version_table(),
        **options,
    )
    if is_sqlite:
        context.execute("PRAGMA foreign_keys=OFF")
    with context.begin_transaction():
        context.run_migrations()
        if is_sqlite:
            context.execute("PRAGMA foreign_key_check")
    if is_sqlite:
        context.execute("PRAGMA foreign_keys=ON")


def run_online() -> None:
    engine = create_engine(url, StoreOptions.from_env(), role="migrator")
    try:
        with (
            sqlite_migration_lock(url) if is_sqlite else nullcontext(),
            engine.connect() as connection,
        ):
            if not is_sqlite:
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
                    on_version_apply=callbacks,
                    version_table=version_table,
                    **options,
                )
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
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
