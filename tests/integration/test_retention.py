"""Retention: pruning a prefix of the log (`store.events.prune`), the floor it records
(`pruned_through`) and cursors below it (`CursorExpired` from `load`, `wait` and `follow`), on
both backends and through both APIs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEventFilter,
    CursorAhead,
    CursorExpired,
    InvalidRecord,
    SessionJournalError,
    Store,
    migrations,
)
from session_journal.services import events as event_service
from session_journal.unit_of_work import UnitOfWork
from tests.factories import SessionFactory
from tests.helpers import all_events

pytestmark = pytest.mark.both_apis

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'


def append(store: Store, session_id: str, times: Sequence[int]) -> None:
    """Events of the session recorded at the given times (ms), in one transaction."""

    def work(uow: UnitOfWork) -> None:
        for recorded_at_ms in times:
            uow.events.append(session_id, recorded_at_ms, BODY)
        uow.commit()

    store.run_in_unit_of_work(work)


def seqs(store: Store, after_seq: int = 0, **filters: str) -> list[int]:
    event_filter = ApiEventFilter(**filters) if filters else None
    return [event.seq for event in store.events.load(event_filter, after_seq, limit=1000).events]


def minimum_level(store: Store) -> int | None:
    engine = sa.create_engine(store.url)
    try:
        return migrations.status(engine).minimum_compatible_level
    finally:
        engine.dispose()


@pytest.fixture
def ten(store: Store) -> Store:
    """A log of ten events of one session, recorded at 10, 20, ... 100 ms."""
    store.sessions.save(SessionFactory(id="s1"))
    append(store, "s1", [10 * seq for seq in range(1, 11)])
    return store


def test_prune_through_a_seq_deletes_the_prefix_and_records_the_floor(ten: Store) -> None:
    store = ten
    assert store.events.pruned_through() == 0
    assert minimum_level(store) == 2  # an unpruned log: older code may still use it

    assert store.events.prune(through_seq=4) == 4
    assert store.events.pruned_through() == 4
    assert store.events.latest_seq() == 10  # the frontier never moves
    assert seqs(store) == [5, 6, 7, 8, 9, 10]
    assert minimum_level(store) == 7  # older code now refuses the pruned log

    # Idempotent: the same prune again deletes nothing and changes nothing.
    assert store.events.prune(through_seq=4) == 0
    # A lower one neither lowers the floor nor deletes anything.
    assert store.events.prune(through_seq=2) == 0
    assert (store.events.pruned_through(), store.events.latest_seq()) == (4, 10)
    assert seqs(store) == [5, 6, 7, 8, 9, 10]


def test_prune_by_age_stops_at_the_first_event_not_older(store: Store) -> None:
    # Times need not grow with seq: event 5 is older than 4, but pruning by age never
    # punches a hole above the prefix.
    store.sessions.save(SessionFactory(id="s1"))
    append(store, "s1", [10, 30, 20, 70, 5, 80])
    plan = store.events.plan_prune(older_than_ms=50)
    assert (plan.through_seq, plan.events, plan.pruned_through, plan.latest_seq) == (3, 3, 0, 6)
    assert seqs(store) == [1, 2, 3, 4, 5, 6]  # a plan writes nothing

    assert store.events.prune(older_than_ms=50) == 3
    assert store.events.pruned_through() == 3
    assert seqs(store) == [4, 5, 6]
    assert store.events.prune(older_than_ms=50) == 0  # 4 is not older: the prefix ends
    # Everything older than a time after the last event: the whole log, the frontier stays.
    assert store.events.prune(older_than_ms=1_000) == 3
    assert (store.events.pruned_through(), store.events.latest_seq(), seqs(store)) == (6, 6, [])


def test_prune_in_bounded_batches_returns_how_many_went(
    ten: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_service, "PRUNE_BATCH", 3)
    assert ten.events.prune(through_seq=8) == 8  # batches of 3, 3, 2
    assert seqs(ten) == [9, 10]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "give exactly one of through_seq and older_than_ms"),
        ({"through_seq": 3, "older_than_ms": 5}, "give exactly one of"),
        ({"through_seq": -1}, "through_seq must be between 0 and"),
        ({"older_than_ms": 2**63}, "older_than_ms must be between 0 and"),
        ({"through_seq": True}, "through_seq"),
        ({"through_seq": "3"}, "through_seq"),
        ({"through_seq": 11}, "through_seq 11 is above the frontier 10"),
    ],
)
def test_bad_arguments_prune_nothing(ten: Store, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        ten.events.prune(**arguments)
    assert ten.events.pruned_through() == 0
    assert seqs(ten) == list(range(1, 11))
    assert minimum_level(ten) == 2


def test_a_cursor_below_the_floor_expires_for_load_wait_and_follow(ten: Store) -> None:
    store = ten
    store.events.prune(through_seq=4)
    for cursor in (1, 3):
        with pytest.raises(CursorExpired) as expired:
            store.events.load(after_seq=cursor)
        assert (expired.value.pruned_through, expired.value.cursor) == (4, cursor)
        assert isinstance(expired.value, SessionJournalError)
        assert str(expired.value).startswith(
            f"after_seq {cursor} is below the pruned floor 4: the events up to seq 4 were "
            "pruned, so this client missed events; resync"
        )
        with pytest.raises(CursorExpired, match=f"after_seq {cursor} is below"):
            store.events.wait(after_seq=cursor, timeout=5)
        with (
            pytest.raises(CursorExpired, match=f"after_seq {cursor} is below"),
            store.events.follow(after_seq=cursor) as follower,
        ):
            next(iter(follower))
        # A filter changes nothing: the client missed events whichever they were.
        with pytest.raises(CursorExpired):
            store.events.load(ApiEventFilter(session_id="s1"), after_seq=cursor)

    # At or above the floor, and from 0 (the oldest retained event): as before.
    assert seqs(store, 4) == [5, 6, 7, 8, 9, 10]
    assert seqs(store, 0) == [5, 6, 7, 8, 9, 10]
    assert store.events.wait(after_seq=0, timeout=5).events[0].seq == 5
    assert store.events.wait(after_seq=4, timeout=5).events[0].seq == 5
    with store.events.follow(after_seq=0) as follower:
        assert [event.seq for event in next(iter(follower)).events] == [5, 6, 7, 8, 9, 10]
    page = store.events.load(after_seq=None)
    assert (page.events, page.next_after_seq) == ([], 10)
    # A cursor above the frontier is still CursorAhead for wait and follow, not expiry.
    with pytest.raises(CursorAhead):
        store.events.wait(after_seq=11, timeout=5)


def test_a_follower_served_from_the_shared_window_expires_too(ten: Store) -> None:
    """Followers near the frontier are served from the store's window of recent events: a
    prune below a follower's cursor that the window saw expires that cursor as well."""
    store = ten
    with (
        store.events.follow(after_seq=10) as behind,
        store.events.follow(after_seq=10) as ahead,
    ):
        assert ahead.next_page(timeout=0) is None  # the window starts at the frontier, 10
        append(store, "s1", [110, 120, 130, 140, 150])
        assert [event.seq for event in next(iter(ahead)).events] == [11, 12, 13, 14, 15]
        store.events.prune(through_seq=12)
        with pytest.raises(CursorExpired) as expired:
            next(iter(behind))  # its cursor 10 is in the window, below the new floor
        assert (expired.value.cursor, expired.value.pruned_through) == (10, 12)
        append(store, "s1", [160])
        assert [event.seq for event in next(iter(ahead)).events] == [16]


