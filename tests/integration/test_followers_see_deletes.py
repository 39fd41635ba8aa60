"""Followers never serve what another process deleted: after a prune (`db prune` on the command
line, `events.prune`), a session deleted or `remove_ended` by another store, `wait` and
`follow` of a running store answer exactly as `load` does, and a cursor below the new floor
raises `CursorExpired`; with a follower waiting at the moment of the change, the change wakes
it (its read of the followers' window learns of the change). The whole matrix: {CLI prune,
prune, delete, remove_ended} x {sync, async API} x {SQLite, PostgreSQL} x {no follower
waiting, one waiting}.

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
        signal = sync_of(store).events._transactions.commit_signal()
        until(lambda: signal.waiting() > 0, "the follower waits")

    change(kind, migrated_url, floor)

    if waiter is not None:  # woken by the change, its read of the window learnt of it
        tail = sync_of(store).events._tail
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
