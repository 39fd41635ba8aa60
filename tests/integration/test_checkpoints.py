"""Checkpoint operations: one per session, finished by its owner, recovered after a restart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from session_journal import (
    CheckpointOperation,
    CommandResultKind,
    InvalidRecord,
    LifecycleConflict,
    NotOperationOwner,
    OutcomeReason,
    SessionFault,
    SessionNotFound,
    SessionRecord,
    SessionState,
    Store,
    UnitOfWork,
)
from tests.factories import CheckpointMetadataFactory, CommandEndedFactory, SessionFactory
from tests.helpers import bodies

pytestmark = pytest.mark.both_apis


def checkpointing(store: Store, record: SessionRecord, owner: str) -> SessionRecord:
    """Save `record` as running, then begin a checkpoint owned by `owner`."""
    store.sessions.save(record.model_copy(update={"state": SessionState.RUNNING}))
    started = record.model_copy(update={"state": SessionState.CHECKPOINTING})
    store.checkpoints.begin(started, owner)
    return started


def test_recovery_consumes_attempt_identity_once_and_preserves_correlation(store: Store) -> None:
    record = SessionFactory(id="session-1", checkpoint=CheckpointMetadataFactory(name="previous"))
    started = checkpointing(store, record, "attempt-1")
    with pytest.raises(LifecycleConflict, match="'session-1'"):
        store.checkpoints.begin(started, "attempt-2")
    assert store.checkpoints.correlate_barrier("session-1", "attempt-1", "barrier-1")
    assert store.checkpoints.correlate_barrier("session-1", "attempt-1", "barrier-1")
    assert not store.checkpoints.correlate_barrier("session-1", "attempt-2", "barrier-2")
    assert not store.checkpoints.correlate_barrier("session-2", "attempt-1", "barrier-2")
    assert store.checkpoints.get("session-1") == CheckpointOperation(
        session_id="session-1", command_id="attempt-1", related_command_ids=["barrier-1"]
    )

    assert store.checkpoints.recover_interrupted("2026-09-27T12:00:00Z") == 1
    assert store.checkpoints.recover_interrupted("2026-09-27T12:00:01Z") == 0

    note = "checkpoint interrupted by controller restart at 2026-09-27T12:00:00Z"
    assert bodies(store) == [
        CommandEndedFactory(
            command_id="attempt-1",
            outcome=CommandResultKind.CANCELLED,
            reason=OutcomeReason.CONTROLLER_RESTARTED,
            message=note,
            related_command_ids=["barrier-1"],
        )
    ]
    recovered = store.sessions.get("session-1")
    assert recovered == record.model_copy(
        update={"state": SessionState.RUNNING, "last_checkpoint_error": note}
    )
    assert store.checkpoints.get("session-1") is None


def test_recovery_also_restores_a_checkpointing_session_without_an_operation(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="session-1", state=SessionState.CHECKPOINTING))
    store.sessions.save(SessionFactory(id="session-2", state=SessionState.RUNNING))
    moment = datetime(2026, 9, 27, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert store.checkpoints.recover_interrupted(moment) == 1
    session = store.sessions.get("session-1")
    assert session is not None and session.state is SessionState.RUNNING
    assert session.last_checkpoint_error == (
        "checkpoint interrupted by controller restart at 2026-09-27T12:00:00Z"
    )
    assert store.events.latest_seq() == 0
    with pytest.raises(InvalidRecord, match="timezone-aware"):
        store.checkpoints.recover_interrupted(datetime(2026, 9, 27))


def test_requested_checkpoint_result_commits_with_metadata_and_only_for_its_owner(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointing(store, SessionFactory(id="session-1"), "owner")
    finished = SessionFactory(
        id="session-1",
        native_session_id="native-9",
        checkpoint=CheckpointMetadataFactory(name="verified"),
    )

    with pytest.raises(NotOperationOwner, match="'stale-owner' no longer owns session 'session-1'"):
        store.checkpoints.save_requested(finished, "stale-owner")
    assert not store.checkpoints.finish_failed(
        finished, "stale-owner", deferred=False, message="late failure"
    )
    assert store.events.latest_seq() == 0

    def commit_then_fail(uow: UnitOfWork) -> None:
        uow.events.flush()
        raise RuntimeError("connection lost before commit")

    monkeypatch.setattr(UnitOfWork, "commit", commit_then_fail)
    with pytest.raises(RuntimeError, match="connection lost"):
        store.checkpoints.save_requested(finished, "owner")
    monkeypatch.undo()
    stored = store.sessions.get("session-1")
    assert stored is not None and stored.checkpoint is None
    assert stored.state is SessionState.CHECKPOINTING
    assert store.events.latest_seq() == 0

    store.checkpoints.save_requested(finished, "owner")
    assert not store.checkpoints.finish_failed(
        finished, "owner", deferred=False, message="late cleanup failure"
    )
    assert bodies(store) == [
        CommandEndedFactory(command_id="owner", outcome=CommandResultKind.SUCCEEDED)
    ]
    assert store.sessions.get("session-1") == finished
    assert store.checkpoints.get("session-1") is None


@pytest.mark.parametrize("deferred", [False, True])
def test_checkpoint_failure_and_deferral_are_distinct_and_preserve_previous_archive(
    store: Store, deferred: bool
) -> None:
    record = SessionFactory(
        id="session-1",
        checkpoint=CheckpointMetadataFactory(name="previous"),
        last_checkpoint_error="old warning",
    )
    checkpointing(store, record, "owner")
    after = record.model_copy(update={"state": SessionState.RUNNING, "checkpoint": None})
    if not deferred:
        after.last_checkpoint_error = "archive verification failed"

    assert store.checkpoints.finish_failed(after, "owner", deferred=deferred, message="diagnostic")
    assert not store.checkpoints.finish_failed(
        after, "owner", deferred=deferred, message="diagnostic"
    )

    loaded = store.sessions.get("session-1")
    assert loaded is not None
    assert loaded.checkpoint == CheckpointMetadataFactory(name="previous")
    assert loaded.state is SessionState.RUNNING
    assert loaded.last_checkpoint_error == (
        "old warning" if deferred else "archive verification failed"
    )
    expected = CommandEndedFactory(
        command_id="owner",
        outcome=CommandResultKind.REJECTED if deferred else CommandResultKind.FAILED,
        reason=(OutcomeReason.CHECKPOINT_DEFERRED if deferred else OutcomeReason.CHECKPOINT_FAILED),
        message="diagnostic",
    )
    assert bodies(store) == [expected]


@pytest.mark.parametrize(
    "state", [SessionState.CHECKPOINTING, SessionState.CLOSING, SessionState.DESTROYING]
)
def test_begin_on_a_busy_session_is_a_lifecycle_conflict(store: Store, state: SessionState) -> None:
    record = SessionFactory(id="session-1", state=state)
    store.sessions.save(record)
    attempt = record.model_copy(update={"state": SessionState.CHECKPOINTING, "last_error": "x"})
    with pytest.raises(LifecycleConflict) as conflict:
        store.checkpoints.begin(attempt, "owner")
    assert str(conflict.value) == (
        f"session 'session-1' is already in a lifecycle operation (state {state.value})"
    )
    assert store.checkpoints.get("session-1") is None
    assert store.sessions.get("session-1") == record
    assert store.events.latest_seq() == 0


def test_begin_saves_the_lifecycle_with_its_fault_transition(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.checkpoints.begin(
        SessionFactory(id="session-1", state=SessionState.CHECKPOINTING, last_error="disk slow"),
        "owner",
    )
    assert bodies(store) == [
        SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message="disk slow")
    ]
    with pytest.raises(SessionNotFound, match="'ghost'"):
        store.checkpoints.begin(
            SessionFactory(id="ghost", state=SessionState.CHECKPOINTING), "owner"
        )


def test_begin_names_the_open_operation_and_needs_a_checkpointing_record(store: Store) -> None:
    started = checkpointing(store, SessionFactory(id="session-1"), "attempt-1")
    with pytest.raises(LifecycleConflict) as conflict:
        store.checkpoints.begin(started, "attempt-2")
    assert str(conflict.value) == (
        "session 'session-1' is already in a lifecycle operation "
        "(state checkpointing, checkpoint operation 'attempt-1' open)"
    )
    store.sessions.save(SessionFactory(id="session-2"))
    with pytest.raises(InvalidRecord) as refused:
        store.checkpoints.begin(SessionFactory(id="session-2"), "attempt-3")
    assert str(refused.value) == (
        "session 'session-2': a checkpoint begins with the record in state checkpointing, "
        "got running"
    )
    assert store.checkpoints.get("session-2") is None
    assert store.sessions.get("session-2") == SessionFactory(id="session-2")


def test_a_success_needs_archive_metadata(store: Store) -> None:
    checkpointing(store, SessionFactory(id="session-1"), "owner")
    with pytest.raises(InvalidRecord, match="successful checkpoint has no archive metadata"):
        store.checkpoints.save_requested(SessionFactory(id="session-1"), "owner")
    assert store.checkpoints.get("session-1") is not None
    assert store.events.latest_seq() == 0


def test_bad_arguments_write_nothing(store: Store) -> None:
    checkpointing(store, SessionFactory(id="session-1"), "owner")
    record = SessionFactory(id="session-1")
    with pytest.raises(InvalidRecord, match="command_id"):
        store.checkpoints.begin(record, "../owner")
    with pytest.raises(InvalidRecord, match="operation_id"):
        store.checkpoints.correlate_barrier("session-1", "", "barrier")
    with pytest.raises(InvalidRecord, match="deferred must be a bool"):
        store.checkpoints.finish_failed(record, "owner", deferred="yes", message="m")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="message must be a string"):
        store.checkpoints.finish_failed(record, "owner", deferred=True, message=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="NUL"):
        store.checkpoints.recover_interrupted("now\x00")
    assert store.events.latest_seq() == 0
    assert store.checkpoints.get("session-1") == CheckpointOperation(
        session_id="session-1", command_id="owner"
    )


def test_deleting_a_session_ends_its_operation(store: Store) -> None:
    checkpointing(store, SessionFactory(id="session-1"), "owner")
    store.sessions.delete("session-1")
    assert store.checkpoints.get("session-1") is None
    assert store.checkpoints.recover_interrupted("2026-09-27T12:00:00Z") == 0
