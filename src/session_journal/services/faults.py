"""Faults reported by the controller outside a lifecycle save."""

from __future__ import annotations

from ..clock import now_ms
from ..database import Database
from ..errors import InvalidRecord
from ..events import OutcomeReason, SessionFault
from ..unit_of_work import UnitOfWork
from ..validation import encode_json, require_id


class FaultService:
    """`store.faults`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def record_startup_fault(self, session_id: str, message: str) -> bool:
        """Append `SessionFault(startup_failed, message)` if the session exists; whether it did.
        An unknown session writes nothing."""
        session_id = require_id(session_id, "session_id")
        if not isinstance(message, str):
            raise InvalidRecord(f"message must be a string, got {type(message).__name__}")
        fault = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=message)
        body = encode_json(fault, "startup fault", self._database.options.max_body_bytes)

        def work(uow: UnitOfWork) -> bool:
            appended = uow.events.append_if_session_exists(session_id, now_ms(), body)
            uow.commit()
            return appended

        return self._database.submit(work, f"record startup fault of {session_id!r}")
