"""Offline SQL (`--sql`): one transaction for the whole range, that a DBA runs against the real
database at FROM to reach TO; a range that cannot be rendered is refused before anything is
printed; rendering reads the database's revision and changes nothing."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command

from session_journal import InvalidRecord, Store, migrations
from tests.backends import pg_conninfo
from tests.factories import RelayChainFactory, SessionFactory
from tests.helpers import all_events, table_counts

REFUSED_0004 = (
    "0004_outcome_bodies reads and rewrites rows and runs online only; render up to "
    "0003_checkpoint_operations, run 0004_outcome_bodies online (session-journal db upgrade "
    "0004_outcome_bodies), then render from 0004_outcome_bodies; nothing was printed"
)


def run_script(url: str, sql: str) -> None:
    """Run the script as a DBA would, as one script through the driver (the `sqlite3` shell
    and `psql` do the same): its own BEGIN/COMMIT, nothing added around it."""
    if sa.make_url(url).get_backend_name() == "sqlite":
        database = sa.make_url(url).database
        assert database is not None
        connection = sqlite3.connect(database, isolation_level=None)
        try:
            connection.executescript(sql)
        finally:
            connection.close()
        return
    # Without parameters psycopg sends the script as one simple query, statements in order.
    with psycopg.connect(pg_conninfo(url), autocommit=True) as connection:
        connection.execute(sql.encode())


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        return migrations.status(engine).revision
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("start", "target"),
    [("base", "0003_checkpoint_operations"), ("0004_outcome_bodies", "head")],
)
def test_the_rendered_sql_takes_a_real_database_from_start_to_target(
    url: str, start: str, target: str
) -> None:
    if start != "base":
        migrations.upgrade(url, start)
    sql = migrations.upgrade_sql(url, f"{start}:{target}")
    # One transaction for the whole range.
    statements = [line.strip() for line in sql.splitlines()]
    assert (statements.count("BEGIN;"), statements.count("COMMIT;")) == (1, 1)
    assert revision_of(url) == (None if start == "base" else start)  # rendering changed nothing

    run_script(url, sql)

    reached = migrations.head() if target == "head" else target
    assert revision_of(url) == reached
    if target == "head":
        command.check(migrations.alembic_config(url))  # the same schema as online
        with Store.open(url) as store:
            store.sessions.save(SessionFactory(id="s1"))
            assert store.projection.apply("s1", RelayChainFactory()) == 3


def test_without_from_the_sql_starts_at_the_database_revision_and_restores_the_projection(
    url: str,
) -> None:
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        chain = RelayChainFactory()
        store.projection.apply("s1", chain)
    migrations.downgrade(url, "0004_outcome_bodies")
    counts = table_counts(url, ["sessions", "api_events"])

    sql = migrations.upgrade_sql(url)  # from 0004_outcome_bodies, read from the database
    assert "-- Running upgrade 0004_outcome_bodies -> 0005_relay_projection" in sql
    assert "0003_checkpoint_operations ->" not in sql
    assert revision_of(url) == "0004_outcome_bodies"
    run_script(url, sql)

    assert revision_of(url) == migrations.head()
    assert table_counts(url, ["sessions", "api_events"]) == counts
    with Store.open(url) as store:
        assert store.projection.apply("s1", chain) == 0  # the kept projection is back
        assert len(all_events(store)) == 2


def test_a_range_that_cannot_be_rendered_is_refused_before_anything_is_printed(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(url, "0002_startup_cleanup")
    with pytest.raises(InvalidRecord) as refused:
        migrations.upgrade_sql(url)
    assert str(refused.value) == (
        f"cannot render 0002_startup_cleanup:0015_recorded_at_index as SQL: {REFUSED_0004}"
    )
    # Straight through Alembic, too: nothing on stdout, not even `BEGIN;`.
    with pytest.raises(InvalidRecord, match="0004_outcome_bodies reads and rewrites rows"):
        command.upgrade(migrations.alembic_config(url), "0002_startup_cleanup:head", sql=True)
    assert capsys.readouterr().out == ""
    assert revision_of(url) == "0002_startup_cleanup"


@pytest.mark.parametrize(
    ("revision", "message"),
    [
        (
            "nope",
            "unknown revision 'nope': expected head or a revision of this code "
            "(head 0015_recorded_at_index); nothing was rendered",
        ),
        (
            "nope:head",
            "unknown revision 'nope': expected base or a revision of this code "
            "(head 0015_recorded_at_index); nothing was rendered",
        ),
        (
            "0006_project_index:0005_relay_projection",
            "cannot render 0006_project_index:0005_relay_projection as SQL: 0006_project_index "
            "is above 0005_relay_projection, and an upgrade does not go down; nothing was "
            "rendered",
        ),
    ],
)
def test_a_bad_range_is_one_error(migrated_url: str, revision: str, message: str) -> None:
    with pytest.raises(InvalidRecord) as refused:
        migrations.upgrade_sql(migrated_url, revision)
    assert str(refused.value) == message
