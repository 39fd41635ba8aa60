"""A closed store refuses every call and opens no connection again."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from session_journal import SessionState, Store, StoreClosed
from tests.factories import ActivityFactory, SessionFactory

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
