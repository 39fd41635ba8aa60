"""The services' rules against an in-memory store (`tests.fakes`): each scenario and the exact
events it produces, without a database. The integration tests run the same services on SQLite
and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from session_journal import (
    ActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    CheckpointMetadata,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    InvalidRecord,
    LifecycleConflict,
    NotOperationOwner,
    OutcomeReason,
    SessionFault,
    SessionNotFound,
    SessionRecord,
    SessionState,
)
from session_journal.journal import JournalEnvelope, Message, MessageRole, UserMsg
from session_journal.journal.search import IndexRow
from session_journal.records import CheckpointOperation
from tests.fakes import FakeServices

METADATA = CheckpointMetadata(
    archive_path="/archives/session-1.tar",
    sha256="a" * 64,
    created_at="2026-11-29T10:00:00Z",
    event_frontier=7,
)


@pytest.fixture
def services() -> FakeServices:
    return FakeServices()


def session(session_id: str = "session-1", **fields: Any) -> SessionRecord:
    return SessionRecord(
        id=session_id, project_id="project-1", **({"state": SessionState.RUNNING} | fields)
    )


def lifecycle_fault(message: str) -> SessionFault:
    return SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message=message)


def checkpoint_ended(
    command_id: str,
    outcome: CommandResultKind,
    reason: OutcomeReason | None = None,
    message: str | None = None,
    related: list[str] | None = None,
) -> CommandEnded:
    return CommandEnded(
        result=CommandResult(
            owner=CommandOwner.DAEMON,
            command_id=command_id,
            command_kind="checkpoint",
            outcome=outcome,
            reason=reason,
            message=message,
            related_command_ids=tuple(related or ()),
        )
    )


def checkpointing(services: FakeServices, owner: str = "owner", **fields: Any) -> None:
    """session-1 saved, then in a checkpoint owned by `owner`."""
    services.sessions.save(session(**fields))
    services.checkpoints.begin(session(state=SessionState.CHECKPOINTING, **fields), owner)


# --- sessions ------------------------------------------------------------------------------------


def test_a_lifecycle_fault_is_appended_only_when_last_error_changes(
    services: FakeServices,
) -> None:
    services.sessions.save(session())
    services.sessions.save(session(last_error="image pull failed"))
    services.sessions.save(session(last_error="image pull failed"))  # unchanged: nothing
    services.sessions.save_lifecycle(session(state=SessionState.ERROR, last_error="disk full"))
    services.sessions.save_lifecycle(session(state=SessionState.ERROR, last_error="disk full"))
    services.sessions.save(session())  # cleared: nothing
    services.sessions.save(session(last_error="disk full"))  # new again after clearing
    assert services.fake.events() == [
        ("session-1", lifecycle_fault("image pull failed")),
        ("session-1", lifecycle_fault("disk full")),
        ("session-1", lifecycle_fault("disk full")),
    ]
    assert [event.seq for event in services.fake.state.events] == [1, 2, 3]


def test_a_new_session_saved_with_an_error_appends_its_fault(services: FakeServices) -> None:
    services.sessions.save(session(last_error="boom"))
    assert services.fake.events() == [("session-1", lifecycle_fault("boom"))]
    assert services.sessions.get("session-1") == session(last_error="boom")


def test_save_lifecycle_of_a_missing_session_writes_nothing(services: FakeServices) -> None:
    with pytest.raises(SessionNotFound, match="'session-1'"):
        services.sessions.save_lifecycle(session(last_error="boom"))
    assert services.fake.events() == []
    assert services.sessions.get("session-1") is None


def test_save_lifecycle_changes_only_the_lifecycle_fields(services: FakeServices) -> None:
    services.sessions.save(session(native_session_id="native-1", checkpoint=METADATA))
    services.sessions.save_lifecycle(
        SessionRecord(
            id="session-1",
            project_id="another-project",
            state=SessionState.CLOSING,
            last_checkpoint_error="late",
        )
    )
    assert services.sessions.get("session-1") == session(
        state=SessionState.CLOSING,
        native_session_id="native-1",
        checkpoint=METADATA,
        last_checkpoint_error="late",
    )
    assert services.fake.events() == []


def test_delete_takes_what_belongs_to_the_session_and_keeps_the_frontier(
    services: FakeServices,
) -> None:
    services.sessions.save(session(last_error="boom"))
    services.sessions.save(session("session-2"))
    assert services.sessions.delete("session-1") is True
    assert services.sessions.delete("session-1") is False
    assert services.fake.events() == []
    assert services.events.latest_seq() == 1
    assert [record.id for record in services.sessions.list()] == ["session-2"]


def test_lists_filter_by_workspace_and_project(services: FakeServices) -> None:
    services.sessions.save(session("b", workspace_id="w1"))
    services.sessions.save(session("a", workspace_id="w1"))
    services.sessions.save(session("c", workspace_id="w2"))
    assert [record.id for record in services.sessions.list(workspace_id="w1")] == ["a", "b"]
    assert services.sessions.list(project_id="other") == []


# --- faults --------------------------------------------------------------------------------------


def test_a_startup_fault_is_appended_to_an_existing_session(services: FakeServices) -> None:
    services.sessions.save(session())
    assert services.faults.record_startup_fault("session-1", "image pull failed") is True
    assert services.fake.events() == [
        (
            "session-1",
            SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="image pull failed"),
        )
    ]


def test_a_startup_fault_of_an_unknown_session_writes_nothing(services: FakeServices) -> None:
    assert services.faults.record_startup_fault("ghost", "boom") is False
    assert services.fake.events() == []
    assert services.events.latest_seq() == 0


def test_bad_arguments_are_refused_before_any_write(services: FakeServices) -> None:
    with pytest.raises(InvalidRecord, match="session_id: invalid id"):
        services.faults.record_startup_fault("../x", "boom")
    with pytest.raises(InvalidRecord, match="message must be a string, got int"):
        services.faults.record_startup_fault("session-1", 5)  # type: ignore[arg-type]
    assert services.fake.actions == []


# --- activity ------------------------------------------------------------------------------------


def activity(state: str = "running", idle_since_ms: int = 100) -> ApiActivityState:
    return ApiActivityState(
        state=state,
        details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=idle_since_ms),
        is_idle=True,
        waiting_for_input=False,
        capacity_retry=False,
    )


def test_activity_appends_only_changes_of_known_sessions(services: FakeServices) -> None:
    services.sessions.save(session())
    services.sessions.save(session("session-2"))
    appended = services.activity.record(
        [
            ("session-1", activity()),
            ("ghost", activity()),  # unknown: skipped, never created
            ("session-2", activity("busy")),
            ("session-1", activity()),  # equal to what the batch just stored
            ("session-1", activity(idle_since_ms=200)),
        ],
        42,
    )
    assert appended == 3
    assert services.fake.events() == [
        ("session-1", ActivityChanged(activity=activity())),
        ("session-2", ActivityChanged(activity=activity("busy"))),
        ("session-1", ActivityChanged(activity=activity(idle_since_ms=200))),
    ]
    assert {event.recorded_at_ms for event in services.fake.state.events} == {42}
    assert services.activity.get("session-1") == activity(idle_since_ms=200)
    assert services.activity.get("ghost") is None


def test_a_stored_snapshot_is_compared_in_canonical_json(services: FakeServices) -> None:
    services.sessions.save(session())
    # Stored with other key order and spacing (an older writer): still the same snapshot.
    services.fake.state.activity["session-1"] = activity().model_dump_json(indent=2)
    assert services.activity.record([("session-1", activity())], 1) == 0
    assert services.fake.events() == []


def test_an_undecodable_snapshot_reads_as_none_and_is_replaced(services: FakeServices) -> None:
    services.sessions.save(session())
    services.fake.state.activity["session-1"] = '{"state": 1}'
    assert services.activity.get("session-1") is None
    assert services.activity.record([("session-1", activity())], 1) == 1
    assert services.fake.events() == [("session-1", ActivityChanged(activity=activity()))]


def test_an_empty_batch_submits_nothing(services: FakeServices) -> None:
    assert services.activity.record(iter([]), 1) == 0
    assert services.fake.actions == []


# --- checkpoints: begin --------------------------------------------------------------------------


def test_begin_opens_the_operation_and_saves_the_lifecycle(services: FakeServices) -> None:
    services.sessions.save(session())
    services.checkpoints.begin(session(state=SessionState.CHECKPOINTING), "owner")
    assert services.checkpoints.get("session-1") == CheckpointOperation(
        session_id="session-1", command_id="owner"
    )
    stored = services.sessions.get("session-1")
    assert stored is not None and stored.state is SessionState.CHECKPOINTING
    assert services.fake.events() == []


def test_begin_needs_a_checkpointing_record(services: FakeServices) -> None:
    services.sessions.save(session())
    with pytest.raises(InvalidRecord, match="begins with the record in state checkpointing"):
        services.checkpoints.begin(session(state=SessionState.RUNNING), "owner")
    assert services.fake.actions == ["save session 'session-1'"]


@pytest.mark.parametrize(
    "busy", [SessionState.CHECKPOINTING, SessionState.CLOSING, SessionState.DESTROYING]
)
def test_begin_conflicts_with_a_lifecycle_operation_in_progress(
    services: FakeServices, busy: SessionState
) -> None:
    services.sessions.save(session(state=busy))
    with pytest.raises(
        LifecycleConflict,
        match=rf"session 'session-1' is already in a lifecycle operation \(state {busy.value}\)$",
    ):
        services.checkpoints.begin(session(state=SessionState.CHECKPOINTING), "owner")
    assert services.checkpoints.get("session-1") is None
    assert services.sessions.get("session-1") == session(state=busy)


def test_begin_conflicts_with_an_open_operation_and_names_it(services: FakeServices) -> None:
    checkpointing(services, "first")
    # The stored state went back to running, but the operation is still open.
    services.fake.state.sessions["session-1"] = session()
    with pytest.raises(LifecycleConflict, match="checkpoint operation 'first' open"):
        services.checkpoints.begin(session(state=SessionState.CHECKPOINTING), "second")
    assert services.checkpoints.get("session-1") == CheckpointOperation(
        session_id="session-1", command_id="first"
    )


def test_begin_on_a_missing_session(services: FakeServices) -> None:
    with pytest.raises(SessionNotFound, match="'session-1'"):
        services.checkpoints.begin(session(state=SessionState.CHECKPOINTING), "owner")
    assert services.fake.state.operations == {}


def test_begin_appends_the_fault_of_a_new_last_error(services: FakeServices) -> None:
    services.sessions.save(session())
    services.checkpoints.begin(
        session(state=SessionState.CHECKPOINTING, last_error="flaky disk"), "owner"
    )
    assert services.fake.events() == [("session-1", lifecycle_fault("flaky disk"))]


# --- checkpoints: barriers and owners ------------------------------------------------------------


def test_barriers_are_correlated_once_and_only_with_the_open_operation(
    services: FakeServices,
) -> None:
    checkpointing(services)
    assert services.checkpoints.correlate_barrier("session-1", "owner", "barrier-1") is True
    assert services.checkpoints.correlate_barrier("session-1", "owner", "barrier-1") is True
    assert services.checkpoints.correlate_barrier("session-1", "stale", "barrier-2") is False
    assert services.checkpoints.correlate_barrier("ghost", "owner", "barrier-3") is False
    assert services.checkpoints.get("session-1") == CheckpointOperation(
        session_id="session-1", command_id="owner", related_command_ids=["barrier-1"]
    )


def test_the_owner_saves_a_requested_checkpoint(services: FakeServices) -> None:
    checkpointing(services)
    services.checkpoints.correlate_barrier("session-1", "owner", "barrier-1")
    services.checkpoints.save_requested(
        session(native_session_id="native-1", checkpoint=METADATA), "owner"
    )
    assert services.fake.events() == [
        (
            "session-1",
            checkpoint_ended("owner", CommandResultKind.SUCCEEDED, related=["barrier-1"]),
        )
    ]
    assert services.sessions.get("session-1") == session(
        native_session_id="native-1", checkpoint=METADATA
    )
    assert services.checkpoints.get("session-1") is None


def test_only_the_owner_saves_a_checkpoint(services: FakeServices) -> None:
    checkpointing(services)
    with pytest.raises(
        NotOperationOwner, match="checkpoint operation 'stale' no longer owns session 'session-1'"
    ):
        services.checkpoints.save_requested(session(checkpoint=METADATA), "stale")
    assert services.fake.events() == []
    stored = services.sessions.get("session-1")
    assert stored is not None and stored.checkpoint is None
    assert services.checkpoints.get("session-1") is not None


def test_a_saved_checkpoint_needs_metadata(services: FakeServices) -> None:
    checkpointing(services)
    actions = list(services.fake.actions)
    with pytest.raises(InvalidRecord, match="successful checkpoint has no archive metadata"):
        services.checkpoints.save_requested(session(), "owner")
    assert services.fake.actions == actions


@pytest.mark.parametrize(
    ("deferred", "outcome", "reason"),
    [
        (True, CommandResultKind.REJECTED, OutcomeReason.CHECKPOINT_DEFERRED),
        (False, CommandResultKind.FAILED, OutcomeReason.CHECKPOINT_FAILED),
    ],
)
def test_a_failed_checkpoint_is_deferred_or_failed_and_keeps_the_metadata(
    services: FakeServices,
    deferred: bool,
    outcome: CommandResultKind,
    reason: OutcomeReason,
) -> None:
    checkpointing(services, checkpoint=METADATA)
    other = METADATA.model_copy(update={"event_frontier": 99})
    finished = services.checkpoints.finish_failed(
        session(last_error="archive failed", checkpoint=other),
        "owner",
        deferred=deferred,
        message="no space",
    )
    assert finished is True
    assert services.fake.events() == [
        ("session-1", lifecycle_fault("archive failed")),
        ("session-1", checkpoint_ended("owner", outcome, reason, "no space")),
    ]
    assert services.sessions.get("session-1") == session(
        last_error="archive failed", checkpoint=METADATA
    )
    assert services.checkpoints.get("session-1") is None


def test_finish_failed_by_another_or_twice_writes_nothing(services: FakeServices) -> None:
    checkpointing(services)
    assert not services.checkpoints.finish_failed(
        session(last_error="x"), "stale", deferred=False, message="m"
    )
    assert services.checkpoints.finish_failed(session(), "owner", deferred=True, message="m")
    events = services.fake.events()
    assert not services.checkpoints.finish_failed(
        session(last_error="x"), "owner", deferred=True, message="m"
    )
    assert not services.checkpoints.finish_failed(
        session("ghost"), "owner", deferred=True, message="m"
    )
    assert services.fake.events() == events
    assert events == [
        (
            "session-1",
            checkpoint_ended(
                "owner", CommandResultKind.REJECTED, OutcomeReason.CHECKPOINT_DEFERRED, "m"
            ),
        )
    ]


# --- checkpoints: recovery -----------------------------------------------------------------------


def test_recovery_cancels_open_operations_and_restores_running(services: FakeServices) -> None:
    checkpointing(services, checkpoint=METADATA)
    services.sessions.save(session("session-2", state=SessionState.CHECKPOINTING))  # no operation
    services.sessions.save(session("session-3", last_error="old"))  # not interrupted
    before = services.fake.events()
    moment = datetime(2026, 9, 27, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert services.checkpoints.recover_interrupted(moment) == 2
    note = "checkpoint interrupted by controller restart at 2026-09-27T12:00:00Z"
    assert services.fake.events() == [
        *before,
        (
            "session-1",
            checkpoint_ended(
                "owner", CommandResultKind.CANCELLED, OutcomeReason.CONTROLLER_RESTARTED, note
            ),
        ),
    ]
    assert services.sessions.get("session-1") == session(
        checkpoint=METADATA, last_checkpoint_error=note
    )
    assert services.sessions.get("session-2") == session("session-2", last_checkpoint_error=note)
    assert services.checkpoints.get("session-1") is None
    events = services.fake.events()
    assert services.checkpoints.recover_interrupted(moment) == 0
    assert services.fake.events() == events


def test_recovery_takes_a_timestamp_as_text_or_an_aware_datetime(services: FakeServices) -> None:
    services.sessions.save(session(state=SessionState.CHECKPOINTING))
    assert services.checkpoints.recover_interrupted("at boot") == 1
    stored = services.sessions.get("session-1")
    assert stored is not None
    assert stored.last_checkpoint_error == "checkpoint interrupted by controller restart at at boot"
    with pytest.raises(InvalidRecord, match=r"now must be timezone-aware"):
        services.checkpoints.recover_interrupted(datetime(2026, 9, 27))
    with pytest.raises(InvalidRecord, match=r"now must be a datetime or a string, got int"):
        services.checkpoints.recover_interrupted(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match=r"now: contains a NUL character"):
        services.checkpoints.recover_interrupted("a\x00")
    assert services.checkpoints.recover_interrupted(datetime(2026, 1, 1, tzinfo=UTC)) == 0


def test_removing_ended_sessions_leaves_the_directories_to_the_commit(
    services: FakeServices, tmp_path: Path
) -> None:
    services.sessions.save(session("s-ended", state=SessionState.CLOSED))
    services.sessions.save(session("s-running"))
    for session_id in ("s-ended", "s-running", "s-gone"):  # s-gone: its rows went earlier
        (tmp_path / session_id).mkdir()
    with pytest.raises(LifecycleConflict, match="s-running"):
        services.sessions.remove_ended(["s-ended", "s-gone", "s-running"], sessions_dir=tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s-ended", "s-gone", "s-running"]
    removed = services.sessions.remove_ended(["s-ended", "s-gone"], sessions_dir=tmp_path)
    assert removed == ["s-ended"]  # what left the database; s-gone's directory goes too
    assert [path.name for path in tmp_path.iterdir()] == ["s-running"]
    assert services.sessions.get("s-ended") is None


# -- the project index -------------------------------------------------------------------------


def index_row(session_id: str, seq: int, text: str | None) -> IndexRow:
    return IndexRow(session_id, seq, "2026-11-29T12:00:00Z", "user_msg", None, None, text, "{}")


def hits(services: FakeServices, query: str, **arguments: Any) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.seq) for hit in services.index.search(query, **arguments)]


class BytesPath:
    """A path object whose path is bytes: not a path `rebuild` can read."""

    def __fspath__(self) -> bytes:
        return b"/tmp"


def test_the_index_keeps_the_first_row_of_an_event_and_finds_phrases(
    services: FakeServices,
) -> None:
    services.index.insert([index_row("s1", 1, "The quick brown fox"), index_row("s2", 1, "fox")])
    services.index.insert(
        row for row in [index_row("s1", 1, "replaced?"), index_row("s1", 2, "brown the")]
    )
    assert hits(services, "fox") == [("s1", 1), ("s2", 1)]
    assert hits(services, '"quick brown" FOX') == [("s1", 1)]
    assert hits(services, '"brown quick"') == []
    assert hits(services, "brown", session_id="s1", limit=1) == [("s1", 1)]
    assert hits(services, "...") == []  # no searchable word: nothing is read
    assert services.fake.actions == ["index journal events"] * 2


def test_the_index_checks_its_arguments_before_anything_runs(services: FakeServices) -> None:
    for limit in [0, -1, True, 1.5, "5", None]:
        with pytest.raises(InvalidRecord, match="limit must be a positive integer"):
            services.index.search("fox", limit=limit)  # type: ignore[arg-type]
    for session_id in ["", "../s", "s" * 129, 5]:
        with pytest.raises(InvalidRecord, match="session_id"):
            services.index.search("fox", session_id=session_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="query must be a string, got int"):
        services.index.search(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="rows"):
        services.index.insert([("s1", 1)])  # type: ignore[list-item]
    with pytest.raises(InvalidRecord, match="rows"):
        services.index.insert(None)  # type: ignore[arg-type]
    for path, given in [(None, "NoneType"), ("", "an empty path"), (BytesPath(), "BytesPath")]:
        with pytest.raises(InvalidRecord, match=f"session_dir must be the path.*got {given}"):
            services.index.rebuild(path, "s1")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="session_id"):
        services.index.rebuild(".", "../s1")
    assert services.fake.actions == []
    assert services.fake.state.index == {}


def test_a_rebuild_replaces_the_sessions_rows_with_its_files(
    services: FakeServices, tmp_path: Path
) -> None:
    services.index.insert([index_row("s1", 9, "stale words"), index_row("s2", 1, "kept words")])
    (tmp_path / "s1").mkdir()
    message = Message.from_text("t1", MessageRole.USER, "hello index")
    line = JournalEnvelope(
        seq=1, ts=datetime(2026, 11, 29, tzinfo=UTC), event=UserMsg(turn_id="t1", message=message)
    )
    (tmp_path / "s1" / "events.jsonl").write_text(line.model_dump_json() + "\n")
    assert services.index.rebuild(tmp_path / "s1", "s1") == 1
    assert hits(services, "words") == [("s2", 1)]
    assert hits(services, "hello") == [("s1", 1)]
    with pytest.raises(InvalidRecord, match="cannot read the events of 's3'"):
        services.index.rebuild(tmp_path / "s3", "s3")


def test_a_sessions_dir_that_is_not_a_path_of_text_is_refused(services: FakeServices) -> None:
    services.sessions.save(session("s-ended", state=SessionState.CLOSED))
    for path, given in [(5, "int"), ("", "an empty path"), (BytesPath(), "BytesPath")]:
        with pytest.raises(InvalidRecord, match=f"sessions_dir must be a path.*got {given}"):
            services.sessions.remove_ended(["s-ended"], sessions_dir=path)  # type: ignore[arg-type]
    assert services.sessions.get("s-ended") is not None
