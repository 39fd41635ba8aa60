"""`store.metrics()`: the log's frontier and floor, sessions by state and every consumer's status
from one read, and this process's counts since the store opened. On both backends, through
both APIs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import (
    CursorExpired,
    IntegrityViolation,
    ReadOnlySnapshot,
    SessionState,
    StorageError,
    Store,
    StoreMetrics,
)
from tests.factories import SessionFactory
from tests.helpers import append_raw
from tests.integration.test_consumers import BODY, age

pytestmark = pytest.mark.both_apis


def without_lag_seconds(metrics: StoreMetrics) -> list[dict[str, object]]:
    """The consumers' statuses, less what moves with the clock between two reads."""
    return [status.model_dump(exclude={"lag_seconds"}) for status in metrics.consumers]


def test_a_fresh_store_reads_as_empty(store: Store) -> None:
    metrics = store.metrics()
    assert (metrics.latest_seq, metrics.pruned_through, metrics.events_retained_max) == (0, 0, 0)
    assert metrics.sessions_by_state == {state.value: 0 for state in SessionState}
    assert metrics.consumers == ()
    assert metrics.as_of_ms >= metrics.opened_at_ms


def test_the_database_part_is_the_log_sessions_by_state_and_every_consumer(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    store.sessions.save(SessionFactory(id="s-2"))
    store.sessions.save(SessionFactory(id="s-3", state=SessionState.CLOSED))
    append_raw(store, "s-1", BODY, 4)
    store.consumers.register("projector", start="beginning")
    store.consumers.ack("projector", 1)
    store.consumers.register("mailer", start="now")
    age(store, "projector", 301)  # events wait for it and it has not acked for 301 s

    metrics = store.metrics()
    assert (metrics.latest_seq, metrics.pruned_through, metrics.events_retained_max) == (4, 0, 4)
    assert metrics.sessions_by_state == {
        **{state.value: 0 for state in SessionState},
        "running": 2,
        "closed": 1,
    }
    assert without_lag_seconds(metrics) == [
        status.model_dump(exclude={"lag_seconds"}) for status in store.consumers.list()
    ]
    assert [(c.name, c.position, c.lag, c.stuck) for c in metrics.consumers] == [
        ("mailer", 4, 0, False),
        ("projector", 1, 3, True),
    ]
    assert metrics.consumers[0].lag_seconds == 0  # nothing after its position

    store.events.prune(through_seq=2, force=True)  # past the projector
    metrics = store.metrics()
    assert (metrics.latest_seq, metrics.pruned_through, metrics.events_retained_max) == (4, 2, 2)
    store.sessions.delete("s-1")  # its events go: a hole the bound still covers
    metrics = store.metrics()
    assert (metrics.latest_seq, metrics.events_retained_max) == (4, 2)
    assert metrics.sessions_by_state["running"] == 1


def test_this_processs_counts_move_with_its_calls(store: Store) -> None:
    before = store.metrics()
    store.sessions.save(SessionFactory(id="s-1"))
    for _ in range(3):
        assert store.faults.record_startup_fault("s-1", "image pull failed")
    assert not store.faults.record_startup_fault("unknown", "no such session")
    after = store.metrics()
    assert after.write_calls - before.write_calls == 5  # the save and four faults
    assert after.write_seconds.count - before.write_seconds.count == 5
    assert after.write_seconds.sum_s > before.write_seconds.sum_s
    assert after.events_appended - before.events_appended == 3
    assert after.commits - before.commits == 5  # one after another: a transaction each
    assert after.wakeups - before.wakeups >= 5  # each commit wakes this process's followers
    assert after.opened_at_ms == before.opened_at_ms

    with store.events.follow(after_seq=0) as follower:
        assert [event.seq for event in next(follower).events] == [1, 2, 3]
    store.events.prune(through_seq=2)
    with pytest.raises(CursorExpired):
        store.events.load(after_seq=1)
    with pytest.raises(CursorExpired):  # refused before a follower is made
        store.events.follow(after_seq=1).next_page(timeout=0)
    last = store.metrics()
    assert last.followers_started - after.followers_started == 1
    assert last.cursor_expired - after.cursor_expired == 2
    assert (last.prunes - after.prunes, last.prune_seconds.count) == (1, 1)
    assert last.prune_seconds.sum_s > 0
    assert last.write_seconds.cumulative()[-1] == last.write_seconds.count == last.write_calls


def test_a_histograms_counts_are_by_bucket_and_cumulative_on_demand(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    histogram = store.metrics().write_seconds
    assert len(histogram.counts) == len(histogram.bounds_s) + 1
    assert list(histogram.bounds_s) == sorted(histogram.bounds_s)
    assert histogram.cumulative() == tuple(
        sum(histogram.counts[: index + 1]) for index in range(len(histogram.counts))
    )


@pytest.mark.sync_api
def test_events_count_once_inserted_and_refused_prunes_not_at_all(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    store.sessions.save(SessionFactory(id="s-2"))
    before = store.metrics()
    with store.unit_of_work() as uow:
        uow.events.append("s-1", 1, BODY)
        uow.events.append("s-1", 1, BODY)
        # Behind the unit of work's back: the session goes, so its events' inserts fail.
        uow.connection.execute(sa.text("DELETE FROM sessions WHERE session_id = 's-1'"))
        with pytest.raises(IntegrityViolation):
            uow.commit()
        if store.url.startswith("sqlite"):  # the failed inserts left the transaction usable
            uow.events.append("s-2", 1, BODY)
            uow.commit()
            stored = 1
        else:
            with pytest.raises(StorageError):  # PostgreSQL aborted the transaction
                uow.events.append("s-2", 1, BODY)
            stored = 0
    after = store.metrics()
    assert after.events_appended - before.events_appended == stored
    assert after.latest_seq - before.latest_seq <= 2 + stored  # (seqs of a failed insert)
    with store.snapshot() as snapshot, pytest.raises(ReadOnlySnapshot):
        snapshot.events.prune(through_seq=0)
    assert store.metrics().prunes == before.prunes  # refused: not a prune
