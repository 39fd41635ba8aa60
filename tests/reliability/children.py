"""What the reliability scenarios' child processes run.

Each child serves calls from the parent over a pipe (`serve`): the parent sends one of the
functions below with its arguments, the child runs it with its `Child` (its own `Store`, opened
on first use, and a barrier shared with the other racers) and sends back the result or the
traceback. The module is preloaded by the fork server (`harness.py`), so a child starts in
milliseconds with session_journal already imported and no connection inherited.

Writers identify each event by its message: `<session>#<commit>` for a commit of one event,
`<session>#<commit>.<part>` for the parts of a unit of work. After each commit a writer reads
back the seqs its events got (it is the only writer of its session) and acknowledges them in its
ack file with a single `os.write` per commit, so a writer killed at any moment leaves only whole
lines: an acknowledged event is one whose commit returned.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from session_journal import (
    ApiEventFilter,
    ApiEventPage,
    Lease,
    LeaseHeld,
    LeaseLost,
    LifecycleConflict,
    NotOperationOwner,
    SessionFault,
    SessionRecord,
    Store,
    migrations,
)

BASE_MS = 1_700_000_000_000
BARRIER_TIMEOUT_S = 60.0
FOLLOW_TIMEOUT_S = 120.0
UNKILLED_TIMEOUT_S = 120.0

# One event as the log holds it: (seq, session_id, message).
Logged = tuple[int, str, str]


@dataclass
class Child:
    """A child's state between calls."""

    url: str
    barrier: Barrier | None
    opened: Store | None = None

    @property
    def store(self) -> Store:
        """The child's store, opened (plainly) on first use."""
        if self.opened is None:
            self.opened = Store.open(self.url)
        return self.opened

    def ready(self) -> None:
        """Open the store now, before a barrier: the race is the call, not the connect."""
        if self.opened is None:
            self.opened = Store.open(self.url)

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()
            self.opened = None

    def start_together(self, delay_s: float) -> None:
        """Wait for the other racers, then `delay_s` more (the parent varies who goes first)."""
        assert self.barrier is not None, "this child has no barrier"
        self.barrier.wait(timeout=BARRIER_TIMEOUT_S)
        if delay_s:
            time.sleep(delay_s)


def serve(url: str, connection: Connection, barrier: Barrier | None) -> None:
    """The child's loop: run each `(function, args)` received until `None` or the pipe closes."""
    child = Child(url, barrier)
    try:
        while True:
            try:
                request = connection.recv()
            except EOFError:
                return
            if request is None:
                return
            function, args = request
            try:
                reply: tuple[str, Any] = ("ok", function(child, *args))
            except BaseException:
                reply = ("error", traceback.format_exc())
            connection.send(reply)
    finally:
        child.close()


# --- writing and reading events -------------------------------------------------------------------


def planned(session_id: str, commits: range) -> list[str]:
    """The messages of the plan's `commits`, in order."""
    return [message for commit in commits for message in commit_messages(session_id, commit)]


def commit_messages(session_id: str, commit: int) -> list[str]:
    """The messages of a writer's `commit`-th commit: every third commit is a unit of work of
    three events, the others one startup fault through the service."""
    if commit % 3 == 2:
        return [f"{session_id}#{commit}.{part}" for part in range(3)]
    return [f"{session_id}#{commit}"]


def fault_body(message: str) -> str:
    return json.dumps(
        {
            "type": "session_fault",
            "data": {"reason": "startup_failed", "message": message, "command_id": None},
        }
    )


def logged(
    store: Store, event_filter: ApiEventFilter | None = None, after_seq: int = 0
) -> list[Logged]:
    """Every event after `after_seq` as `(seq, session_id, message)`, paging by cursor."""
    found: list[Logged] = []
    cursor = after_seq
    while page := store.events.load(event_filter, after_seq=cursor, limit=1000).events:
        for event in page:
            assert isinstance(event.event, SessionFault), event
            found.append((event.seq, event.session_id, event.event.message))
        cursor = page[-1].seq
    return found


