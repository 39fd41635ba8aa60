"""Throwaway databases for the benchmarks: a SQLite file or a PostgreSQL schema."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

POSTGRES = os.environ.get(
    "SESSION_JOURNAL_BENCH_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test"
)


@contextmanager
def database(backend: str, name: str) -> Iterator[str]:
    """The URL of an empty database on `backend`, removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/{name}.db"
        return
    schema = f"sj_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE SCHEMA {schema}"))
    try:
        url = sa.make_url(POSTGRES).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
