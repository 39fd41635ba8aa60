"""Checkpoint operations (at most one per session, owned by the command that began it) and the
recovery of checkpoints a controller restart interrupted."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ...records import CheckpointOperation, SessionState
from ..models import CheckpointOperationRow, SessionRow
from ._dialect import IN_LIST_CHUNK


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

    def lock_interrupted(self) -> list[str]:
        """Sessions in `checkpointing` or with an open checkpoint operation, locked, by id.

        Two statements, on purpose. The first finds and locks the candidates. Under READ
        COMMITTED a `FOR UPDATE` that waited for a row lock re-checks its WHERE clause on the
        new row version, but an `IN (subquery)` keeps the statement's old snapshot: a checkpoint
        that its owner finished while we waited would still look open. The second statement, on
        rows we now hold, sees their committed state and keeps only those still interrupted.
        """
        candidates = (
            sa.select(SessionRow.session_id)
            .where(
                sa.or_(
                    SessionRow.state == SessionState.CHECKPOINTING.value,
                    SessionRow.session_id.in_(sa.select(CheckpointOperationRow.session_id)),
                )
            )
            .order_by(SessionRow.session_id)
            .with_for_update()
        )
        locked = list(self._connection.execute(candidates).scalars())
        if not locked:
            return []
        still_interrupted: set[str] = set()
        for start in range(0, len(locked), IN_LIST_CHUNK):
            chunk = locked[start : start + IN_LIST_CHUNK]
            recheck = sa.select(SessionRow.session_id).where(
                SessionRow.session_id.in_(chunk),
                sa.or_(
                    SessionRow.state == SessionState.CHECKPOINTING.value,
                    sa.exists().where(CheckpointOperationRow.session_id == SessionRow.session_id),
                ),
            )
            still_interrupted.update(self._connection.execute(recheck).scalars())
        return [session_id for session_id in locked if session_id in still_interrupted]

    def mark_recovered(self, session_id: str, last_checkpoint_error: str) -> None:
        """Back to `running` after an interrupted checkpoint, saying so in
        `last_checkpoint_error`; `last_error` and the checkpoint metadata stay."""
        self._connection.execute(
            sa.update(SessionRow)
            .where(SessionRow.session_id == session_id)
            .values(
                {
                    SessionRow.state: SessionState.RUNNING.value,
                    SessionRow.last_checkpoint_error: last_checkpoint_error,
                    SessionRow.updated_at: sa.func.current_timestamp(),
                }
            )
        )