def append_commit(child: Child, session_id: str, commit: int, ack_fd: int) -> None:
    """Commit one step of the writer's plan, then acknowledge its events with their seqs (read
    back after the frontier seen before the commit: nobody else writes this session)."""
    store = child.store
    messages = commit_messages(session_id, commit)
    before = store.events.latest_seq()
    if len(messages) == 1:
        if not store.faults.record_startup_fault(session_id, messages[0]):
            raise AssertionError(f"session {session_id} is gone")
    else:
        with store.unit_of_work() as uow:
            for message in messages:
                uow.events.append(session_id, BASE_MS + commit, fault_body(message))
            uow.commit()
    mine = logged(store, ApiEventFilter(session_id=session_id), after_seq=before)
    if [message for _, _, message in mine] != messages:
        raise AssertionError(f"after seq {before}, {session_id} reads back {mine}, not {messages}")
    os.write(ack_fd, "".join(f"{seq} {message}\n" for seq, _, message in mine).encode())


def append_commits(
    child: Child, session_id: str, commits: range, ack_path: str, together: bool = False
) -> int:
    """The plan's `commits` (after the barrier if `together`); how many."""
    child.ready()
    ack_fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if together:
            child.start_together(0)
        for commit in commits:
            append_commit(child, session_id, commit, ack_fd)
    finally:
        os.close(ack_fd)
    return len(commits)


def append_until_killed(child: Child, session_id: str, ack_path: str) -> None:
    """Commit the plan's steps one after the other until the parent kills this process (or,
    should the parent have died without killing it, until a generous deadline)."""
    ack_fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    deadline = time.monotonic() + UNKILLED_TIMEOUT_S
    commit = 0
    try:
        while time.monotonic() < deadline:
            append_commit(child, session_id, commit, ack_fd)
            commit += 1
    finally:
        os.close(ack_fd)
    raise AssertionError(f"not killed within {UNKILLED_TIMEOUT_S:.0f} s")


def follow(
    child: Child, after_seq: int, expected: int, limits: list[int]
) -> tuple[list[Logged], int]:
    """Page from `after_seq` by cursor, with the page sizes in `limits` in turn, until `expected`
    events arrived (or a generous deadline passed). Returns what was seen and the size of one
    more page read after the last one, which should be empty."""
    store = child.store
    seen: list[Logged] = []
    cursor = after_seq
    deadline = time.monotonic() + FOLLOW_TIMEOUT_S
    calls = 0
    while len(seen) < expected and time.monotonic() < deadline:
        page = store.events.load(after_seq=cursor, limit=limits[calls % len(limits)])
        calls += 1
        if page.next_after_seq < cursor or page.latest_seq < page.next_after_seq:
            raise AssertionError(f"after {cursor}: page moved the cursor wrongly: {page}")
        for event in page.events:
            assert isinstance(event.event, SessionFault), event
            seen.append((event.seq, event.session_id, event.event.message))
        cursor = page.next_after_seq
        if not page.events:
            time.sleep(0.002)
    return seen, len(store.events.load(after_seq=cursor, limit=1000).events)


def open_store(child: Child, upgrade: bool) -> int:
    """Close the child's store and open it again as `Store.open(url, upgrade=upgrade)`; the
    frontier."""
    child.close()
    child.opened = Store.open(child.url, upgrade=upgrade)
    return child.store.events.latest_seq()


def close_store(child: Child) -> None:
    child.close()


def save_sessions(child: Child, records: list[SessionRecord]) -> None:
    for record in records:
        child.store.sessions.save(record)


def read_log(child: Child) -> list[Logged]:
    return logged(child.store)


def upgrade(child: Child, revision: str) -> None:
    """Migrate the child's database to `revision` (the child opens no store)."""
    migrations.upgrade(child.url, revision)


# --- racing checkpoint operations -----------------------------------------------------------------


def race_begin(child: Child, record: SessionRecord, command_id: str, delay_s: float) -> str:
    """`checkpoints.begin` at the same moment as the other racers: "began" or "conflict"."""
    store = child.store  # opened before the barrier: the race is the call, not the connect
    child.start_together(delay_s)
    try:
        store.checkpoints.begin(record, command_id)
    except LifecycleConflict:
        return "conflict"
    return "began"


def race_finish(
    child: Child, outcome: str, record: SessionRecord, command_id: str, delay_s: float
) -> str:
    """The owner finishes its checkpoint (`outcome`: succeeded, failed or deferred) while
    another process recovers: "finished", or "not owner" when recovery ended it first."""
    store = child.store
    child.start_together(delay_s)
    if outcome == "succeeded":
        try:
            store.checkpoints.save_requested(record, command_id)
        except NotOperationOwner:
            return "not owner"
        return "finished"
    finished = store.checkpoints.finish_failed(
        record, command_id, deferred=outcome == "deferred", message=f"{outcome} by the owner"
    )
    return "finished" if finished else "not owner"


