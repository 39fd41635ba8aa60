"""Faults reported by the controller outside a lifecycle save."""

from __future__ import annotations

from .._arguments import Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id, JsonTemplate
from ..api_events import OutcomeReason, SessionFault
from ..storage.lone import AppendIfSessionExists
from ..storage.protocols import Transactions, WriteContext

# The body of a startup fault is its message's JSON string in the model's own text: the
# message, checked once (`str`, strict) by `validate_arguments`, is encoded once.
_STARTUP_FAULT = JsonTemplate(
    lambda message: SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=message)
)


class FaultService:
    """`store.faults`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments()
    def record_startup_fault(
        self, session_id: Id, message: str, *, uow: Passed[WriteContext | None] = None
    ) -> bool:
        """Append `SessionFault(startup_failed, message)` if the session exists; whether it did.
        An unknown session writes nothing."""
        body = _STARTUP_FAULT.fill(
            message, "startup fault", self._transactions.options.max_body_bytes
        )
        append = AppendIfSessionExists(session_id, now_ms(), body)
        return self._transactions.submit_lone(
            append, f"record startup fault of {session_id!r}", uow
        )
