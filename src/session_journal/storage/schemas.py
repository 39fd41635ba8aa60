"""PostgreSQL's schema for this package's tables: the schemas of a `search_path`, the one the
tables would be created in when none exists (`missing_schema`), and its creation before an
upgrade (`ensure_schema`, which env.py calls under the upgrade lock)."""

from __future__ import annotations

import re

import sqlalchemy as sa

from ..errors import InvalidRecord, PermanentStorageError
from .engines import error_detail

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
