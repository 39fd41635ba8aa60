"""Checkpoint operations: at most one per session, owned by the command that began it."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ..models import CheckpointOperationRow
from ..records import CheckpointOperation


class CheckpointRepository:
    """`checkpoint_operations` rows as `CheckpointOperation`s."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def get(self, session_id: str) -> CheckpointOperation | None:
        """The session's open operation, or `None` (a plain read)."""
        return self._fetch(session_id, lock=False)

    def lock(self, session_id: str) -> CheckpointOperation | None:
        """Like `get`, locking the row (PostgreSQL) until the transaction ends. Writers lock the
        session row first (`SessionRepository.lock`): one order for every writer, no deadlock."""
        return self._fetch(session_id, lock=True)

    def _fetch(self, session_id: str, *, lock: bool) -> CheckpointOperation | None:
        query = sa.select(
            CheckpointOperationRow.command_id, CheckpointOperationRow.related_command_ids
        ).where(CheckpointOperationRow.session_id == session_id)
        row = self._connection.execute(query.with_for_update() if lock else query).one_or_none()
        if row is None:
            return None
        return CheckpointOperation(
            session_id=session_id,
            command_id=row.command_id,
            related_command_ids=json.loads(row.related_command_ids),
        )

    def insert(self, session_id: str, command_id: str) -> None:
        """Open an operation owned by `command_id`."""
        self._connection.execute(
            sa.insert(CheckpointOperationRow).values(
                {
                    CheckpointOperationRow.session_id: session_id,
                    CheckpointOperationRow.command_id: command_id,
                }
            )
        )

    def set_related(self, session_id: str, related_command_ids: list[str]) -> None:
        """Replace the operation's related command ids."""
        self._connection.execute(
            sa.update(CheckpointOperationRow)
            .where(CheckpointOperationRow.session_id == session_id)
            .values({CheckpointOperationRow.related_command_ids: json.dumps(related_command_ids)})
        )

    def delete(self, session_id: str) -> None:
        """Close the session's operation."""
        self._connection.execute(
            sa.delete(CheckpointOperationRow).where(CheckpointOperationRow.session_id == session_id)
        )
