"""PostgreSQL: the package's tables in a schema of their own, named by the URL's `search_path`
(`?options=-csearch_path%3Dname`); an upgrade creates it when none of the path's schemas exists,
if the role may; reading never creates it."""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from session_journal import (
    PermanentStorageError,
    SchemaOutOfDate,
    SessionRecord,
    Store,
    migrations,
)
from session_journal.cli import main
from tests.backends import postgres_base_url

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


def with_search_path(search_path: str, *, user: str | None = None) -> str:
    url = sa.make_url(postgres_base_url()).update_query_dict(
        {"options": f"-csearch_path={search_path}"}
    )
    if user is not None:
        url = url.set(username=user, password=None)
    return url.render_as_string(hide_password=False)


@contextmanager
def admin() -> Iterator[sa.Connection]:
    engine = sa.create_engine(postgres_base_url(), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def schemas_named(*names: str) -> set[str]:
    with admin() as connection:
        found = connection.execute(
            sa.text("SELECT nspname FROM pg_namespace WHERE nspname = ANY(:names)"),
            {"names": list(names)},
        )
        return set(found.scalars())


def tables_in(schema: str) -> set[str]:
    with admin() as connection:
        return set(sa.inspect(connection).get_table_names(schema=schema))


@contextmanager
def dropped_afterwards(*schemas: str) -> Iterator[None]:
    try:
        yield
    finally:
        with admin() as connection:
            for schema in schemas:
                quoted = connection.dialect.identifier_preparer.quote_identifier(schema)
                connection.execute(sa.text(f"DROP SCHEMA IF EXISTS {quoted} CASCADE"))


def new_name(prefix: str = "sj_test_") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def test_an_upgrade_creates_the_missing_schema_and_reading_never_does(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = new_name()
    url = with_search_path(schema)
    with dropped_afterwards(schema):
        with pytest.raises(SchemaOutOfDate) as out_of_date:
            Store.open(url)
        assert str(out_of_date.value) == (
            f"database schema is out of date: no schema: PostgreSQL schema '{schema}' does not "
            f"exist yet (expected {migrations.head()}): run `alembic upgrade head` (or "
            "`session-journal db upgrade`), which creates it"
        )
        assert main(["--url", url, "db", "check"]) == 1
        assert main(["--url", url, "db", "current"]) == 0
        assert schemas_named(schema) == set()

        assert main(["--url", url, "db", "upgrade"]) == 0
        assert schemas_named(schema) == {schema}
        assert {"sessions", "api_events", "session_journal_version"} <= tables_in(schema)
        with Store.open(url) as store:
            assert store.schema.revision == migrations.head()
            store.sessions.save(SessionRecord(id="s1", project_id="p"))
        with admin() as connection:
            query = sa.text(f"SELECT session_id FROM {schema}.sessions")
            assert list(connection.execute(query).scalars()) == ["s1"]
    capsys.readouterr()


def test_a_schema_name_that_needs_quoting_is_created_as_written(backend: str) -> None:
    schema = new_name("SJ-Test-")
    url = with_search_path(f'"{schema}"')
    with dropped_afterwards(schema):
        with Store.open(url, upgrade=True) as store:
            assert store.schema.version_table == "session_journal_version"
        assert schemas_named(schema, schema.lower()) == {schema}
        assert "sessions" in tables_in(schema)


def test_a_schema_of_the_path_that_exists_is_used_and_no_other_created(backend: str) -> None:
    missing, existing = new_name(), new_name()
    with dropped_afterwards(missing, existing):
        with admin() as connection:
            connection.execute(sa.text(f"CREATE SCHEMA {existing}"))
        # PostgreSQL creates tables in the first schema of the path that exists, as before.
        with Store.open(with_search_path(f"{missing},{existing}"), upgrade=True):
            pass
        assert schemas_named(missing, existing) == {existing}
        assert "sessions" in tables_in(existing)


@contextmanager
def role_without_create() -> Iterator[str]:
    role = new_name("sj_role_")
    with admin() as connection:
        connection.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
    try:
        yield role
    finally:
        with admin() as connection:
            connection.execute(sa.text(f"DROP OWNED BY {role} CASCADE"))
            connection.execute(sa.text(f"DROP ROLE {role}"))


def test_a_role_that_may_not_create_the_schema_is_told_what_to_do(backend: str) -> None:
    schema = new_name()
    with role_without_create() as role, dropped_afterwards(schema):
        url = with_search_path(schema, user=role)
        database = sa.make_url(url).database
        with pytest.raises(PermanentStorageError) as refused:
            migrations.upgrade(url)
        assert str(refused.value) == (
            f"PostgreSQL schema '{schema}' (first in the search_path) does not exist and cannot "
            f"be created: permission denied for database {database}; create it (CREATE SCHEMA "
            f"{schema} AUTHORIZATION {role}) or grant the role CREATE on the database; nothing "
            "was migrated"
        )
        assert main(["--url", url, "db", "upgrade"]) == 1
        assert schemas_named(schema) == set()

        with admin() as connection:  # what the error says to do
            connection.execute(sa.text(f"CREATE SCHEMA {schema} AUTHORIZATION {role}"))
        with Store.open(url, upgrade=True) as store:
            assert store.schema.revision == migrations.head()
        assert "sessions" in tables_in(schema)


@pytest.mark.slow
def test_concurrent_upgrades_create_the_schema_once(backend: str) -> None:
    schema = new_name()
    url = with_search_path(schema)
    with dropped_afterwards(schema):
        context = multiprocessing.get_context("spawn")
        with context.Pool(3) as pool:
            pool.map(migrations.upgrade, [url] * 3)
        assert schemas_named(schema) == {schema}
        with Store.open(url) as store:
            assert store.schema.revision == migrations.head()
        with admin() as connection:
            query = sa.text(f"SELECT count(*) FROM {schema}.session_journal_version")
            assert connection.execute(query).scalar_one() == 1


@pytest.mark.parametrize(
    ("search_path", "schemas"),
    [
        ("journal", ["journal"]),
        ('"$user", public', ["$user", "public"]),
        ('"My ""Quoted"" Schema" ,  Other', ['My "Quoted" Schema', "other"]),
        ("", []),
    ],
)
def test_the_search_path_is_read_as_the_server_reads_it(
    backend: str, search_path: str, schemas: list[str]
) -> None:
    assert migrations.search_path_schemas(search_path) == schemas
