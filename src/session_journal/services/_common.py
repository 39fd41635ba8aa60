"""Helpers shared by services: the fault transition and the session lock."""

from __future__ import annotations

from .._clock import now_ms
from .._validation import encode_json
from ..api_events import OutcomeReason, SessionFault
from ..errors import SessionNotFound
from ..records import SessionRecord
from ..storage.protocols import WriteContext
from ..storage.repositories import StoredLifecycle


def record_fault_transition(
    uow: WriteContext, record: SessionRecord, previous_error: str | None, max_bytes: int
) -> None:
    """Append `SessionFault(lifecycle_failed)` when the record carries a new `last_error`.

    Runs in the transaction that saves the record, so the comparison and the event commit
    together: an unchanged re-save appends nothing, clearing the error appends nothing.
    """
    if record.last_error is None or record.last_error == previous_error:
        return
    fault = SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message=record.last_error)
    uow.events.append_encoded(record.id, now_ms(), encode_json(fault, "session fault", max_bytes))


def lock_session(uow: WriteContext, session_id: str) -> StoredLifecycle:
    """The session's stored lifecycle, its row locked until commit; `SessionNotFound` if the
    session does not exist. Every writer locks the session row first (one lock order)."""
    stored = uow.sessions.lock(session_id)
    if stored is None:
        raise SessionNotFound(f"session {session_id!r} does not exist")
    return stored
