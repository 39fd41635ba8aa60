"""The in-memory fakes (`tests.fakes`) behave as the database does for the services' rules: one
scenario run on a real store (both backends) and on the fakes leaves the same events, sessions,
activity and checkpoint operations. The unit tests of `tests/unit/test_service_rules.py` are
only as good as this agreement."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEventFilter,
    CheckpointMetadata,
    ConsumerNotFound,
    InvalidRecord,
    LeaseHeld,
    LeaseLost,
    LifecycleConflict,
    NotOperationOwner,
    SessionNotFound,
    SessionRecord,
    SessionState,
    Store,
)
from session_journal.journal import JournalEnvelope, Message, MessageRole, UserMsg
from session_journal.journal.search import IndexRow
from session_journal.services.activity import ActivityService
from session_journal.services.checkpoints import CheckpointService
from session_journal.services.consumers import ConsumerService
from session_journal.services.events import EventService
from session_journal.services.faults import FaultService
from session_journal.services.index import ProjectIndex
from session_journal.services.sessions import SessionService
from session_journal.storage.clock import DATABASE_CLOCK
from tests.fakes import FakeServices


class Services(Protocol):
    sessions: SessionService
    events: EventService
    activity: ActivityService
    faults: FaultService
    checkpoints: CheckpointService
    consumers: ConsumerService


def record(session_id: str, **fields: Any) -> SessionRecord:
    return SessionRecord(id=session_id, project_id="project-1", **fields)


def activity(state: str) -> ApiActivityState:
    return ApiActivityState(
        state=state,
        details=ApiActivityDetails(kind=ApiActivityKind.TURN, turn_started_at_ms=5),
        is_idle=False,
        waiting_for_input=False,
        capacity_retry=False,
    )


METADATA = CheckpointMetadata(
    archive_path="/a.tar", sha256="b" * 64, created_at="2026-11-29T10:00:00Z", event_frontier=3
)


def scenario(services: Services) -> list[str]:
    """Every rule the unit tests cover, once; the refusals it meets, by class."""
    refused: list[str] = []

    def attempt(call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except (
            ConsumerNotFound,
            InvalidRecord,
            LeaseHeld,
            LeaseLost,
            LifecycleConflict,
            NotOperationOwner,
            SessionNotFound,
        ) as error:
            refused.append(type(error).__name__)

    checkpointing = SessionState.CHECKPOINTING
    services.sessions.save(record("s1", workspace_id="w1"))
    services.sessions.save(record("s2", last_error="pull failed"))
    services.sessions.save(record("s2", last_error="pull failed"))
    services.sessions.save(record("s3", state=SessionState.CLOSING))
    services.sessions.save(record("s4", last_error="doomed"))
    attempt(services.sessions.save_lifecycle, record("ghost", last_error="x"))
    services.faults.record_startup_fault("s1", "boot failed")
    services.faults.record_startup_fault("ghost", "boot failed")
    services.activity.record(
        [("s1", activity("a")), ("ghost", activity("a")), ("s1", activity("a"))], 10
    )
    services.activity.record(
        [("s1", activity("b")), ("s2", activity("a")), ("s4", activity("a"))], 11
    )
    services.checkpoints.begin(record("s1", state=checkpointing, workspace_id="w1"), "op-1")
    attempt(services.checkpoints.begin, record("s1", state=checkpointing), "op-2")
    attempt(services.checkpoints.begin, record("s3", state=checkpointing), "op-3")
    services.checkpoints.correlate_barrier("s1", "op-1", "barrier-1")
    services.checkpoints.correlate_barrier("s1", "op-9", "barrier-2")
    attempt(services.checkpoints.save_requested, record("s1", checkpoint=METADATA), "op-9")
    services.checkpoints.save_requested(
        record("s1", workspace_id="w1", checkpoint=METADATA, native_session_id="n1"), "op-1"
    )
    services.checkpoints.begin(record("s2", state=checkpointing, last_error="disk"), "op-4")
    services.checkpoints.finish_failed(
        record("s2", last_error="disk"), "op-4", deferred=True, message="later"
    )
    services.checkpoints.begin(record("s2", state=checkpointing), "op-5")
    services.checkpoints.finish_failed(
        record("s2", last_error="full"), "op-5", deferred=False, message="no space"
    )
    services.checkpoints.begin(record("s2", state=checkpointing), "op-6")
    services.sessions.save_lifecycle(record("s3", state=checkpointing))
    services.checkpoints.recover_interrupted(datetime(2026, 9, 27, 12, tzinfo=UTC))
    services.sessions.delete("s4")
    services.consumers.register("all")
    services.consumers.register("faults", filter=ApiEventFilter(types=["session_fault"]), start=2)
    services.consumers.ack("all", 4)
    services.consumers.ack("all", 3)
    attempt(services.consumers.ack, "all", 99)
    attempt(services.consumers.ack, "ghost", 1)
    attempt(services.consumers.register, "faults")
    services.consumers.reset("faults", to="now")
    DATABASE_CLOCK.pinned_ms = CLOCK_MS  # leases: the database's clock, pinned
    lease = services.consumers.acquire("all", "replica-a", ttl_s=30)
    attempt(services.consumers.acquire, "all", "replica-b", ttl_s=30)
    attempt(services.consumers.ack, "all", 5)
    services.consumers.ack("all", 5, lease=lease)
    DATABASE_CLOCK.pinned_ms += 30_000
    taken = services.consumers.acquire("all", "replica-b", ttl_s=30)
    attempt(lease.renew)
    attempt(services.consumers.ack, "all", 6, lease=lease)
    services.consumers.ack("all", 6, lease=taken)
    attempt(services.consumers.acquire, "ghost", "replica-a", ttl_s=30)
    lease = services.consumers.acquire("faults", "replica-a", ttl_s=30)
    lease.release()
    services.consumers.ack("faults", 6)
    return refused


CLOCK_MS = 1_800_000_000_000


@pytest.fixture(autouse=True)
def unpinned() -> Iterator[None]:
    """The scenario pins the database's clock; the next test has it back."""
    try:
        yield
    finally:
        DATABASE_CLOCK.pinned_ms = None


