"""Checkpoint operations: one in flight per session, finished only by its owner, recovered after a
controller restart. Finishing appends the terminal `command_ended` event in the same transaction
as the session's new state and checkpoint metadata."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import PlainValidator

from .._arguments import Given, Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id, check_text, encode_json
from ..api_events import (
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    OutcomeReason,
)
from ..errors import InvalidRecord, LifecycleConflict, NotOperationOwner
from ..records import CheckpointOperation, SessionRecord, SessionState
from ..storage.protocols import Transactions, WriteContext
from ..storage.repositories import StoredLifecycle
from ._common import lock_session, record_fault_transition

BUSY_STATES = (SessionState.CHECKPOINTING, SessionState.CLOSING, SessionState.DESTROYING)


def _timestamp(now: Any) -> str:
    """The `now` of `recover_interrupted` as RFC 3339 text: a string as it is (storable text),
    an aware datetime in UTC with `Z`."""
    if isinstance(now, str):
        return check_text(now)
    if not isinstance(now, datetime):
        raise ValueError(f"must be a datetime or a string, got {type(now).__name__}")
    if now.tzinfo is None:
        raise ValueError("must be timezone-aware (a naive datetime has no offset)")
    return now.astimezone(UTC).isoformat().replace("+00:00", "Z")


_Timestamp = Annotated[datetime | str, PlainValidator(_timestamp)]


class CheckpointService:
    """`store.checkpoints`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions
        self._max_bytes = transactions.options.max_body_bytes

    @validate_arguments(record="session record")
    def begin(
        self,
        record: Given[SessionRecord],
        command_id: Id,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> None:
        """Open the session's checkpoint operation, owned by `command_id`, and save the record's
        lifecycle fields; the record's state must be `checkpointing` (`InvalidRecord`
        otherwise). `LifecycleConflict` if the stored state is `checkpointing`, `closing` or
        `destroying`, or an operation is already open (the message names it);
        `SessionNotFound` if absent."""
        if record.state is not SessionState.CHECKPOINTING:
            raise InvalidRecord(
                f"session {record.id!r}: a checkpoint begins with the record in state "
                f"checkpointing, got {record.state.value}"
            )

        def work(uow: WriteContext) -> None:
            stored = lock_session(uow, record.id)
            open_operation = uow.checkpoints.lock(record.id)
            if stored.state in BUSY_STATES or open_operation is not None:
                held_by = (
                    ""
                    if open_operation is None
                    else f", checkpoint operation {open_operation.command_id!r} open"
                )
                raise LifecycleConflict(
                    f"session {record.id!r} is already in a lifecycle operation "
                    f"(state {stored.state.value}{held_by})"
                )
            uow.checkpoints.insert(record.id, command_id)
            self._save_lifecycle(uow, record, stored)
            uow.commit()

        return self._transactions.submit(work, f"begin checkpoint of {record.id!r}", uow)

    @validate_arguments()
    def correlate_barrier(
        self,
        session_id: Id,
        operation_id: Id,
        command_id: Id,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> bool:
        """Record that barrier `command_id` was sent on behalf of operation `operation_id` (call
        it before submitting the barrier); whether that operation is the session's open one."""

        def work(uow: WriteContext) -> bool:
            uow.sessions.lock(session_id)  # the session row first, as every writer does
            operation = uow.checkpoints.lock(session_id)
            if operation is None or operation.command_id != operation_id:
                return False
            if command_id not in operation.related_command_ids:
                uow.checkpoints.set_related(
                    session_id, [*operation.related_command_ids, command_id]
                )
            uow.commit()
            return True

        return self._transactions.submit(work, f"correlate barrier of {session_id!r}", uow)

    @validate_arguments(record="session record")
    def save_requested(
        self,
        record: Given[SessionRecord],
        command_id: Id,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> None:
        """Finish the owner's checkpoint as `succeeded`: save the lifecycle fields, the
        `native_session_id` and the new checkpoint metadata, and append the terminal event, all
        in one transaction. `NotOperationOwner` if `command_id` does not own the open
        operation; `InvalidRecord` if the record has no checkpoint metadata."""
        if record.checkpoint is None:
            raise InvalidRecord(
                f"session {record.id!r}: successful checkpoint has no archive metadata"
            )

        def work(uow: WriteContext) -> None:
            stored = lock_session(uow, record.id)
            operation = uow.checkpoints.lock(record.id)
            if operation is None or operation.command_id != command_id:
                raise NotOperationOwner(
                    f"checkpoint operation {command_id!r} no longer owns session {record.id!r}"
                )
            self._save_lifecycle(uow, record, stored)
            uow.sessions.set_native_session_id(record.id, record.native_session_id)
            uow.sessions.replace_checkpoint(record.id, record.checkpoint)
            self._finish(uow, operation, CommandResultKind.SUCCEEDED, None, None)
            uow.commit()

        return self._transactions.submit(work, f"save checkpoint of {record.id!r}", uow)

    @validate_arguments(record="session record")
    def finish_failed(
        self,
        record: Given[SessionRecord],
        command_id: Id,
        *,
        deferred: bool,
        message: str,
        uow: Passed[WriteContext | None] = None,
    ) -> bool:
        """Finish the owner's checkpoint as `rejected`/`checkpoint_deferred` (`deferred`) or
        `failed`/`checkpoint_failed`, saving the lifecycle fields and keeping the stored
        checkpoint metadata. Not the owner, or already finished: `False`, nothing written."""
        outcome, reason = (
            (CommandResultKind.REJECTED, OutcomeReason.CHECKPOINT_DEFERRED)
            if deferred
            else (CommandResultKind.FAILED, OutcomeReason.CHECKPOINT_FAILED)
        )

        def work(uow: WriteContext) -> bool:
            stored = uow.sessions.lock(record.id)
            operation = uow.checkpoints.lock(record.id)
            if stored is None or operation is None or operation.command_id != command_id:
                return False
            self._save_lifecycle(uow, record, stored)
            self._finish(uow, operation, outcome, reason, message)
            uow.commit()
            return True

        return self._transactions.submit(work, f"finish checkpoint of {record.id!r}", uow)

    @validate_arguments()
    def recover_interrupted(
        self, now: _Timestamp, *, uow: Passed[WriteContext | None] = None
    ) -> int:
        """At controller start: every session in `checkpointing` or with an open operation goes
        back to `running` with `last_checkpoint_error` saying the checkpoint was interrupted at
        `now`, keeps its previous checkpoint metadata, and its operation finishes as `cancelled`
        (`controller_restarted`). Returns the sessions recovered; a second call returns 0."""
        note = f"checkpoint interrupted by controller restart at {now}"  # validated: a string

        def work(uow: WriteContext) -> int:
            session_ids = uow.checkpoints.lock_interrupted()
            for session_id in session_ids:
                uow.checkpoints.mark_recovered(session_id, note)
                operation = uow.checkpoints.lock(session_id)
                if operation is not None:
                    self._finish(
                        uow,
                        operation,
                        CommandResultKind.CANCELLED,
                        OutcomeReason.CONTROLLER_RESTARTED,
                        note,
                    )
            uow.commit()
            return len(session_ids)

        return self._transactions.submit(work, "recover interrupted checkpoints", uow)

    @validate_arguments()
    def get(
        self, session_id: Id, *, uow: Passed[WriteContext | None] = None
    ) -> CheckpointOperation | None:
        """The session's open checkpoint operation, or `None`."""
        with self._transactions.reading(f"get checkpoint of {session_id!r}", uow) as read:
            return read.checkpoints.get(session_id)

    def _save_lifecycle(
        self, uow: WriteContext, record: SessionRecord, stored: StoredLifecycle
    ) -> None:
        uow.sessions.update_lifecycle(record)
        record_fault_transition(uow, record, stored.last_error, self._max_bytes)

    def _finish(
        self,
        uow: WriteContext,
        operation: CheckpointOperation,
        outcome: CommandResultKind,
        reason: OutcomeReason | None,
        message: str | None,
    ) -> None:
        # The terminal fact and the end of the operation commit together, so a finish is
        # published exactly once: a second finish finds no operation.
        ended = CommandEnded(
            result=CommandResult(
                owner=CommandOwner.DAEMON,
                command_id=operation.command_id,
                command_kind="checkpoint",
                outcome=outcome,
                reason=reason,
                message=message,
                related_command_ids=tuple(operation.related_command_ids),
            )
        )
        body = encode_json(ended, "checkpoint result", self._max_bytes)
        uow.events.append_encoded(operation.session_id, now_ms(), body)
        uow.checkpoints.delete(operation.session_id)
