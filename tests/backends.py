"""Test databases: a fresh SQLite file or a fresh PostgreSQL schema per test.

PostgreSQL is `SESSION_JOURNAL_TEST_POSTGRES_URL`, else a server on 127.0.0.1:5432. It is
required (a failure, not a skip) when that variable is set or `CI` is set; otherwise tests on it
are skipped when no server answers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import sqlalchemy as sa

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


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL whose connections use a new, empty schema; the schema is dropped afterwards."""
    schema = f"sj_test_{uuid.uuid4().hex[:12]}"
    base = sa.make_url(postgres_base_url())
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f"CREATE SCHEMA {schema}"))
        url = base.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


@contextmanager
def database_url(backend: str, directory: Path) -> Iterator[str]:
    """A URL of an empty database on `backend`."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'journal.db'}"
        return
    with postgres_schema() as url:
        yield url
