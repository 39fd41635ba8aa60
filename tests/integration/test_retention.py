"""Retention: pruning a prefix of the log (`store.events.prune`), the floor it records
(`pruned_through`) and cursors below it (`CursorExpired` from `load`, `wait` and `follow`), on
both backends and through both APIs."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEventFilter,
    CursorAhead,
    CursorExpired,
    InvalidRecord,
    LifecycleConflict,
    SessionJournalError,
    SessionState,
    Store,
    migrations,
)
from session_journal.journal.search import IndexRow
from session_journal.services import events as event_service
from session_journal.services.events import PrunePlan
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import (
    ActivityFactory,
    CheckpointMetadataFactory,
    RelayChainFactory,
    SessionFactory,
)
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
    assert (page.events, page.next_after_seq) == ((), 10)
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

    def second_batch_fails(
        fn: Any, action: str = "write", uow: object = None, *, solo: bool = False
    ) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:  # the floor's transaction, one batch, then interrupted
            raise KeyboardInterrupt
        return real(fn, action, uow, solo=solo)

    monkeypatch.setattr(store.events._transactions, "submit", second_batch_fails)
    with pytest.raises(KeyboardInterrupt):
        store.events.prune(through_seq=8)
    monkeypatch.setattr(store.events._transactions, "submit", real)

    # The floor was recorded before the first batch: 4..8 are still stored, but not retained.
    assert store.events.pruned_through() == 8
    assert event_counts(store) == (7, 4, 10)
    assert seqs(store, 0) == [9, 10]
    with pytest.raises(CursorExpired):
        store.events.load(after_seq=5)
    # A plan of a lower target counts what the prune will delete: all that is left below.
    assert store.events.plan_prune(through_seq=1) == PrunePlan(
        through_seq=8, events=5, pruned_through=8, latest_seq=10
    )
    # Running it again (also with a lower or no-op target) finishes the deletion.
    assert store.events.prune(through_seq=1) == 5
    assert event_counts(store) == (2, 9, 10)
    assert store.events.pruned_through() == 8


LAYOUTS = {
    # Forty events of sessions x and y: in turn, so the first batch of ten holds five of x's;
    # or x's twenty first, so every row the first batch chooses is x's.
    "in turn": ["x", "y"] * 20,
    "x first": ["x"] * 20 + ["y"] * 20,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_prune_goes_on_past_a_batch_that_met_a_session_deleted_meanwhile(
    store: Store, migrated_url: str, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    # Another store deletes session x while the prune's first batch is chosen. On PostgreSQL
    # that batch then waits for x's rows and deletes only what was not x's: five of its ten,
    # or none at all. The prune must go on until nothing is left at or below its floor, and
    # say how many it deleted itself.
    monkeypatch.setattr(event_service, "PRUNE_BATCH", 10)
    for session_id in ("x", "y"):
        store.sessions.save(SessionFactory(id=session_id))
    start = store.events.latest_seq()
    for session_id in LAYOUTS[layout]:
        append(store, session_id, [1])
    floor = start + 40
    deleted_uncommitted, commit_now = threading.Event(), threading.Event()

    def delete_x() -> None:
        with Store.open(migrated_url) as other, other.unit_of_work() as uow:
            assert uow.sessions.delete("x")
            deleted_uncommitted.set()
            commit_now.wait(30)
            uow.commit()

    deleting = threading.Thread(target=delete_x)
    deleting.start()
    assert deleted_uncommitted.wait(30)
    pruned: list[int] = []
    pruning = threading.Thread(target=lambda: pruned.append(store.events.prune(through_seq=floor)))
    pruning.start()
    if store.url.startswith("postgresql"):  # until the batch waits for x's row locks
        until_a_statement_waits_for_a_lock(store.url)
    else:  # SQLite: the prune waits for the write lock (its busy timeout is longer)
        pruning.join(0.5)
    commit_now.set()
    deleting.join(30)
    pruning.join(30)
    assert pruned == [20]  # y's events; x's went with x
    assert store.events.plan_prune(through_seq=floor).events == 0
    assert seqs(store, 0) == []


def until_a_statement_waits_for_a_lock(url: str) -> None:
    engine = sa.create_engine(url)
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database() AND query LIKE 'DELETE FROM api_events%'"
    )
    try:
        for _ in range(3000):
            with engine.connect() as connection:
                if connection.execute(query).scalar_one() > 0:
                    return
            time.sleep(0.01)
    finally:
        engine.dispose()
    pytest.fail("the prune never waited for the deleted session's rows")


def event_counts(store: Store) -> tuple[int, int, int]:
    """(events stored, lowest stored seq, frontier), read with plain SQL."""
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            count, lowest = connection.execute(
                sa.text("SELECT COUNT(*), MIN(seq) FROM api_events")
            ).one()
            latest = connection.execute(
                sa.text("SELECT last_seq FROM event_sequences WHERE name = 'api_events'")
            ).scalar()
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

    def in_turns(fn: Any, action: str = "write", uow: object = None, *, solo: bool = False) -> Any:
        if not action.startswith("prune"):
            return real(fn, action, uow, solo=solo)  # the writer's
        turns.wait()
        try:
            return real(fn, action, uow, solo=solo)
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


SESSION_TABLES = [
    "sessions",
    "session_contexts",
    "session_checkpoints",
    "api_events",
    "api_session_activity",
    "checkpoint_operations",
    "materialized_sessions",
    "transcript_items",
    "project_events",
]


def rows_by_session(store: Store) -> dict[str, dict[str, int]]:
    """For each table holding rows of sessions: how many rows each session has there."""
    engine = sa.create_engine(store.url)
    found: dict[str, dict[str, int]] = {}
    try:
        with engine.connect() as connection:
            for table in SESSION_TABLES:
                counted = connection.execute(
                    sa.text(f"SELECT session_id, COUNT(*) FROM {table} GROUP BY session_id")
                )
                found[table] = {str(session): int(count) for session, count in counted}
    finally:
        engine.dispose()
    return found


def a_session_with_everything(store: Store, session_id: str, state: SessionState) -> None:
    """A session with a row in every table that holds rows of sessions, then in `state`."""
    store.sessions.save(
        SessionFactory(id=session_id, checkpoint=CheckpointMetadataFactory(), last_error="x")
    )
    store.activity.record([(session_id, ActivityFactory())], 5)
    store.projection.apply(session_id, RelayChainFactory())  # events, projection, transcript
    store.index.insert(
        [IndexRow(session_id, 1, "2026-11-29T12:00:00Z", "x", None, None, "hi", "{}")]
    )
    store.checkpoints.begin(SessionFactory(id=session_id, state=SessionState.CHECKPOINTING), "c")
    store.sessions.save_lifecycle(SessionFactory(id=session_id, state=state))


def test_list_ended_pages_by_id_and_filters_by_the_last_save(store: Store) -> None:
    for session_id, state in [
        ("c-1", SessionState.CLOSED),
        ("e-1", SessionState.ERROR),
        ("r-1", SessionState.RUNNING),
        ("c-2", SessionState.CLOSED),
    ]:
        store.sessions.save(SessionFactory(id=session_id, state=SessionState.RUNNING))
        store.sessions.save_lifecycle(SessionFactory(id=session_id, state=state))
    assert store.sessions.list_ended() == ["c-1", "c-2", "e-1"]
    assert store.sessions.list_ended(limit=2) == ["c-1", "c-2"]
    assert store.sessions.list_ended(after_id="c-2", limit=2) == ["e-1"]
    assert store.sessions.list_ended(limit=0) == ["c-1"]  # clamped to 1..1000
    hour = timedelta(hours=1)
    assert store.sessions.list_ended(updated_before=datetime.now(UTC) + hour) == [
        "c-1",
        "c-2",
        "e-1",
    ]
    assert store.sessions.list_ended(updated_before=datetime.now(UTC) - hour) == []
    with pytest.raises(InvalidRecord, match="updated_before must be a timezone-aware datetime"):
        store.sessions.list_ended(updated_before=datetime(2026, 1, 1))


def test_removing_ended_sessions_deletes_all_their_rows_and_nothing_else(
    store: Store, tmp_path: Path
) -> None:
    tmp_path = tmp_path / "sessions"  # one directory per session
    tmp_path.mkdir()
    for session_id, state in [
        ("closed-1", SessionState.CLOSED),
        ("error-1", SessionState.ERROR),
        ("closed-kept", SessionState.CLOSED),
        ("running-1", SessionState.RUNNING),
    ]:
        a_session_with_everything(store, session_id, state)
        (tmp_path / session_id).mkdir()
        (tmp_path / session_id / "events.jsonl").write_text("{}\n")
    before = rows_by_session(store)
    assert all(len(before[table]) == 4 for table in SESSION_TABLES), before
    latest = store.events.latest_seq()

    removed = store.sessions.remove_ended(
        ["error-1", "closed-1", "never-existed"], sessions_dir=tmp_path
    )
    assert removed == ["closed-1", "error-1"]
    kept = {"closed-kept", "running-1"}
    assert rows_by_session(store) == {
        table: {session: count for session, count in counts.items() if session in kept}
        for table, counts in before.items()
    }
    assert sorted(path.name for path in tmp_path.iterdir()) == ["closed-kept", "running-1"]
    assert store.events.latest_seq() == latest  # the frontier stays
    assert store.events.pruned_through() == 0  # and the holes are no expiry
    assert store.events.load(after_seq=1).events[0].session_id in kept
    assert store.sessions.remove_ended(["closed-1"]) == []  # gone already


def test_a_session_that_has_not_ended_is_never_removed(store: Store, tmp_path: Path) -> None:
    tmp_path = tmp_path / "sessions"  # one directory per session
    tmp_path.mkdir()
    for session_id, state in [
        ("closed-1", SessionState.CLOSED),
        ("running-1", SessionState.RUNNING),
        ("closing-1", SessionState.CLOSING),
    ]:
        store.sessions.save(SessionFactory(id=session_id, state=state))
        store.faults.record_startup_fault(session_id, "m")
        (tmp_path / session_id).mkdir()
    before = rows_by_session(store)
    with pytest.raises(LifecycleConflict) as refused:
        store.sessions.remove_ended(["closed-1", "running-1", "closing-1"], sessions_dir=tmp_path)
    assert str(refused.value) == (
        "remove ended sessions: 2 session(s) have not ended: 'closing-1' (closing), "
        "'running-1' (running); only closed or error sessions are removed; nothing was removed"
    )
    assert rows_by_session(store) == before
    assert len(list(tmp_path.iterdir())) == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"session_ids": "closed-1"}, "session ids must be a sequence of session ids"),
        ({"session_ids": ["../x"]}, "invalid id"),
        ({"session_ids": [f"s{n}" for n in range(1001)]}, "at most 1000 sessions per call"),
        ({"session_ids": ["closed-1"], "sessions_dir": 5}, "sessions_dir must be a path"),
        ({"session_ids": ["closed-1"], "sessions_dir": "/nonexistent/x"}, "is not a directory"),
    ],
)
def test_bad_arguments_remove_nothing(
    store: Store, arguments: dict[str, Any], message: str
) -> None:
    store.sessions.save(SessionFactory(id="closed-1", state=SessionState.CLOSED))
    with pytest.raises(InvalidRecord, match=message):
        store.sessions.remove_ended(**arguments)
    assert store.sessions.get("closed-1") is not None
