"""Following a durable consumer (`consumers.follow`) and waiting for its position
(`consumers.wait_until`), on both backends and through both APIs: the follower starts at the
stored position with the consumer's filter and never moves it; an expired consumer is refused;
`wait_until` is woken by acks of this process and of others, and an ack does not wake the
followers on PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest

from session_journal import (
    ApiEventFilter,
    ConsumerNotFound,
    CursorExpired,
    InvalidRecord,
    Store,
)
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import SessionFactory
from tests.helpers import append_raw

pytestmark = pytest.mark.both_apis

FAULT = (
    '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'
)
ACTIVITY = (
    '{"type":"activity_changed","data":{"activity":{"state":"s","details":{"kind":"turn",'
    '"turn_started_at_ms":1},"is_idle":false,"waiting_for_input":false,"capacity_retry":false}}}'
)


def log_of(store: Store, events: int) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    append_raw(store, "s1", FAULT, events)


def test_a_follower_starts_at_the_stored_position_and_leaves_it_to_acks(store: Store) -> None:
    log_of(store, 5)
    store.consumers.register("projector", start=2)
    with store.consumers.follow("projector", limit=2) as follower:
        first = next(follower)
        assert [event.seq for event in first.events] == [3, 4]
        assert store.consumers.get("projector").position == 2  # acks are explicit
        store.consumers.ack("projector", first.next_after_seq)
        assert [event.seq for event in next(follower).events] == [5]
    # A restart goes on from the acked position.
    with store.consumers.follow("projector") as follower:
        assert [event.seq for event in next(follower).events] == [5]


def test_a_filtered_consumer_reads_its_types_and_may_ack_an_empty_page(store: Store) -> None:
    log_of(store, 2)
    append_raw(store, "s1", ACTIVITY, 3)  # seqs 3-5
    store.consumers.register("activity", filter=ApiEventFilter(types=["activity_changed"]))
    store.consumers.register("faults", filter=ApiEventFilter(types=["session_fault"]), start=2)
    with store.consumers.follow("activity") as follower:
        assert [event.seq for event in next(follower).events] == [3, 4, 5]
    with store.consumers.follow("faults") as follower:
        empty = follower.next_page(timeout=0.2)
    assert empty is not None and empty.events == () and empty.next_after_seq == 5
    store.consumers.ack("faults", empty.next_after_seq)  # it holds nothing back any more
    assert store.events.plan_prune(through_seq=5).held_back_by == "activity"


def test_an_unknown_or_expired_consumer_is_refused(store: Store) -> None:
    log_of(store, 6)
    with pytest.raises(ConsumerNotFound):
        store.consumers.follow("nobody")
    store.consumers.register("behind", start=2)
    store.consumers.register("fresh")  # at 0: before the first event
    store.events.prune(through_seq=4, force=True)
    with pytest.raises(CursorExpired) as behind:
        store.consumers.follow("behind")
    assert (behind.value.pruned_through, behind.value.cursor) == (4, 2)
    with pytest.raises(CursorExpired) as fresh:
        store.consumers.follow("fresh")
    assert (fresh.value.pruned_through, fresh.value.cursor) == (4, 0)
    store.consumers.reset("fresh", to="beginning")
    with store.consumers.follow("fresh") as follower:
        assert [event.seq for event in next(follower).events] == [5, 6]


def test_a_consumer_following_from_zero_expires_when_a_prune_passes_it(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    store.consumers.register("projector")  # position 0 on an empty log
    with store.consumers.follow("projector") as follower:
        assert follower.next_page(timeout=0.05) is None
        append_raw(store, "s1", FAULT, 3)
        store.events.prune(through_seq=2, force=True)
        # A plain cursor of 0 would now read from seq 3: the consumer would miss 1 and 2.
        with pytest.raises(CursorExpired):
            follower.next_page(timeout=5)


def test_wait_until_returns_at_once_times_out_and_is_woken_by_an_ack(store: Store) -> None:
    log_of(store, 3)
    store.consumers.register("projector", start=2)
    assert store.consumers.wait_until("projector", 1, timeout=0) is True
    began = time.monotonic()
    assert store.consumers.wait_until("projector", 3, timeout=0.2) is False
    assert time.monotonic() - began >= 0.2
    later = threading.Timer(0.2, lambda: store.consumers.ack("projector", 3))
    later.start()
    began = time.monotonic()
    assert store.consumers.wait_until("projector", 3, timeout=30) is True
    assert time.monotonic() - began < 10  # woken, not timed out
    later.join()


def test_wait_until_is_woken_by_an_ack_in_a_unit_of_work(store: Store) -> None:
    log_of(store, 3)
    store.consumers.register("projector")

    def project(uow: UnitOfWork) -> None:
        time.sleep(0.1)
        store.consumers.ack("projector", 2, uow=uow)
        uow.commit()

    later = threading.Thread(target=lambda: store.run_in_unit_of_work(project))
    later.start()
    began = time.monotonic()
    assert store.consumers.wait_until("projector", 2, timeout=30) is True
    assert time.monotonic() - began < 10
    later.join()


def test_wait_until_refuses_bad_arguments_and_unknown_consumers(store: Store) -> None:
    log_of(store, 1)
    with pytest.raises(ConsumerNotFound):
        store.consumers.wait_until("nobody", 1, timeout=0)
    store.consumers.register("projector")
    for timeout in (-1, 3601, float("nan"), "1", True):
        with pytest.raises(InvalidRecord, match="timeout"):
            store.consumers.wait_until("projector", 1, timeout=timeout)
    with pytest.raises(InvalidRecord):
        store.consumers.wait_until("projector", -1, timeout=0)


@pytest.mark.sync_api
def test_wait_until_is_woken_by_another_processs_ack(store: Store) -> None:
    """Another store (another process's write path and connections) acks: the waiter is woken
    through the backend's wake-up source (SQLite's watcher, PostgreSQL's `LISTEN`)."""
    log_of(store, 3)
    store.consumers.register("projector")
    other = Store.open(store.url)
    try:
        later = threading.Timer(0.3, lambda: other.consumers.ack("projector", 3))
        later.start()
        began = time.monotonic()
        assert store.consumers.wait_until("projector", 3, timeout=30) is True
        assert time.monotonic() - began < 10
        later.join()
    finally:
        other.close()


@pytest.mark.sync_api
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_an_ack_of_another_process_does_not_wake_the_followers_on_postgresql(
    store: Store,
) -> None:
    """(SQLite's watcher cannot tell an ack's commit from an append's: there, both move.)"""
    log_of(store, 3)
    store.consumers.register("projector")
    following = store.following
    acks = following.watched_acks()
    source = following.source
    assert source is not None and source.listening.wait(10)  # type: ignore[union-attr]
    signal, before = following.signal, following.signal.generation
    moved = acks.generation
    other = Store.open(store.url)
    try:
        other.consumers.ack("projector", 2)
    finally:
        other.close()
    deadline = time.monotonic() + 10
    while acks.generation == moved and time.monotonic() < deadline:
        time.sleep(0.01)
    assert acks.generation != moved  # the ack's notification arrived...
    assert signal.generation == before  # ...and did not make the followers read


@pytest.mark.sync_api
def test_wait_until_is_woken_by_another_processs_reset_and_remove(store: Store) -> None:
    """A reset past the seq wakes the waiter with `True`; a removal with `ConsumerNotFound`:
    both notify as an ack does (PostgreSQL), or are seen as any commit (SQLite)."""
    log_of(store, 3)
    store.consumers.register("projector")
    other = Store.open(store.url)
    try:
        later = threading.Timer(0.3, lambda: other.consumers.reset("projector", to=3))
        later.start()
        began = time.monotonic()
        assert store.consumers.wait_until("projector", 3, timeout=30) is True
        assert time.monotonic() - began < 10
        later.join()
        later = threading.Timer(0.3, lambda: other.consumers.remove("projector"))
        later.start()
        began = time.monotonic()
        with pytest.raises(ConsumerNotFound):
            store.consumers.wait_until("projector", 4, timeout=30)
        assert time.monotonic() - began < 10
        later.join()
    finally:
        other.close()
