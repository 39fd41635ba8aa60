"""Faults reported by the controller outside a lifecycle save."""

from __future__ import annotations

from .._arguments import Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id, JsonTemplate
from ..api_events import OutcomeReason, SessionFault
from ..storage.lone import AppendIfSessionExists
from ..storage.protocols import LoopWriter, Transactions, WriteContext

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
        append, action = self._startup_fault(session_id, message)
        return self._transactions.submit_lone(append, action, uow)

    @validate_arguments()
    def startup_fault(self, session_id: Id, message: str) -> tuple[AppendIfSessionExists, str]:
        """The lone write `record_startup_fault(session_id, message)` submits, checked and
        encoded as it checks and encodes it, and the name of the call for errors: for its async
        twin, which runs it on its event loop where it can (`loop_writes`)."""
        return self._startup_fault(session_id, message)

    @property
    def loop_writes(self) -> LoopWriter | None:
        """Where an async store runs the lone writes of this service on its event loop
        (PostgreSQL, `storage/loop_writes.py`); `None` where it runs them on a worker."""
        return self._transactions.loop_writes

    def _startup_fault(self, session_id: str, message: str) -> tuple[AppendIfSessionExists, str]:
        body = _STARTUP_FAULT.fill(
            message, "startup fault", self._transactions.options.max_body_bytes
        )
        append = AppendIfSessionExists(session_id, now_ms(), body)
        return append, f"record startup fault of {session_id!r}"
