"""Following the log: `wait` and `follow` wake on commits of this store, of another store and of
another process, return exactly the events a cursor has not seen, and end when closed.

No assertion is on time: a wait that was not woken returns an empty page at its (long) timeout,
which fails the scenario's expected events instead.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEventFilter,
    ApiEventPage,
    CursorAhead,
    Follower,
    InvalidRecord,
    SessionFault,
    Store,
    StoreClosed,
    StoreOptions,
)
from session_journal.follow.wakeups import PostgresListener
from tests.backends import pg_conninfo
from tests.factories import SessionFactory, SessionFaultFactory

pytestmark = pytest.mark.both_apis


LONG_S = 60.0  # a wait that times out fails its scenario long before this matters


def later(action: Callable[[], Any], delay: float = 0.2) -> threading.Thread:
    """Run `action` in a thread once a waiter is (very likely) waiting."""

    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def messages(page: ApiEventPage) -> list[str]:
    bodies = [event.event for event in page.events]
    assert all(isinstance(body, SessionFault) for body in bodies)
    return [body.message for body in bodies if isinstance(body, SessionFault)]


def append_in_another_process(url: str, session_id: str, message: str) -> None:
    script = (
        "import sys; from session_journal import Store\n"
        "with Store.open(sys.argv[1]) as store:\n"
        "    assert store.faults.record_startup_fault(sys.argv[2], sys.argv[3])\n"
    )
    subprocess.run([sys.executable, "-c", script, url, session_id, message], check=True)


@pytest.fixture
def sessions(store: Store) -> Store:
    for name in ("a", "b"):
        store.sessions.save(SessionFactory(id=name, workspace_id=f"w-{name}"))
    return store


def test_wait_returns_at_once_what_is_already_after_the_cursor(sessions: Store) -> None:
    sessions.faults.record_startup_fault("a", "one")
    sessions.faults.record_startup_fault("a", "two")
    page = sessions.events.wait(after_seq=0, timeout=LONG_S)
    assert messages(page) == ["one", "two"]
    assert page.next_after_seq == page.latest_seq == 2


def test_wait_times_out_with_an_empty_page_that_still_advances(sessions: Store) -> None:
    sessions.faults.record_startup_fault("b", "not for a")
    page = sessions.events.wait(ApiEventFilter(session_id="a"), after_seq=0, timeout=0.05)
    assert page == ApiEventPage(events=[], next_after_seq=1, latest_seq=1)
    assert sessions.events.wait(after_seq=1, timeout=0) == ApiEventPage(
        events=[], next_after_seq=1, latest_seq=1
    )


def test_wait_without_a_cursor_starts_at_the_frontier(sessions: Store) -> None:
    sessions.faults.record_startup_fault("a", "before the call")
    writer = later(lambda: sessions.faults.record_startup_fault("a", "after the call"))
    page = sessions.events.wait(timeout=LONG_S)
    writer.join()
    assert messages(page) == ["after the call"]


def test_a_commit_of_the_same_store_wakes_a_waiter(sessions: Store) -> None:
    writer = later(lambda: sessions.faults.record_startup_fault("a", "woken"))
    page = sessions.events.wait(after_seq=0, timeout=LONG_S)
    writer.join()
    assert messages(page) == ["woken"]


def test_a_unit_of_work_committed_by_its_caller_wakes_a_waiter(sessions: Store) -> None:
    def commit_a_block() -> None:
        with sessions.unit_of_work() as uow:
            body = SessionFaultFactory(message="from a block").model_dump_json()
            uow.events.append("a", 1, body)
            uow.commit()

    writer = later(commit_a_block)
    page = sessions.events.wait(after_seq=0, timeout=LONG_S)
    writer.join()
    assert messages(page) == ["from a block"]


def test_a_commit_of_another_store_wakes_a_waiter(sessions: Store, migrated_url: str) -> None:
    # Another Store has its own engines and write path: only the backend's wake-up source
    # (SQLite's data_version watcher, PostgreSQL's LISTEN) can tell this one.
    with Store.open(migrated_url) as other:
        writer = later(lambda: other.faults.record_startup_fault("a", "from the other store"))
        page = sessions.events.wait(after_seq=0, timeout=LONG_S)
        writer.join()
    assert messages(page) == ["from the other store"]


def test_a_commit_of_another_process_wakes_a_waiter(sessions: Store, migrated_url: str) -> None:
    writer = later(lambda: append_in_another_process(migrated_url, "a", "from a process"))
    page = sessions.events.wait(after_seq=0, timeout=LONG_S)
    writer.join()
    assert messages(page) == ["from a process"]


def test_a_filtered_waiter_sleeps_through_other_sessions_events(sessions: Store) -> None:
    def write() -> None:
        sessions.faults.record_startup_fault("b", "b only")
        time.sleep(0.1)
        sessions.faults.record_startup_fault("a", "for a")

    writer = later(write)
    page = sessions.events.wait(ApiEventFilter(session_id="a"), after_seq=0, timeout=LONG_S)
    writer.join()
    assert messages(page) == ["for a"]
    assert page.next_after_seq == 2


def test_a_cursor_above_the_frontier_is_refused(sessions: Store) -> None:
    sessions.faults.record_startup_fault("a", "one")
    with pytest.raises(CursorAhead, match="after_seq 5 is above the frontier 1"):
        sessions.events.wait(after_seq=5, timeout=LONG_S)
    with pytest.raises(CursorAhead, match="after_seq 5 is above the frontier 1"):
        next(sessions.events.follow(after_seq=5))
    # `load` keeps the seed's rule for such a cursor.
    assert sessions.events.load(after_seq=5) == ApiEventPage(
        events=[], next_after_seq=5, latest_seq=1
    )


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        (True, "timeout must be a number of seconds, got bool"),
        ("1", "timeout must be a number of seconds, got str"),
        (None, "timeout must be a number of seconds, got NoneType"),
        (-0.5, "timeout must be between 0 and 3600 seconds, got -0.5"),
        (3600.5, "timeout must be between 0 and 3600 seconds, got 3600.5"),
        (float("nan"), "timeout must be between 0 and 3600 seconds, got nan"),
        (float("inf"), "timeout must be between 0 and 3600 seconds, got inf"),
    ],
)
def test_a_bad_timeout_is_refused(sessions: Store, timeout: object, message: str) -> None:
    with pytest.raises(InvalidRecord) as raised:
        sessions.events.wait(after_seq=0, timeout=timeout)
    assert str(raised.value) == message


def test_bad_cursors_and_filters_are_refused_as_load_refuses_them(sessions: Store) -> None:
    with pytest.raises(InvalidRecord, match="after_seq"):
        sessions.events.wait(after_seq=-1, timeout=0)
    with pytest.raises(InvalidRecord, match="after_seq"):
        sessions.events.follow(after_seq="3")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="filter"):
        sessions.events.follow({"session_id": "a"})  # type: ignore[arg-type]


def collect(follower: Follower, want: int, into: list[str]) -> threading.Thread:
    """Read pages in a thread until `want` messages arrived."""

    def run() -> None:
        for page in follower:
            into.extend(messages(page))
            if len(into) >= want:
                return

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_follower_gets_every_event_once_in_order(sessions: Store) -> None:
    got: list[str] = []
    with sessions.events.follow(after_seq=0) as follower:
        reader = collect(follower, 6, got)
        for n in range(6):
            sessions.faults.record_startup_fault("a" if n % 2 else "b", f"event {n}")
        reader.join(LONG_S)
    assert got == [f"event {n}" for n in range(6)]


def test_followers_with_filters_get_exactly_their_events(
    sessions: Store, migrated_url: str
) -> None:
    by_session: dict[str, list[str]] = {"a": [], "b": []}
    everything: list[str] = []
    followers = {
        "a": sessions.events.follow(ApiEventFilter(session_id="a"), after_seq=0),
        "b": sessions.events.follow(ApiEventFilter(workspace_id="w-b"), after_seq=0),
    }
    readers = [collect(followers[name], 8, by_session[name]) for name in ("a", "b")]
    all_follower = sessions.events.follow(after_seq=0)
    readers.append(collect(all_follower, 16, everything))
    with Store.open(migrated_url) as other:
        for n in range(4):
            sessions.faults.record_startup_fault("a", f"a{n} here")
            append_in_another_process(migrated_url, "b", f"b{n} there")
            other.faults.record_startup_fault("b", f"b{n} other")
            other.faults.record_startup_fault("a", f"a{n} other")
    for reader in readers:
        reader.join(LONG_S)
    for follower in [*followers.values(), all_follower]:
        follower.close()
    assert by_session["a"] == [m for n in range(4) for m in (f"a{n} here", f"a{n} other")]
    assert by_session["b"] == [m for n in range(4) for m in (f"b{n} there", f"b{n} other")]
    assert everything == [
        m for n in range(4) for m in (f"a{n} here", f"b{n} there", f"b{n} other", f"a{n} other")
    ]


def test_close_from_another_thread_ends_a_blocked_follower(sessions: Store) -> None:
    follower = sessions.events.follow()
    closer = later(follower.close)
    assert list(follower) == []
    closer.join()
    assert follower.closed


def test_closing_the_store_ends_followers_and_waits(url: str, migrated_url: str) -> None:
    store = Store.open(migrated_url)
    follower = store.events.follow()
    outcomes: list[Any] = []

    def wait() -> None:
        try:
            outcomes.append(store.events.wait(timeout=LONG_S))
        except StoreClosed as error:
            outcomes.append(error)

    waiter = threading.Thread(target=wait)
    waiter.start()
    closer = later(store.close)
    assert list(follower) == []
    waiter.join(LONG_S)
    closer.join()
    assert len(outcomes) == 1 and isinstance(outcomes[0], StoreClosed)
    with pytest.raises(StoreClosed):
        store.events.wait(after_seq=0, timeout=0)


def listening(store: Store) -> None:
    """Start the store's wake-up source and wait until it reads the database (and has pulsed
    once for what committed while it started; on PostgreSQL: its LISTEN is in force)."""
    store.events.wait(timeout=0)
    wakeups = store.following.source
    assert wakeups is not None and wakeups.listening.wait(LONG_S)


def test_a_follower_reads_nothing_while_nothing_commits(sessions: Store) -> None:
    # Waiting costs no query: the log (or the shared window) is read again only when the
    # wake-up signal moves.
    listening(sessions)
    follower = sessions.events.follow()
    assert follower.next_page(timeout=0) is None
    reads: list[int] = []
    original = sessions.events.load

    def counted(*args: Any, **kwargs: Any) -> ApiEventPage:
        reads.append(1)
        return original(*args, **kwargs)

    refreshes = sessions.following.window.refreshes
    sessions.events.load = counted  # type: ignore[method-assign]
    try:
        for _ in range(5):
            assert follower.next_page(timeout=0.02) is None
    finally:
        del sessions.events.load
    assert (reads, sessions.following.window.refreshes) == ([], refreshes)
    sessions.faults.record_startup_fault("a", "now")
    page = follower.next_page(timeout=LONG_S)
    assert page is not None and messages(page) == ["now"]
    assert sessions.following.window.refreshes == refreshes + 1
    follower.close()


def terminate_listener(store: Store) -> None:
    listener = store.following.source
    assert listener is not None
    pid = listener._connection.info.backend_pid  # type: ignore[union-attr]
    with psycopg.connect(pg_conninfo(store.url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_dropped_listen_connection_loses_no_wake_up(sessions: Store, migrated_url: str) -> None:
    listening(sessions)
    listener = sessions.following.source
    assert isinstance(listener, PostgresListener)
    terminate_listener(sessions)
    with Store.open(migrated_url) as other:
        writer = later(lambda: other.faults.record_startup_fault("a", "after the drop"))
        page = sessions.events.wait(after_seq=0, timeout=LONG_S)
        writer.join()
    assert messages(page) == ["after the drop"]
    for _ in range(int(LONG_S * 10)):  # it reconnects
        if listener.connections >= 2 and listener.listening.is_set():
            break
        time.sleep(0.1)
    assert listener.connections >= 2 and listener.listening.is_set()
    with Store.open(migrated_url) as other:
        writer = later(lambda: other.faults.record_startup_fault("a", "after the reconnect"))
        page = sessions.events.wait(after_seq=1, timeout=LONG_S)
        writer.join()
    assert messages(page) == ["after the reconnect"]


@pytest.fixture
def notifications(sessions: Store) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_conninfo(sessions.url), autocommit=True) as listening:
        listening.execute("LISTEN session_journal_events")
        yield listening


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_every_appending_transaction_notifies_at_commit_only(
    sessions: Store, notifications: psycopg.Connection[Any]
) -> None:
    schema = notifications.execute("SELECT current_schema()").fetchone()
    assert schema is not None

    def received(expected: int) -> list[str | None]:
        # Another test run's schemas share the channel: only this schema's count.
        payloads = [
            n.payload
            for n in notifications.notifies(
                timeout=LONG_S if expected else 0.3, stop_after=expected or None
            )
            if n.payload == schema[0]
        ]
        if expected:
            payloads += [
                n.payload for n in notifications.notifies(timeout=0.3) if n.payload == schema[0]
            ]
        return payloads

    sessions.faults.record_startup_fault("a", "one event")
    assert received(1) == [schema[0]]
    with sessions.unit_of_work() as uow:
        for n in range(3):
            uow.events.append("a", 1, SessionFaultFactory(message=f"{n}").model_dump_json())
        uow.commit()
    assert received(1) == [schema[0]]  # one per transaction
    with sessions.unit_of_work() as uow:  # rolled back: no notification
        uow.events.append("a", 1, SessionFaultFactory(message="undone").model_dump_json())
        uow.events.flush()
    assert received(0) == []
    with sessions.unit_of_work() as uow:
        uow.connection.execute(sa.text("SELECT 1"))
        uow.commit()  # nothing appended: nothing to tell
    assert received(0) == []


# The shared tail: followers at the frontier are served from one window per store.


def follower_pages(follower: Follower, count: int) -> list[int]:
    """The seqs of the next pages until `count` events came (each page read at once)."""
    seqs: list[int] = []
    while len(seqs) < count:
        page = follower.next_page(timeout=LONG_S)
        assert page is not None
        seqs.extend(event.seq for event in page.events)
    return seqs


def test_followers_at_the_frontier_share_one_read_per_wake_up(sessions: Store) -> None:
    listening(sessions)
    tail = sessions.following.window
    loads: list[int] = []
    original = sessions.events.load

    def counted(*args: Any, **kwargs: Any) -> ApiEventPage:
        loads.append(1)
        return original(*args, **kwargs)

    sessions.events.load = counted  # type: ignore[method-assign]
    try:
        followers = [
            sessions.events.follow(ApiEventFilter(session_id="a" if n % 2 else "b"))
            for n in range(20)
        ]
        got: list[list[str]] = [[] for _ in followers]
        readers = [collect(f, 3, into) for f, into in zip(followers, got, strict=True)]
        before = tail.refreshes
        for n in range(3):
            sessions.faults.record_startup_fault("a", f"a{n}")
            sessions.faults.record_startup_fault("b", f"b{n}")
        for reader in readers:
            reader.join(LONG_S)
        for follower in followers:
            follower.close()
    finally:
        del sessions.events.load
    for n, messages_ in enumerate(got):
        assert messages_ == [f"{'a' if n % 2 else 'b'}{k}" for k in range(3)]
    assert loads == []  # no follower read the database itself
    # At most one read of the window per wake-up, whatever the number of followers: a commit of
    # this store wakes them twice (right after it, and again when the backend's source sees it).
    assert tail.refreshes - before <= 2 * 6 + 2


@pytest.mark.parametrize("read_between", [False, True])
def test_the_window_answers_as_load_does_after_deletes_and_moves(
    sessions: Store, read_between: bool
) -> None:
    cursor = sessions.events.latest_seq()
    sessions.events.wait(after_seq=cursor, timeout=0)  # the window starts at the frontier
    for n in range(3):
        sessions.faults.record_startup_fault("a", f"a{n}")
        sessions.faults.record_startup_fault("b", f"b{n}")
    if read_between:  # the window holds b's events when b goes: its next read must see that
        assert len(sessions.events.wait(after_seq=cursor, timeout=0).events) == 6
    assert sessions.sessions.delete("b")
    sessions.sessions.save(SessionFactory(id="b", workspace_id="w-a"))  # the id again
    sessions.faults.record_startup_fault("b", "new b")
    sessions.sessions.save(SessionFactory(id="a", workspace_id="w-b"))  # a moves
    for event_filter in (
        None,
        ApiEventFilter(session_id="b"),
        ApiEventFilter(workspace_id="w-a"),
        ApiEventFilter(workspace_id="w-b"),
    ):
        for limit in (1, 2, 100):
            follower = sessions.events.follow(event_filter, after_seq=cursor, limit=limit)
            served = follower.next_page(timeout=0)
            assert served == sessions.events.load(event_filter, cursor, limit)
            follower.close()
    page = sessions.events.wait(ApiEventFilter(workspace_id="w-a"), after_seq=cursor, timeout=0)
    assert messages(page) == ["new b"]


def test_a_follower_behind_the_window_reads_the_database(migrated_url: str) -> None:
    sessions = Store.open(migrated_url, options=StoreOptions(follow_window_events=3))
    sessions.sessions.save(SessionFactory(id="a"))
    tail = sessions.following.window
    sessions.events.wait(timeout=0)  # the window starts at the frontier (0)
    with sessions.unit_of_work() as uow:  # more than the window at once
        for n in range(8):
            uow.events.append("a", 1, SessionFaultFactory(message=f"m{n}").model_dump_json())
        uow.commit()
    with sessions.events.follow(after_seq=0, limit=2) as follower:
        assert follower_pages(follower, 8) == list(range(1, 9))
    sessions.faults.record_startup_fault("a", "m8")
    with sessions.events.follow(after_seq=4, limit=100) as follower:  # below the window
        assert follower_pages(follower, 5) == list(range(5, 10))
    assert tail.refreshes >= 1
    sessions.close()


def test_without_a_window_every_follower_reads_the_database(migrated_url: str) -> None:
    with Store.open(migrated_url, options=StoreOptions(follow_window_events=0)) as store:
        store.sessions.save(SessionFactory(id="a"))
        writer = later(lambda: store.faults.record_startup_fault("a", "read from the log"))
        page = store.events.wait(after_seq=0, timeout=LONG_S)
        writer.join()
        assert messages(page) == ["read from the log"]
        assert store.following.window.refreshes == 0


def test_a_cursor_newer_than_the_window_is_not_taken_for_one_ahead(
    sessions: Store, migrated_url: str
) -> None:
    # A follower may hold a cursor read from the database after a commit that has not woken
    # the window yet: the window must not call that cursor ahead of the frontier.
    sessions.events.wait(timeout=0)  # the window, at the frontier
    with Store.open(migrated_url) as other:  # its commits pulse only its own signal
        other.faults.record_startup_fault("a", "unseen by the window")
    fresh = sessions.events.load(after_seq=0)
    page = sessions.events.wait(after_seq=fresh.next_after_seq, timeout=0)
    assert page == ApiEventPage(events=[], next_after_seq=1, latest_seq=1)


@pytest.mark.parametrize("limit", [0, -5, 1])
def test_a_follower_page_is_clamped_as_load_clamps_it(sessions: Store, limit: int) -> None:
    # A limit below 1 reads one event at a time, as `load` does: never an empty page that
    # moves the cursor past events it did not return.
    sessions.events.wait(timeout=0)  # the window, at the frontier
    for n in range(3):
        sessions.faults.record_startup_fault("a", f"m{n}")
    with sessions.events.follow(after_seq=0, limit=limit) as follower:
        assert follower_pages(follower, 3) == [1, 2, 3]
    page = sessions.events.wait(after_seq=0, limit=limit, timeout=0)
    assert [event.seq for event in page.events] == [1]


def test_closing_one_follower_makes_no_other_read_again(sessions: Store) -> None:
    listening(sessions)
    others = [sessions.events.follow() for _ in range(3)]
    for other in others:
        assert other.next_page(timeout=0) is None
    refreshes = sessions.following.window.refreshes
    closing = sessions.events.follow()
    closer = later(closing.close, 0.05)
    assert list(closing) == []
    closer.join()
    for other in others:
        assert other.next_page(timeout=0.05) is None
        other.close()
    assert sessions.following.window.refreshes == refreshes
