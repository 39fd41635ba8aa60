"""Followers never serve what another process deleted: after a prune (`db prune` on the command
line, `events.prune`), a session deleted or `remove_ended` by another store, `wait` and
`follow` of a running store answer exactly as `load` does, and a cursor below the new floor
raises `CursorExpired`; with a follower waiting at the moment of the change, the change wakes
it (its read of the followers' window learns of the change). The whole matrix: {CLI prune,
prune, delete, remove_ended} x {sync, async API} x {SQLite, PostgreSQL} x {no follower
waiting, one waiting}. And once a prune of another process has woken the store, the next page of
every kind of follower (of every event, one session, one workspace, one type; sync and async)
raises `CursorExpired`, even while the followers' window is still being read.

The other process is a second `Store` on the same database (its commits reach the first store
only as another process's do: through the database), or the command line in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from session_journal import ApiEventFilter, CursorExpired, SessionRecord, Store

pytestmark = pytest.mark.both_apis

CHANGES = ["cli_prune", "prune", "delete", "remove_ended"]
PRUNES = {"cli_prune", "prune"}


def sync_of(store: Any) -> Store:
    """The sync store behind the `store` fixture (itself, or the async facade's)."""
    return store if isinstance(store, Store) else store.async_store.sync


def until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.01)


class Waiter(threading.Thread):
    """A follower of session `s-waiter` waiting in `wait` (no event of it comes)."""

    def __init__(self, store: Any, after_seq: int) -> None:
        super().__init__(daemon=True)
        self._store, self._after = store, after_seq
        self.result: object = None

    def run(self) -> None:
        try:
            self.result = self._store.events.wait(
                ApiEventFilter(session_id="s-waiter"), after_seq=self._after, timeout=30
            )
        except Exception as error:
            self.result = error


