"""The ordered log: cursors, filters, the frontier, activity and faults (seed scenarios)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import (
    ActivityChanged,
    ApiActivityKind,
    ApiEventFilter,
    InvalidRecord,
    LegacyNotice,
    OutcomeReason,
    SessionFault,
    SessionNotFound,
    SessionState,
    StorageError,
    Store,
)
from tests.factories import (
    ActivityFactory,
    CheckpointMetadataFactory,
    SessionFactory,
    SessionFaultFactory,
)
from tests.helpers import all_events, append_raw, bodies, store_raw_body

pytestmark = pytest.mark.both_apis


LAUNCH_FAILURE = "worker bootstrap failed: Connection closed by host"


def two_events(store: Store, session_id: str = "session-1") -> None:
    store.activity.record([(session_id, ActivityFactory())], 100)
    store.faults.record_startup_fault(session_id, "image pull failed")


def test_filters_and_cursors_survive_deleting_a_session(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    two_events(store)

    other = store.events.load(ApiEventFilter(session_id="other"), after_seq=0)
    assert other.events == ()
    assert other.next_after_seq == 2
    elsewhere = store.events.load(ApiEventFilter(workspace_id="elsewhere"), after_seq=0)
    assert (elsewhere.events, elsewhere.next_after_seq) == ((), 2)
    in_default = store.events.load(ApiEventFilter(workspace_id="default"), after_seq=0)
    assert [event.seq for event in in_default.events] == [1, 2]
    both = ApiEventFilter(session_id="session-1", workspace_id="default")
    assert [event.seq for event in store.events.load(both, after_seq=1).events] == [2]

    assert store.sessions.delete("session-1") is True
    deleted = store.events.load(after_seq=2)
    assert deleted.events == ()
    assert deleted.latest_seq == 2
    from_start = store.events.load(after_seq=0)
    assert (from_start.events, from_start.next_after_seq, from_start.latest_seq) == ((), 2, 2)
    assert store.events.latest_seq() == 2
    assert store.sessions.delete("session-1") is False


def test_a_cursor_past_the_frontier_never_moves_back(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    two_events(store)
    page = store.events.load(after_seq=50)
    assert (page.events, page.next_after_seq, page.latest_seq) == ((), 50, 2)


def test_after_seq_none_tails_from_the_frontier(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    two_events(store)
    tail = store.events.load()
    assert (tail.events, tail.next_after_seq, tail.latest_seq) == ((), 2, 2)

    store.faults.record_startup_fault("session-1", "again")
    page = store.events.load(after_seq=tail.next_after_seq)
    assert [(event.seq, event.event) for event in page.events] == [
        (3, SessionFaultFactory(message="again"))
    ]
    assert page.next_after_seq == 3


def test_limit_is_clamped_to_1_through_1000(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    append_raw(
        store, "session-1", SessionFaultFactory(message="bulk").model_dump_json(), count=1005
    )

    assert [event.seq for event in store.events.load(after_seq=0, limit=0).events] == [1]
    assert [event.seq for event in store.events.load(after_seq=0, limit=-5).events] == [1]
    assert len(store.events.load(after_seq=0, limit=3).events) == 3
    page = store.events.load(after_seq=0, limit=5000)
    assert [event.seq for event in page.events] == list(range(1, 1001))
    assert page.next_after_seq == 1000
    assert [event.seq for event in store.events.load(after_seq=1000).events] == list(
        range(1001, 1006)
    )


def test_activity_changes_without_repeating_or_reviving_forgotten_sessions(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    idle = ActivityFactory(details__kind=ApiActivityKind.IDLE, details__idle_since_ms=100)
    assert store.activity.record([("session-1", idle)], 100) == 1
    assert store.activity.record([("session-1", idle)], 200) == 0
    assert idle.details is not None
    details = dataclasses.replace(
        idle.details,
        kind=ApiActivityKind.BACKGROUND,
        idle_since_ms=None,
        background_started_at_ms=250,
    )
    background = dataclasses.replace(idle, is_idle=False, details=details)
    assert store.activity.record([("session-1", background)], 250) == 1
    waiting = dataclasses.replace(background, waiting_for_input=True)
    assert store.activity.record([("session-1", waiting)], 300) == 1
    unknown = ActivityFactory(state="disconnected", details=None, is_idle=False)
    assert store.activity.record([("session-1", unknown)], 400) == 1

    page = store.events.load(after_seq=0)
    assert [event.event for event in page.events] == [
        ActivityChanged(activity=idle),
        ActivityChanged(activity=background),
        ActivityChanged(activity=waiting),
        ActivityChanged(activity=unknown),
    ]
    assert [event.recorded_at_ms for event in page.events] == [100, 250, 300, 400]
    assert store.activity.get("session-1") == unknown

    store.sessions.delete("session-1")
    assert store.activity.record([("session-1", idle)], 500) == 0
    after = store.events.load(after_seq=4)
    assert (after.events, after.latest_seq) == ((), 4)
    assert store.activity.get("session-1") is None
    assert store.sessions.get("session-1") is None


def test_one_activity_batch_is_one_transaction_in_order(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.sessions.save(SessionFactory(id="session-2"))
    idle, busy = ActivityFactory(), ActivityFactory(is_idle=False, state="busy")
    appended = store.activity.record(
        [
            ("session-1", idle),
            ("ghost", idle),
            ("session-2", busy),
            ("session-1", idle),
            ("session-1", busy),
        ],
        100,
    )
    assert appended == 3
    assert [(event.session_id, event.event) for event in all_events(store)] == [
        ("session-1", ActivityChanged(activity=idle)),
        ("session-2", ActivityChanged(activity=busy)),
        ("session-1", ActivityChanged(activity=busy)),
    ]


def test_startup_fault_is_recorded_only_for_existing_sessions(store: Store) -> None:
    assert store.faults.record_startup_fault("session-1", "image pull failed") is False
    assert store.events.latest_seq() == 0

    store.sessions.save(SessionFactory(id="session-1"))
    assert store.faults.record_startup_fault("session-1", "image pull failed") is True
    assert bodies(store) == [
        SessionFault(
            reason=OutcomeReason.STARTUP_FAILED, message="image pull failed", command_id=None
        )
    ]
    stored = all_events(store)[0].model_dump(mode="json")["event"]
    assert stored == {
        "type": "session_fault",
        "data": {"reason": "startup_failed", "message": "image pull failed", "command_id": None},
    }


def test_a_lifecycle_save_that_records_a_launch_failure_emits_one_error_event(
    store: Store,
) -> None:
    record = SessionFactory(id="session-1")
    store.sessions.save(record)
    record.state = SessionState.ERROR
    record.last_error = LAUNCH_FAILURE
    store.sessions.save_lifecycle(record)
    store.sessions.save_lifecycle(record)  # unchanged: no second event
    store.sessions.save(record)  # a full save with the same error: no event either

    assert bodies(store) == [
        SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message=LAUNCH_FAILURE)
    ]
    assert store.sessions.get("session-1") == record

    record.last_error = None
    store.sessions.save_lifecycle(record)  # clearing the error appends nothing
    record.last_error = "out of memory"
    store.sessions.save_lifecycle(record)
    assert [body.message for body in bodies(store) if isinstance(body, SessionFault)] == [
        LAUNCH_FAILURE,
        "out of memory",
    ]


def test_saving_a_new_session_with_an_error_emits_its_fault(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1", last_error="boom"))
    assert bodies(store) == [SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message="boom")]


def test_save_lifecycle_of_an_unknown_session_writes_nothing(store: Store) -> None:
    with pytest.raises(SessionNotFound, match="'ghost'"):
        store.sessions.save_lifecycle(SessionFactory(id="ghost", last_error="boom"))
    assert store.events.latest_seq() == 0
    assert store.sessions.get("ghost") is None


def test_save_upserts_in_place_and_keeps_the_sessions_events(store: Store) -> None:
    record = SessionFactory(id="session-1")
    store.sessions.save(record)
    two_events(store)
    checkpoint = CheckpointMetadataFactory(
        archive_path="/archives/session-1/1.tar.zst",
        created_at="2026-11-29T10:00:00Z",
        event_frontier=2,
    )
    updated = record.model_copy(
        update={
            "workspace_id": "team-b",
            "native_session_id": "native-7",
            "checkpoint": checkpoint,
            "state": SessionState.CHECKPOINTING,
        }
    )
    store.sessions.save(updated)

    assert store.sessions.get("session-1") == updated
    assert [event.seq for event in all_events(store)] == [1, 2]
    assert store.activity.get("session-1") == ActivityFactory()
    assert len(all_events(store, ApiEventFilter(workspace_id="team-b"))) == 2

    store.sessions.save(updated.model_copy(update={"checkpoint": None}))
    stored = store.sessions.get("session-1")
    assert stored is not None and stored.checkpoint is None


def test_list_filters_by_workspace_and_project(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a", workspace_id="w1", project_id="p1"))
    store.sessions.save(SessionFactory(id="b", workspace_id="w1", project_id="p2"))
    store.sessions.save(SessionFactory(id="c", workspace_id="w2", project_id="p1"))
    assert [s.id for s in store.sessions.list()] == ["a", "b", "c"]
    assert [s.id for s in store.sessions.list(workspace_id="w1")] == ["a", "b"]
    assert [s.id for s in store.sessions.list(project_id="p1")] == ["a", "c"]
    assert [s.id for s in store.sessions.list(workspace_id="w1", project_id="p1")] == ["a"]
    assert store.sessions.list(workspace_id="nowhere") == []


def test_deleting_a_session_removes_its_events_but_not_the_frontier(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.sessions.save(SessionFactory(id="session-2"))
    two_events(store, "session-1")
    store.faults.record_startup_fault("session-2", "kept")
    store.sessions.delete("session-1")
    assert [(event.seq, event.session_id) for event in all_events(store)] == [(3, "session-2")]
    assert store.events.latest_seq() == 3
    store.faults.record_startup_fault("session-2", "next")
    assert [event.seq for event in all_events(store)] == [3, 4]


def test_any_unicode_and_nul_round_trip_inside_bodies(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    message = 'nul:\x00 snowman:\u2603 clef:\U0001d11e rtl:\u202e quote:" backslash:\\ \u2028'
    store.faults.record_startup_fault("session-1", message)
    assert bodies(store) == [SessionFaultFactory(message=message)]


def test_an_undecodable_stored_body_is_returned_as_a_legacy_notice(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "before")
    store_raw_body(store, "session-1", '{"type":"mystery","data":{"command_id":"c-1"}}')
    store_raw_body(store, "session-1", '{"type":"session_fault","data":{"message":"no reason"}}')
    store.faults.record_startup_fault("session-1", "after")

    events = bodies(store)
    assert events[0] == SessionFaultFactory(message="before")
    assert events[3] == SessionFaultFactory(message="after")
    mystery, broken = events[1], events[2]
    assert isinstance(mystery, LegacyNotice) and isinstance(broken, LegacyNotice)
    assert (mystery.original_type, mystery.command_id) == ("mystery", "c-1")
    assert (broken.original_type, broken.command_id) == ("session_fault", None)
    assert "reason" in broken.message


def test_a_damaged_frontier_is_a_storage_error_not_an_empty_log(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    two_events(store)
    with store.unit_of_work() as uow:
        uow.connection.execute(sa.text("DELETE FROM event_sequences"))
        uow.commit()
    for read in (
        store.events.latest_seq,
        lambda: store.events.load(after_seq=0),
        lambda: store.events.load(),
    ):
        with pytest.raises(StorageError, match=r"event_sequences (has no|lacks its) 'api_events'"):
            read()


def test_a_deeply_nested_stored_body_does_not_stop_the_feed(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    deep = '{"type":"session_fault","data":{"x":' + "[" * 3000 + "]" * 3000 + "}}"
    store_raw_body(store, "session-1", deep)
    store.faults.record_startup_fault("session-1", "after")
    events = bodies(store)
    assert isinstance(events[0], LegacyNotice)
    assert events[1] == SessionFaultFactory(message="after")


def test_a_body_that_is_not_one_json_value_cannot_frame_other_events(tmp_path: Path) -> None:
    # SQLite only: PostgreSQL's json type refuses such text when it is stored.
    with Store.open(f"sqlite:///{tmp_path / 'journal.db'}", upgrade=True) as store:
        store.sessions.save(SessionFactory(id="session-1"))
        forged = (
            '{"type":"session_fault","data":{"reason":"startup_failed","message":"m"}},'
            '"session_id":"victim","recorded_at_ms":42'
        )
        store_raw_body(store, "session-1", forged)
        [event] = all_events(store)
    assert (event.session_id, event.recorded_at_ms) == ("session-1", 1)
    assert isinstance(event.event, LegacyNotice)


def test_the_unit_of_work_refuses_bodies_that_are_not_api_events(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    with store.unit_of_work() as uow:
        for session_id, body, message in [
            ("session-1", '{"type":"mystery","data":{}}', "not an API event body"),
            ("session-1", "not json", "not an API event body"),
            ("../x", SessionFaultFactory(message="m").model_dump_json(), "invalid id"),
        ]:
            with pytest.raises(InvalidRecord, match=message):
                uow.events.append(session_id, 1, body)
        with pytest.raises(InvalidRecord, match="recorded_at_ms"):
            uow.events.append("session-1", -1, SessionFaultFactory(message="m").model_dump_json())
    assert store.events.latest_seq() == 0