def test_holes_left_by_deleted_sessions_are_not_expiry(store: Store) -> None:
    for session in ("s1", "s2"):
        store.sessions.save(SessionFactory(id=session))
    append(store, "s1", [1, 2])
    append(store, "s2", [3, 4])
    append(store, "s1", [5])
    assert store.sessions.delete("s1")
    assert store.events.pruned_through() == 0
    assert seqs(store, 1) == [3, 4]
    assert store.events.wait(after_seq=1, timeout=5).events[0].seq == 3
    # Pruning through 3 expires cursors 1 and 2 only; 3 and 4 read on.
    store.events.prune(through_seq=3)
    with pytest.raises(CursorExpired):
        store.events.load(after_seq=2)
    assert seqs(store, 3) == [4]
    assert seqs(store, 0) == [4]


@pytest.mark.sync_api
def test_an_interrupted_prune_is_finished_by_the_next_one(
    ten: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ten
    monkeypatch.setattr(event_service, "PRUNE_BATCH", 3)
    real = store.events._transactions.submit
    calls = 0

    def second_batch_fails(fn: Any, action: str = "write", uow: object = None) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt  # interrupted between two batches
        return real(fn, action, uow)

    monkeypatch.setattr(store.events._transactions, "submit", second_batch_fails)
    with pytest.raises(KeyboardInterrupt):
        store.events.prune(through_seq=8)
    monkeypatch.setattr(store.events._transactions, "submit", real)

    # The floor was recorded with the first batch: 4..8 are still stored, but not retained.
    assert store.events.pruned_through() == 8
    assert event_counts(store) == (7, 4, 10)
    assert seqs(store, 0) == [9, 10]
    with pytest.raises(CursorExpired):
        store.events.load(after_seq=5)
    # Running it again (also with a lower or no-op target) finishes the deletion.
    assert store.events.prune(through_seq=1) == 5
    assert event_counts(store) == (2, 9, 10)
    assert store.events.pruned_through() == 8


def event_counts(store: Store) -> tuple[int, int, int]:
    """(events stored, lowest stored seq, frontier), read with plain SQL."""
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            count, lowest = connection.execute(
                sa.text("SELECT COUNT(*), MIN(seq) FROM api_events")
            ).one()
            latest = connection.execute(sa.text("SELECT last_seq FROM event_sequences")).scalar()
    finally:
        engine.dispose()
    return int(count), int(lowest or 0), int(latest)


@pytest.mark.sync_api
def test_followers_paging_during_a_prune_see_no_hole_without_expiry(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients page by cursor while a prune deletes in batches and a writer appends. The
    clients and the batches take turns (a barrier before and after each batch), so which
    cursors expire is certain: every client sees each seq after its cursor exactly once, in
    order, until it is told that its cursor expired; a cursor below the floor expires at the
    first read after the first batch (which records the floor), one at or above it never does,
    and a client starting at 0 mid-prune starts at the first retained event."""
    monkeypatch.setattr(event_service, "PRUNE_BATCH", 7)
    store.sessions.save(SessionFactory(id="s1"))
    for _ in range(6):
        append(store, "s1", [1] * 50)  # seqs 1..300 of one session: no hole but pruning
    turns = threading.Barrier(7)  # six clients and the prune
    stop = threading.Event()
    seen: dict[str, list[int]] = {}
    outcome: dict[str, str] = {}

    def page_on(name: str, cursor: int) -> int:
        got = store.events.load(after_seq=cursor, limit=5)
        seen[name].extend(event.seq for event in got.events)
        return got.next_after_seq

    def client(name: str, start: int, *, late: bool = False) -> None:
        seen[name], cursor = [], start
        try:
            if not late:
                cursor = page_on(name, cursor)  # before the prune
            while True:
                turns.wait()  # a batch runs
                turns.wait()  # it committed
                cursor = page_on(name, cursor)
        except threading.BrokenBarrierError:
            pass  # the prune is over: catch up
        except CursorExpired as error:
            outcome[name] = f"expired {error.cursor} < {error.pruned_through}"
            while True:  # keep taking turns
                try:
                    turns.wait()
                except threading.BrokenBarrierError:
                    return
        while (before := cursor) != (cursor := page_on(name, cursor)) or before < 300:
            pass
        outcome[name] = "caught up"

    def writer() -> None:
        while not stop.is_set():
            append(store, "s1", [2] * 3)

    real = store.events._transactions.submit

    def in_turns(fn: Any, action: str = "write", uow: object = None) -> Any:
        if not action.startswith("prune"):
            return real(fn, action, uow)  # the writer's
        turns.wait()
        try:
            return real(fn, action, uow)
        finally:
            turns.wait()

    clients = {"at 1": 1, "at 250": 250, "at 279": 279, "at 280": 280, "at 290": 290}
    threads = [threading.Thread(target=client, args=item) for item in clients.items()]
    threads.append(threading.Thread(target=client, args=("late 0", 0), kwargs={"late": True}))
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    monkeypatch.setattr(store.events._transactions, "submit", in_turns)
    try:
        assert store.events.prune(through_seq=280) == 280
    finally:
        monkeypatch.setattr(store.events._transactions, "submit", real)
        turns.abort()
        stop.set()
        for thread in threads:
            thread.join()

    assert outcome == {
        "at 1": "expired 6 < 280",  # one page of five before the prune
        "at 250": "expired 255 < 280",
        "at 279": "caught up",  # its first page took it to 284, at or above the floor
        "at 280": "caught up",
        "at 290": "caught up",
        "late 0": "caught up",
    }
    latest = store.events.latest_seq()
    for name, start in clients.items():
        first = start + 1
        if outcome[name] == "caught up":
            assert seen[name] == list(range(first, latest + 1)), name
        else:
            assert seen[name] == list(range(first, first + 5)), name
    assert seen["late 0"] == list(range(281, latest + 1))
    assert store.events.pruned_through() == 280
    assert all_events(store)[0].seq == 281