def race_recover(child: Child, now: str, delay_s: float) -> int:
    """`checkpoints.recover_interrupted(now)` while the owner finishes; how many it recovered."""
    store = child.store
    child.start_together(delay_s)
    return store.checkpoints.recover_interrupted(now)


# A projector's read model (`test_killed_projector`): one row per event it handled, written in
# the transaction that acks the page, so an event handled twice shows as two rows.
EFFECTS = sa.table("projected_effects", sa.column("seq", sa.BigInteger))


def project_page(
    store: Store, consumer: str, page: ApiEventPage, lease: Lease | None = None
) -> None:
    """Handle one page: its effects and the ack (with `lease`), in one transaction."""
    with store.unit_of_work() as uow:
        for event in page.events:
            uow.connection.execute(EFFECTS.insert().values(seq=event.seq))
        store.consumers.ack(consumer, page.next_after_seq, lease=lease, uow=uow)
        uow.commit()


def hold_until_paused(
    child: Child, consumer: str, holder: str, ttl_s: float, ready_path: str, go_path: str
) -> list[str]:
    """A replica of a projector that takes the consumer's lease, handles its first page, reads
    the next and then waits (the file at `ready_path` made) until the file at `go_path` exists
    — the parent pauses it there with SIGSTOP, past its lease — before it handles that page
    and renews the lease; what came of each ("acked"/"renewed", or the error's name)."""
    store = child.store
    lease = store.consumers.acquire(consumer, holder, ttl_s=ttl_s)
    outcomes = []
    with store.consumers.follow(consumer, limit=3) as follower:
        first = follower.next_page(timeout=FOLLOW_TIMEOUT_S)
        assert first is not None and first.events
        project_page(store, consumer, first, lease)
        page = follower.next_page(timeout=FOLLOW_TIMEOUT_S)
        assert page is not None and page.events
        Path(ready_path).touch()
        while not Path(go_path).exists():
            time.sleep(0.01)
        for name, attempt in [
            ("acked", lambda: project_page(store, consumer, page, lease)),
            ("renewed", lease.renew),
        ]:
            try:
                attempt()
                outcomes.append(name)
            except LeaseLost as lost:
                outcomes.append(f"LeaseLost: {lost}")
    return outcomes


def take_over(
    child: Child, consumer: str, holder: str, ttl_s: float, through_seq: int
) -> tuple[str, int, int]:
    """Another replica: asks for the lease without waiting (refused while the first holds it:
    the holder it was refused by), then waits for it and handles the consumer's pages with it
    until its position reaches `through_seq`; the holder refused by, the generation taken and
    the position then."""
    store = child.store
    try:
        store.consumers.acquire(consumer, holder, ttl_s=ttl_s)
        refused_by = ""
    except LeaseHeld as held:
        refused_by = held.holder
    lease = store.consumers.acquire(consumer, holder, ttl_s=ttl_s, wait_s=FOLLOW_TIMEOUT_S)
    with store.consumers.follow(consumer, limit=3) as follower:
        while store.consumers.position(consumer) < through_seq:
            page = follower.next_page(timeout=FOLLOW_TIMEOUT_S)
            if page is None:
                raise AssertionError(f"no page of {consumer} within {FOLLOW_TIMEOUT_S} s")
            project_page(store, consumer, page, lease)
    return refused_by, lease.generation, store.consumers.position(consumer)


def project_until_killed(child: Child, consumer: str, limit: int, started_path: str) -> None:
    """Follow the consumer and handle its pages until the parent kills this child; the file at
    `started_path` is made once the follower started."""
    store = child.store
    with store.consumers.follow(consumer, limit=limit) as follower:
        Path(started_path).touch()
        while True:
            page = follower.next_page(timeout=UNKILLED_TIMEOUT_S)
            if page is None:
                raise AssertionError("the projector was not killed in time")
            project_page(store, consumer, page)


def project_through(child: Child, consumer: str, limit: int, through_seq: int) -> int:
    """Follow the consumer and handle its pages until its position reaches `through_seq`; the
    position then."""
    store = child.store
    with store.consumers.follow(consumer, limit=limit) as follower:
        while store.consumers.position(consumer) < through_seq:
            page = follower.next_page(timeout=FOLLOW_TIMEOUT_S)
            if page is None:
                raise AssertionError(f"no page of {consumer} within {FOLLOW_TIMEOUT_S} s")
            project_page(store, consumer, page)
    return store.consumers.position(consumer)
