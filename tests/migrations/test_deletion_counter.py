"""Revision 0008: the database counts every deletion of events (and on PostgreSQL sends the
followers' NOTIFY), whoever deletes them; its downgrade removes the counter and the triggers."""

from __future__ import annotations

import psycopg
import sqlalchemy as sa

from session_journal import Store, migrations
from tests.backends import pg_conninfo
from tests.factories import SessionFactory

COUNTER = "SELECT last_seq FROM event_sequences WHERE name = 'api_events_deleted'"


def execute(url: str, *statements: str) -> list[list[tuple[object, ...]]]:
    """Run the statements in one transaction; the rows of each."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("PRAGMA foreign_keys = ON")  # as the store's own
            results = [connection.execute(sa.text(s)) for s in statements]
            return [[tuple(row) for row in r] if r.returns_rows else [] for r in results]
    finally:
        engine.dispose()


def seeded(url: str) -> None:
    with Store.open(url, upgrade=True) as store:
        for session_id in ("a", "b"):
            store.sessions.save(SessionFactory(id=session_id))
            for n in range(3):
                store.faults.record_startup_fault(session_id, f"{session_id}-{n}")


def counter(url: str) -> int:
    value = execute(url, COUNTER)[0][0][0]
    assert isinstance(value, int)
    return value


def test_every_delete_of_events_moves_the_counter(url: str) -> None:
    seeded(url)
    assert counter(url) == 0
    # Plain SQL (an operator's own, or older code) as well as the package's deletes.
    execute(url, "DELETE FROM api_events WHERE seq = (SELECT MIN(seq) FROM api_events)")
    after_one = counter(url)
    assert after_one >= 1
    execute(url, "DELETE FROM sessions WHERE session_id = 'b'")  # its events by cascade
    assert counter(url) > after_one
    # A delete that is rolled back counts nothing.
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("DELETE FROM api_events"))
            connection.rollback()
    finally:
        engine.dispose()
    moved = counter(url)
    assert execute(url, "SELECT COUNT(*) FROM api_events") == [[(2,)]]
    with Store.open(url) as store:
        store.sessions.delete("a")
        assert counter(url) > moved
        assert store.events.load(after_seq=0).events == ()


def test_on_postgresql_a_delete_notifies_the_followers_at_commit(url: str, backend: str) -> None:
    if backend != "postgresql":
        return  # SQLite's followers of other processes read `PRAGMA data_version` instead
    seeded(url)
    with psycopg.connect(pg_conninfo(url), autocommit=True) as listener:
        schema = listener.execute("SELECT current_schema()").fetchone()
        listener.execute("LISTEN session_journal_events")
        engine = sa.create_engine(url)
        try:
            with engine.connect() as connection:
                connection.execute(sa.text("DELETE FROM api_events WHERE session_id = 'a'"))
                assert list(listener.notifies(timeout=0.2, stop_after=1)) == []  # not yet
                connection.commit()
        finally:
            engine.dispose()
        notified = list(listener.notifies(timeout=10, stop_after=1))
    assert schema is not None
    assert [n.payload for n in notified] == [schema[0]]


def test_the_downgrade_removes_the_counter_and_the_upgrade_starts_it_again(url: str) -> None:
    seeded(url)
    execute(url, "DELETE FROM sessions WHERE session_id = 'b'")
    assert counter(url) > 0
    migrations.downgrade(url, "0007_pruned_through")
    assert execute(url, "SELECT name FROM event_sequences") == [[("api_events",)]]
    execute(url, "DELETE FROM sessions WHERE session_id = 'a'")  # no trigger left to fail
    migrations.upgrade(url)
    assert counter(url) == 0
    with Store.open(url) as store:
        assert store.events.load(after_seq=0).events == ()
        assert store.events.latest_seq() == 6  # the frontier never moved
