"""Saving, loading and deleting sessions."""

from __future__ import annotations

import builtins

from ..arguments import Given, Passed, validate_arguments
from ..records import SessionRecord
from ..unit_of_work import Transactions, WriteContext
from ..validation import Id
from ._common import lock_session, record_fault_transition


class SessionService:
    """`store.sessions`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments(record="session record")
    def save(
        self, record: Given[SessionRecord], *, uow: Passed[WriteContext | None] = None
    ) -> None:
        """Upsert the session in place with its context and checkpoint metadata (a `None`
        checkpoint removes the stored one); a new `last_error` appends one `session_fault`."""

        def work(uow: WriteContext) -> None:
            # Insert first: of two controllers saving the same new session, the second then
            # waits for the first and compares with its error, so the fault is emitted once.
            stored = None if uow.sessions.insert_if_absent(record) else uow.sessions.lock(record.id)
            uow.sessions.upsert(record)
            previous_error = None if stored is None else stored.last_error
            record_fault_transition(
                uow, record, previous_error, self._transactions.options.max_body_bytes
            )
            uow.commit()

        return self._transactions.submit(work, f"save session {record.id!r}", uow)

    @validate_arguments(record="session record")
    def save_lifecycle(
        self, record: Given[SessionRecord], *, uow: Passed[WriteContext | None] = None
    ) -> None:
        """Update `state`, `last_error` and `last_checkpoint_error` of an existing session
        (`SessionNotFound` otherwise); a new `last_error` appends one `session_fault`."""

        def work(uow: WriteContext) -> None:
            stored = lock_session(uow, record.id)
            uow.sessions.update_lifecycle(record)
            record_fault_transition(
                uow, record, stored.last_error, self._transactions.options.max_body_bytes
            )
            uow.commit()

        return self._transactions.submit(work, f"save lifecycle of session {record.id!r}", uow)

    @validate_arguments()
    def get(
        self, session_id: Id, *, uow: Passed[WriteContext | None] = None
    ) -> SessionRecord | None:
        """The session, or `None` when no such session exists."""
        with self._transactions.reading(f"get session {session_id!r}", uow) as read:
            return read.sessions.get(session_id)

    @validate_arguments()
    def list(
        self,
        *,
        workspace_id: Id | None = None,
        project_id: Id | None = None,
        uow: Passed[WriteContext | None] = None,
    ) -> builtins.list[SessionRecord]:
        """Sessions in the workspace and project given (either optional), ordered by id."""
        with self._transactions.reading("list sessions", uow) as read:
            return read.sessions.list(workspace_id=workspace_id, project_id=project_id)

    @validate_arguments()
    def delete(self, session_id: Id, *, uow: Passed[WriteContext | None] = None) -> bool:
        """Delete the session with its context, checkpoint, events and activity; whether it
        existed. The event frontier (`latest_seq`) does not move."""

        def work(uow: WriteContext) -> bool:
            existed = uow.sessions.delete(session_id)
            uow.commit()
            return existed

        return self._transactions.submit(work, f"delete session {session_id!r}", uow)
