"""The unit of work: one transaction with the repositories bound to it."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from .config import StoreOptions
from .errors import SessionJournalError
from .repositories import (
    ActivityRepository,
    CheckpointRepository,
    EventRepository,
    ProjectEventRepository,
    ProjectionRepository,
    SessionRepository,
)


class UnitOfWork:
    """One database transaction with repositories bound to it. It is the write path's (or a
    read's): `commit()` asks the write path to commit; leaving a write without it rolls back."""

    def __init__(
        self,
        connection: sa.Connection,
        options: StoreOptions | None = None,
        committer: Callable[[UnitOfWork], None] | None = None,
    ) -> None:
        options = options or StoreOptions()
        self.connection = connection
        self.events = EventRepository(connection, options.max_body_bytes)
        self.sessions = SessionRepository(connection, on_delete=self.events.discard_session)
        self.activity = ActivityRepository(connection, options.max_body_bytes)
        self.checkpoints = CheckpointRepository(connection)
        self.projection = ProjectionRepository(connection)
        self.project_events = ProjectEventRepository(connection)
        self._committer = committer

    def commit(self) -> None:
        """Commit what this unit of work wrote (its appended events receive their seqs then).
        In `store.unit_of_work()` it commits now; in a function the write path runs
        (`submit`), the function's work commits with its batch, before the call returns."""
        if self._committer is None:
            raise SessionJournalError("commit(): this unit of work is a read")
        self._committer(self)
