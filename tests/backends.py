"""Test databases: an empty one (a fresh SQLite file or PostgreSQL schema), or a copy of a
database migrated once per run (a copied SQLite file, or a PostgreSQL schema made by the
script `pg_dump` wrote of a schema migrated once).

PostgreSQL is `SESSION_JOURNAL_TEST_POSTGRES_URL`, else a server on 127.0.0.1:5432. It is
required (a failure, not a skip) when that variable is set or `CI` is set; otherwise tests on it
are skipped when no server answers.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import psycopg
import sqlalchemy as sa

from session_journal import Store

POSTGRES_ENV = "SESSION_JOURNAL_TEST_POSTGRES_URL"
DEFAULT_POSTGRES = "postgresql+psycopg://root@127.0.0.1:5432/test"


def postgres_required() -> bool:
    return bool(os.environ.get(POSTGRES_ENV) or os.environ.get("CI"))


def postgres_base_url() -> str:
    return os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES


@cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used, or `None` when it answers."""
    engine = sa.create_engine(postgres_base_url(), connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as error:
        return f"PostgreSQL at {postgres_base_url()} does not answer: {error}".splitlines()[0]
    finally:
        engine.dispose()
    return None


def pg_conninfo(url: str) -> str:
    """A libpq URL for psycopg of a SQLAlchemy PostgreSQL URL (its options, such as the
    schema's search_path, kept)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def schema_url(schema: str) -> str:
    """The URL of the test server whose connections use `schema`."""
    url = sa.make_url(postgres_base_url()).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


@contextmanager
def postgres_schema(script: str | None = None) -> Iterator[str]:
    """A URL whose connections use a new schema, empty or made by `script` (a dump in which
    `SCHEMA` stands for the schema's name, see `migrated_template`); the schema is dropped
    afterwards."""
    schema = f"sj_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_base_url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            if script is None:
                connection.execute(sa.text(f"CREATE SCHEMA {schema}"))
            else:
                # Without parameters psycopg sends the script as one simple query: the server
                # runs its statements in one implicit transaction (one commit).
                driver = connection.connection.driver_connection
                assert isinstance(driver, psycopg.Connection)
                driver.execute(script.replace(SCHEMA, schema))
        yield schema_url(schema)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


SCHEMA = "__sj_template_schema__"
"""Stands for the schema's name in a template's script."""


def dump_schema(schema: str) -> str:
    """The SQL that makes a copy of `schema` (its tables, indexes, sequences and rows), read by
    `pg_dump`, with `SCHEMA` in place of its name. The psql meta-commands recent `pg_dump`
    versions write (`\\restrict`) are left out: the script is run by the server alone."""
    libpq_url = sa.make_url(postgres_base_url()).set(drivername="postgresql")
    dumped = subprocess.run(
        [
            "pg_dump",
            "--no-owner",
            "--no-privileges",
            "--inserts",
            f"--schema={schema}",
            f"--dbname={libpq_url.render_as_string(hide_password=False)}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line for line in dumped.splitlines() if not line.startswith("\\")]
    assert SCHEMA not in dumped
    return "\n".join(lines).replace(schema, SCHEMA)


NOTICES: list[str] = []
"""What the run tells at its end (`conftest.pytest_terminal_summary`): a slower setup it fell
back to. Not a warning, which the suite's `filterwarnings` makes an error."""


@contextmanager
def migrated_template(backend: str, directory: Path) -> Iterator[str | None]:
    """A database migrated to head once, to be copied by `migrated_database_url`.

    SQLite: a file in `directory` (its path), closed: no connection holds it open while it is
    copied. PostgreSQL: the script that makes a copy of a schema migrated once (see
    `dump_schema`), or `None` when `pg_dump` is missing or fails (then each copy is migrated).
    A PostgreSQL template database (`CREATE DATABASE ... TEMPLATE`) would be simpler, but it
    copies and WAL-logs the 8 MB of system catalogs of every copy: slower than migrating.
    """
    if backend == "sqlite":
        path = directory / "template.db"
        Store.open(f"sqlite:///{path}", upgrade=True).close()
        journals = [path.with_name(f"{path.name}-{suffix}") for suffix in ("wal", "shm", "journal")]
        assert not any(journal.exists() for journal in journals), "the template is still open"
        yield str(path)
        return
    with postgres_schema() as url:
        Store.open(url, upgrade=True).close()
        schema = sa.make_url(url).query["options"].removeprefix("-csearch_path=")
        try:
            script: str | None = dump_schema(schema)
        except (OSError, subprocess.CalledProcessError) as error:
            NOTICES.append(f"pg_dump failed, each test migrated its database: {error}")
            script = None
    yield script


@contextmanager
def migrated_database_url(backend: str, template: str | None, directory: Path) -> Iterator[str]:
    """A URL of a database migrated to head: a copy of `template` (see `migrated_template`)."""
    if backend == "sqlite":
        assert template is not None
        path = directory / "journal.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    with postgres_schema(template) as url:
        if template is None:
            Store.open(url, upgrade=True).close()
        yield url


@contextmanager
def database_url(backend: str, directory: Path) -> Iterator[str]:
    """A URL of an empty database on `backend` (on SQLite an empty file: read-only use never
    creates a database, see `missing_sqlite_url` for none at all)."""
    if backend == "sqlite":
        path = directory / "journal.db"
        sqlite3.connect(path).close()  # an empty database, before anything else opens it
        yield f"sqlite:///{path}"
        return
    with postgres_schema() as url:
        yield url