def change(kind: str, url: str, through_seq: int) -> None:
    """What another process does: prune through `through_seq`, or take session `s-gone`."""
    if kind == "cli_prune":
        env = os.environ | {"SESSION_JOURNAL_DATABASE_URL": url}
        command = [sys.executable, "-m", "session_journal", "db", "prune", "--allow-level-change"]
        done = subprocess.run(
            [*command, "--through-seq", str(through_seq)], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return
    with Store.open(url) as other:
        if kind == "prune":
            other.events.prune(through_seq=through_seq)
        elif kind == "delete":
            assert other.sessions.delete("s-gone")
        else:
            assert other.sessions.remove_ended(["s-gone"]) == ["s-gone"]


@pytest.mark.parametrize("waiting", [False, True], ids=["none_waiting", "one_waiting"])
@pytest.mark.parametrize("kind", CHANGES)
def test_wait_and_follow_answer_as_load_after_another_process_deletes(
    store: Any, migrated_url: str, kind: str, waiting: bool
) -> None:
    for session_id in ("s-gone", "s-kept", "s-waiter"):
        store.sessions.save(SessionRecord(id=session_id, project_id="p", state="running"))
    store.faults.record_startup_fault("s-kept", "before")
    start = store.events.wait(timeout=0).next_after_seq  # the window is filled here
    assert start > 0  # a cursor that can expire
    for n in range(3):
        store.faults.record_startup_fault("s-gone", f"gone {n}")
        store.faults.record_startup_fault("s-kept", f"kept {n}")
    if kind == "remove_ended":
        store.sessions.save_lifecycle(SessionRecord(id="s-gone", project_id="p", state="closed"))
    # The window now holds the six events (read by a follower of this store), and nothing of
    # this store commits until the change: only the database can tell of it.
    held = store.events.wait(after_seq=start, timeout=0)
    assert [e.seq for e in held.events] == list(range(start + 1, start + 7))
    gone = [e.seq for e in held.events if e.session_id == "s-gone"]
    floor = start + 4  # a prune through the fourth of them

    waiter = None
    if waiting:
        waiter = Waiter(store, start)
        waiter.start()
        signal = sync_of(store).following.watched_signal()
        until(lambda: signal.waiting() > 0, "the follower waits")

    change(kind, migrated_url, floor)

    if waiter is not None:  # woken by the change, its read of the window learnt of it
        tail = sync_of(store).following.window
        if kind in PRUNES:
            until(lambda: tail.snapshot().pruned == floor, "the window sees the prune")
        else:
            until(lambda: set(gone) <= tail.snapshot().missing, "the window sees the delete")
    if kind in PRUNES:
        with pytest.raises(CursorExpired) as expired:
            store.events.wait(after_seq=start, timeout=0)
        assert (expired.value.cursor, expired.value.pruned_through) == (start, floor)
        with pytest.raises(CursorExpired):
            next(iter(store.events.follow(after_seq=start + 1)))
        expected = store.events.load(after_seq=floor)
        assert [e.seq for e in expected.events] == [start + 5, start + 6]
        assert store.events.wait(after_seq=floor, timeout=0) == expected
        assert next(iter(store.events.follow(after_seq=floor))) == expected
    else:
        expected = store.events.load(after_seq=start)
        assert [e.session_id for e in expected.events] == ["s-kept"] * 3
        assert store.events.wait(after_seq=start, timeout=0) == expected
        assert next(iter(store.events.follow(after_seq=start))) == expected
    if waiter is not None:  # it read past the change (nothing of it was deleted): it goes on
        store.faults.record_startup_fault("s-waiter", "released")
        waiter.join(20)
        page = waiter.result
        assert not isinstance(page, BaseException), page
        assert [e.session_id for e in page.events] == ["s-waiter"]  # type: ignore[attr-defined]


FOLLOWERS = {
    "every event": ApiEventFilter(),
    "one session": ApiEventFilter(session_id="s-kept"),
    "one workspace": ApiEventFilter(workspace_id="w-1"),
    "one type": ApiEventFilter(types=("session_fault",)),
}


class HeldReads:
    """Holds every read of a store's followers' window that would bring it up to a newer
    generation of the commit signal, while `release` is not set, as a slow read would hold it:
    `asked` is set once one is held."""

    def __init__(self, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked, self.release = threading.Event(), threading.Event()
        tail = sync_of(store).following.window
        refresh = tail.refresh

        def held(generation: int) -> None:
            if generation > tail.snapshot().generation and not self.release.is_set():
                self.asked.set()
                self.release.wait(30)
            refresh(generation)

        monkeypatch.setattr(tail, "refresh", held)


@pytest.mark.parametrize("kind", list(FOLLOWERS))
def test_once_a_prune_woke_the_store_the_next_page_of_every_follower_expires(
    store: Any, migrated_url: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # A follower reads page by page from the followers' window; `db prune` in another process
    # raises the floor above its cursor and wakes the store (a follower of it waits), but the
    # window's read is slow. The follower's next page must not come from the window as it was
    # before the prune: it waits for the read and raises `CursorExpired`.
    for session_id in ("s-kept", "s-waiter"):
        store.sessions.save(SessionRecord(id=session_id, project_id="p", workspace_id="w-1"))
    start = store.events.wait(timeout=0).next_after_seq  # the window is filled here
    for n in range(8):
        store.faults.record_startup_fault("s-kept", f"kept {n}")
    follower = store.events.follow(FOLLOWERS[kind], after_seq=start, limit=1)
    read = [[e.seq for e in follower.next_page(5).events] for _ in range(2)]
    assert read == [[start + 1], [start + 2]]
    waiter = Waiter(store, start + 8)  # what the prune wakes
    waiter.start()
    signal = sync_of(store).following.watched_signal()
    until(lambda: signal.waiting() > 0, "the follower waits")
    held = HeldReads(store, monkeypatch)
    floor = start + 5

    change("cli_prune", migrated_url, floor)

    assert held.asked.wait(15), "the prune did not wake the store"
    outcome: list[object] = []

    def next_page() -> None:
        try:
            outcome.append(follower.next_page(5))
        except Exception as error:
            outcome.append(error)

    reading = threading.Thread(target=next_page, daemon=True)
    reading.start()
    reading.join(0.3)  # a page from memory would be there by now
    held.release.set()
    reading.join(15)
    assert len(outcome) == 1
    expired = outcome[0]
    assert isinstance(expired, CursorExpired), expired
    assert (expired.cursor, expired.pruned_through) == (start + 2, floor)
    store.faults.record_startup_fault("s-waiter", "released")
    waiter.join(20)
    assert [e.session_id for e in waiter.result.events] == ["s-waiter"]  # type: ignore[attr-defined]


@pytest.mark.sync_api
def test_a_read_of_more_than_a_window_after_a_delete_keeps_every_new_event(
    migrated_url: str,
) -> None:
    # The window holds 20 kB. Another store deletes a session (the count of deleted events
    # moves), then appends ten events of 2 kB: the window's next read holds only new rows,
    # and none of them is taken for deleted.
    from session_journal import StoreOptions

    options = StoreOptions(follow_window_bytes=20_000)
    with Store.open(migrated_url, options=options) as store, Store.open(migrated_url) as other:
        for session_id in ("gone", "kept"):
            store.sessions.save(SessionRecord(id=session_id, project_id="p"))
        store.faults.record_startup_fault("gone", "small")
        store.faults.record_startup_fault("kept", "small")
        start = store.events.wait(timeout=0).next_after_seq  # the window is read here
        assert other.sessions.delete("gone")
        for n in range(10):
            other.faults.record_startup_fault("kept", f"big {n} " + "x" * 2_000)
        expected = [event.seq for event in store.events.load(after_seq=start).events]
        assert len(expected) == 10
        assert [e.seq for e in store.events.wait(after_seq=start, timeout=0).events] == expected
        with store.events.follow(after_seq=start) as follower:
            page = follower.next_page(60)
            assert page is not None and [event.seq for event in page.events] == expected
        window = store.following.window.snapshot()
        assert not window.missing & set(expected)


@pytest.mark.parametrize("what", ["prune", "delete"])
@pytest.mark.parametrize("kind", list(FOLLOWERS))
def test_a_follower_reading_through_the_window_learns_of_another_process_before_its_next_page(
    store: Any, migrated_url: str, kind: str, what: str
) -> None:
    # A follower catches up page by page through the followers' window; another process prunes
    # (or deletes a session), and nothing tells this store (its source of other processes'
    # commits is stopped: a notification not yet delivered, a watcher that only runs while a
    # follower waits). Its next page still answers as `load` does now: `CursorExpired` below
    # the new floor, no event of the deleted session.
    for session_id in ("s-kept", "s-gone"):
        store.sessions.save(SessionRecord(id=session_id, project_id="p", workspace_id="w-1"))
    start = store.events.wait(timeout=0).next_after_seq  # the window is filled here
    for n in range(4):
        store.faults.record_startup_fault("s-kept", f"kept {n}")
        store.faults.record_startup_fault("s-gone", f"gone {n}")
    following = sync_of(store).following
    following.watched_signal()
    following.source.stop()  # (stopping it wakes followers once: before they start)
    follower = store.events.follow(FOLLOWERS[kind], after_seq=start, limit=1)
    first = follower.next_page(5)
    assert first is not None and first.events[0].session_id == "s-kept"
    floor = start + 5

    change(what, migrated_url, floor)

    if what == "prune":
        with pytest.raises(CursorExpired) as expired:
            follower.next_page(5)
        assert (expired.value.cursor, expired.value.pruned_through) == (start + 1, floor)
        return
    sessions = []
    while (page := follower.next_page(0, events_only=True)) is not None:
        sessions += [event.session_id for event in page.events]
    assert sessions == ["s-kept"] * 3


def test_a_follower_at_the_end_of_the_log_spends_no_check_on_its_pages(store: Any) -> None:
    # Woken by each commit, a follower reads a window read after it; between the pages it
    # returns, at the window's end, nothing stale can be served: no statement more than the
    # window's reads, whatever the number of pages.
    store.sessions.save(SessionRecord(id="s-1", project_id="p"))
    tail = sync_of(store).following.window
    follower = store.events.follow(after_seq=None)
    assert follower.next_page(0) is None  # started, at the frontier: its first read checked
    checks = tail.checks
    for n in range(5):
        store.faults.record_startup_fault("s-1", f"fault {n}")
        page = follower.next_page(5)
        assert page is not None and [e.event.message for e in page.events] == [f"fault {n}"]
        assert follower.next_page(0) is None
    assert tail.checks == checks


def test_threads_asking_for_a_check_of_the_window_together_share_one_statement(
    store: Any,
) -> None:
    # Threads reading through the window, each after a read that ended before any check of it
    # began (as followers kept busy by a writer in another process are), ask for a check at
    # once: one statement runs; the others wait for it and, as it began after their reads,
    # read nothing of their own.
    store.sessions.save(SessionRecord(id="s-1", project_id="p"))
    store.faults.record_startup_fault("s-1", "fault")
    store.events.wait(timeout=0)  # the window is filled here
    tail = sync_of(store).following.window
    since = time.monotonic()  # the readers' previous reads ended here
    assert not tail.checked_since(since)
    checks, gate = tail.checks, threading.Barrier(20)

    def ask() -> None:
        gate.wait()
        tail.verify(since)

    readers = [threading.Thread(target=ask) for _ in range(20)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert tail.checks == checks + 1
    assert tail.checked_since(since)
    tail.verify(since)  # answered already: nothing read
    assert tail.checks == checks + 1


def test_a_later_page_s_check_reads_the_window_again_only_when_events_were_removed(
    store: Any, migrated_url: str
) -> None:
    # A follower catching up page by page through the window has it checked before each page;
    # another process only appended meanwhile: the check finds nothing removed and the window
    # answers as it is (the new events come with their wake-up), no read of it again. Once
    # another process deleted a session, the check reads it again.
    sync = sync_of(store)
    for session_id in ("s-kept", "s-gone"):
        sync.sessions.save(SessionRecord(id=session_id, project_id="p"))
    start = sync.events.wait(timeout=0).next_after_seq  # the window is filled here
    for n in range(3):
        sync.faults.record_startup_fault("s-kept", f"kept {n}")
        sync.faults.record_startup_fault("s-gone", f"gone {n}")
    following = sync.following
    following.watched_signal()
    following.source.stop()
    tail = following.window
    follower = sync.events.follow(after_seq=start, limit=1)
    first = follower.next_page(5)
    assert first is not None and first.events[0].event.message == "kept 0"
    with Store.open(migrated_url) as other:
        other.faults.record_startup_fault("s-kept", "appended by another process")
    checks, refreshes = tail.checks, tail.refreshes
    page = follower.next_page(5)
    assert page is not None and [e.event.message for e in page.events] == ["gone 0"]
    assert (tail.checks, tail.refreshes) == (checks + 1, refreshes)
    with Store.open(migrated_url) as other:
        assert other.sessions.delete("s-gone")
    page = follower.next_page(5)
    assert page is not None and [e.event.message for e in page.events] == ["kept 1"]
    assert (tail.checks, tail.refreshes) == (checks + 2, refreshes + 1)


def test_the_source_of_other_processes_commits_wakes_followers_once_it_starts(store: Any) -> None:
    # What another process committed while the source started (after a follower's read of the
    # log, before the source's first reading of the database) is read again: the source pulses
    # once it reads (SQLite's watcher after its first data_version, PostgreSQL's listener once
    # LISTEN is in force), with no commit after it.
    following = sync_of(store).following
    generation = following.signal.generation
    following.watched_signal()
    until(lambda: following.signal.generation > generation, "a pulse once the source started")
