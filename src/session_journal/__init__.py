"""session-journal: the durable memory of an AI-agent session controller.

Open a `Store` and use its services; see the README for the guarantees.
"""

from .config import StoreOptions
from .errors import (
    ChainBroken,
    IncompatibleSchema,
    InvalidRecord,
    LifecycleConflict,
    MigrationFailed,
    NotOperationOwner,
    SchemaOutOfDate,
    SessionJournalError,
    SessionNotFound,
    StorageError,
)
from .events import (
    ActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEvent,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
    ApiTurnOutcome,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    InputRequired,
    InputResolved,
    LegacyNotice,
    OutcomeReason,
    SessionFault,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from .migrations import SCHEMA_LEVEL
from .records import CheckpointMetadata, CheckpointOperation, SessionRecord, SessionState
from .store import Store
from .unit_of_work import UnitOfWork

__all__ = [
    "SCHEMA_LEVEL",
    "ActivityChanged",
    "ApiActivityDetails",
    "ApiActivityKind",
    "ApiActivityState",
    "ApiEvent",
    "ApiEventData",
    "ApiEventFilter",
    "ApiEventPage",
    "ApiTurnOutcome",
    "ChainBroken",
    "CheckpointMetadata",
    "CheckpointOperation",
    "CommandEnded",
    "CommandOwner",
    "CommandResult",
    "CommandResultKind",
    "IncompatibleSchema",
    "InputRequired",
    "InputResolved",
    "InvalidRecord",
    "LegacyNotice",
    "LifecycleConflict",
    "MigrationFailed",
    "NotOperationOwner",
    "OutcomeReason",
    "SchemaOutOfDate",
    "SessionFault",
    "SessionJournalError",
    "SessionNotFound",
    "SessionRecord",
    "SessionState",
    "StorageError",
    "Store",
    "StoreOptions",
    "TurnEnded",
    "TurnOutcome",
    "TurnResultKind",
    "TurnStarted",
    "UnitOfWork",
]