def outcome(services: Services) -> tuple[Any, ...]:
    page = services.events.load(after_seq=0, limit=1000)
    sessions = services.sessions.list()
    return (
        [(event.seq, event.session_id, event.event) for event in page.events],
        page.latest_seq,
        sessions,
        [services.activity.get(session.id) for session in sessions],
        [services.checkpoints.get(session.id) for session in sessions],
        services.sessions.list(workspace_id="w1"),
        [
            status.model_dump(exclude={"lag_seconds", "registered_at_ms", "last_ack_at_ms"})
            for status in services.consumers.list()
        ],
    )


def test_a_scenario_leaves_the_same_state_in_the_fakes_and_the_database(store: Store) -> None:
    fake = FakeServices()
    refused = scenario(store)
    assert refused == [
        "SessionNotFound",
        "LifecycleConflict",
        "LifecycleConflict",
        "NotOperationOwner",
        "InvalidRecord",
        "ConsumerNotFound",
        "InvalidRecord",
        "LeaseHeld",
        "LeaseLost",
        "LeaseLost",
        "LeaseLost",
        "ConsumerNotFound",
    ]
    assert scenario(fake) == refused
    expected = outcome(store)
    assert len(expected[0]) == 11
    assert outcome(fake) == expected


def page_rows(services: Services, after_seq: int) -> tuple[Any, ...]:
    # Not `recorded_at_ms`: the services stamp some events with the clock (`now_ms`).
    page = services.events.load(after_seq=after_seq, limit=4)
    events = [(event.seq, event.session_id, event.event) for event in page.events]
    return events, page.next_after_seq, page.latest_seq


@pytest.mark.parametrize(("after_seq", "count"), [(0, 4), (11, 2), (50, 0)])
def test_pages_agree(store: Store, after_seq: int, count: int) -> None:
    fake = FakeServices()
    scenario(store)
    scenario(fake)
    expected = page_rows(store, after_seq)
    assert len(expected[0]) == count
    assert page_rows(fake, after_seq) == expected


def index_scenario(index: ProjectIndex, directory: Path) -> list[Any]:
    """Inserts, a rebuild and searches; what each search found, as a set (the databases rank
    their hits and the fake does not)."""
    rows = [
        IndexRow(
            "s1", 1, "2026-11-29T12:00:00Z", "user_msg", "t1", None, "The quick brown fox", "{}"
        ),
        IndexRow("s1", 2, "2026-11-29T12:00:01Z", "assistant_msg", "t1", None, "brown bread", "{}"),
        IndexRow("s2", 1, "2026-11-29T12:00:02Z", "system_msg", None, None, "Fox and hound", "{}"),
        IndexRow("s2", 2, "2026-11-29T12:00:03Z", "watch_warn", None, None, None, "{}"),
    ]
    index.insert(rows)
    index.insert([rows[0]])  # already indexed: left as it is
    message = Message.from_text("t1", MessageRole.USER, "rebuilt from the file")
    line = JournalEnvelope(
        seq=7, ts=datetime(2026, 11, 29, tzinfo=UTC), event=UserMsg(turn_id="t1", message=message)
    )
    (directory / "events.jsonl").write_text(line.model_dump_json() + "\n")
    found: list[Any] = [index.rebuild(directory, "s2")]
    for query, arguments in [
        ("fox", {}),
        ("BROWN", {}),
        ('"quick brown" fox', {}),
        ('"brown quick"', {}),
        ("brown", {"session_id": "s1"}),
        ("hound", {}),
        ("rebuilt file", {}),
        ("brown", {"limit": 1}),
    ]:
        hits = index.search(query, **arguments)
        found.append(sorted((hit.session_id, hit.seq, hit.kind, hit.ts) for hit in hits))
    return found


def test_the_index_agrees(store: Store, tmp_path: Path) -> None:
    expected = index_scenario(store.index, tmp_path)
    assert expected[0] == 1 and expected[1] == [("s1", 1, "user_msg", "2026-11-29T12:00:00Z")]
    assert len(expected[-1]) == 1
    fake = index_scenario(FakeServices().index, tmp_path)
    assert fake[:-1] == expected[:-1]
    assert len(fake[-1]) == 1  # which of the two a limit of 1 keeps is the ranking's
