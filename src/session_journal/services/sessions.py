"""Saving, loading and deleting sessions."""

from __future__ import annotations

import builtins

from ..database import Database
from ..records import SessionRecord, revalidate
from ..unit_of_work import UnitOfWork
from ..validation import optional_id, require_id
from ._common import lock_session, record_fault_transition


class SessionService:
    """`store.sessions`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def save(self, record: SessionRecord) -> None:
        """Upsert the session in place with its context and checkpoint metadata (a `None`
        checkpoint removes the stored one); a new `last_error` appends one `session_fault`."""
        record = revalidate(record, SessionRecord, "session record")

        def work(uow: UnitOfWork) -> None:
            # Insert first: of two controllers saving the same new session, the second then
            # waits for the first and compares with its error, so the fault is emitted once.
            stored = None if uow.sessions.insert_if_absent(record) else uow.sessions.lock(record.id)
            uow.sessions.upsert(record)
            previous_error = None if stored is None else stored.last_error
            record_fault_transition(
                uow, record, previous_error, self._database.options.max_body_bytes
            )
            uow.commit()

        return self._database.submit(work, f"save session {record.id!r}")

    def save_lifecycle(self, record: SessionRecord) -> None:
        """Update `state`, `last_error` and `last_checkpoint_error` of an existing session
        (`SessionNotFound` otherwise); a new `last_error` appends one `session_fault`."""
        record = revalidate(record, SessionRecord, "session record")

        def work(uow: UnitOfWork) -> None:
            stored = lock_session(uow, record.id)
            uow.sessions.update_lifecycle(record)
            record_fault_transition(
                uow, record, stored.last_error, self._database.options.max_body_bytes
            )
            uow.commit()

        return self._database.submit(work, f"save lifecycle of session {record.id!r}")

    def get(self, session_id: str) -> SessionRecord | None:
        """The session, or `None` when no such session exists."""
        session_id = require_id(session_id, "session_id")
        with self._database.reading(f"get session {session_id!r}") as uow:
            return uow.sessions.get(session_id)

    def list(
        self, *, workspace_id: str | None = None, project_id: str | None = None
    ) -> builtins.list[SessionRecord]:
        """Sessions in the workspace and project given (either optional), ordered by id."""
        workspace_id = optional_id(workspace_id, "workspace_id")
        project_id = optional_id(project_id, "project_id")
        with self._database.reading("list sessions") as uow:
            return uow.sessions.list(workspace_id=workspace_id, project_id=project_id)

    def delete(self, session_id: str) -> bool:
        """Delete the session with its context, checkpoint, events and activity; whether it
        existed. The event frontier (`latest_seq`) does not move."""
        session_id = require_id(session_id, "session_id")

        def work(uow: UnitOfWork) -> bool:
            existed = uow.sessions.delete(session_id)
            uow.commit()
            return existed

        return self._database.submit(work, f"delete session {session_id!r}")
