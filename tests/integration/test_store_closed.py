"""A closed store refuses every call and opens no connection again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from session_journal import SessionState, Store, StoreClosed
from tests.factories import ActivityFactory, SessionFactory
from tests.helpers import left_for_the_collector

pytestmark = pytest.mark.both_apis


def calls(store: Store) -> dict[str, Callable[[], object]]:
    record = SessionFactory(id="session-1")
    checkpointing = record.model_copy(update={"state": SessionState.CHECKPOINTING})
    return {
        "sessions.save": lambda: store.sessions.save(record),
        "sessions.save_lifecycle": lambda: store.sessions.save_lifecycle(record),
        "sessions.get": lambda: store.sessions.get("session-1"),
        "sessions.list": lambda: store.sessions.list(),
        "sessions.delete": lambda: store.sessions.delete("session-1"),
        "events.load": lambda: store.events.load(after_seq=0),
        "events.latest_seq": lambda: store.events.latest_seq(),
        "activity.record": lambda: store.activity.record([("session-1", ActivityFactory())], 5),
        "activity.get": lambda: store.activity.get("session-1"),
        "faults.record_startup_fault": lambda: store.faults.record_startup_fault(
            "session-1", "boom"
        ),
        "checkpoints.begin": lambda: store.checkpoints.begin(checkpointing, "attempt-1"),
        "checkpoints.get": lambda: store.checkpoints.get("session-1"),
        "checkpoints.recover_interrupted": lambda: store.checkpoints.recover_interrupted(
            "2026-09-27T12:00:00Z"
        ),
        "projection.load": lambda: store.projection.load("session-1"),
        "projection.apply": lambda: store.projection.apply("session-1", []),
        "index.search": lambda: store.index.search("word"),
        "unit_of_work": lambda: store.unit_of_work().__enter__(),
    }


def test_every_call_after_close_raises_store_closed(migrated_url: str) -> None:
    store = Store.open(migrated_url, upgrade=True)
    store.sessions.save(SessionFactory(id="session-1"))
    store.close()
    refused = {}
    for name, call in calls(store).items():
        with pytest.raises(StoreClosed) as raised:
            call()
        refused[name] = str(raised.value)
    assert refused["events.load"].endswith("the store is closed")
    store.close()  # a second close is harmless
    database = store._database
    assert (database.reader.pool.checkedin(), database.writer.pool.checkedin()) == (0, 0)
    with Store.open(migrated_url) as reopened:  # nothing was written after the close
        assert reopened.sessions.get("session-1") == SessionFactory(id="session-1")
        assert reopened.events.latest_seq() == 0


def test_leaving_the_with_block_closes_the_store(migrated_url: str) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        assert store.events.latest_seq() == 0
    with pytest.raises(StoreClosed):
        store.events.latest_seq()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("table", "read", "answer"),
    [
        pytest.param(
            "sessions", lambda store: store.sessions.get("session-1"), None, id="a transaction"
        ),
        pytest.param(
            "event_sequences", lambda store: store.events.latest_seq(), 0, id="one statement"
        ),
    ],
)
def test_a_read_in_progress_when_the_store_closes_closes_its_connection(
    migrated_url: str, table: str, read: Callable[[Store], object], answer: object
) -> None:
    """The read, waiting for a lock when the store closes, ends with its answer; its connection
    is then closed, not given back to the pool of the engine the close disposed, where no one
    would close it (psycopg warns of it when it is collected)."""
    store = Store.open(migrated_url)
    outcome: list[object] = []
    reader = threading.Thread(target=lambda: outcome.append(read(store)))
    locker = sa.create_engine(migrated_url)
    try:
        with locker.connect() as lock:
            lock.execute(sa.text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            reader.start()
            waiting = sa.text(
                "SELECT count(*) FROM pg_locks"
                " WHERE NOT granted AND relation = CAST(:table AS regclass)"
            )
            deadline = time.monotonic() + 30
            while lock.execute(waiting, {"table": table}).scalar_one() == 0:
                assert time.monotonic() < deadline, "the read never waited for the lock"
                time.sleep(0.01)
            store.close()
            lock.rollback()  # the lock is released: the read goes on
        reader.join(30)
    finally:
        store.close()  # closing again does nothing
        locker.dispose()
    assert outcome == [answer]
    assert left_for_the_collector() == []
