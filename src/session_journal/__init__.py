"""session-journal: the durable memory of an AI-agent session controller.

Open a `Store` and use its services; the docs (docs/, Guarantees) say what they promise.

`Store`, `AsyncStore`, `UnitOfWork` and `SCHEMA_LEVEL` are imported on first use (PEP 562
`__getattr__`), so importing a part that needs no database (`session_journal.journal`,
`session_journal.relay`, the records and event bodies) loads no SQLAlchemy, Alembic or driver.
`Redactor` (from `session_journal.journal`, whose event kinds it would load) is imported on first
use too.
"""

from typing import TYPE_CHECKING, Any

from .api_events import (
    ActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEvent,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
    ApiEventPageBefore,
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
from .config import StoreOptions
from .errors import (
    BoundTransactionOpen,
    CallerCommits,
    CallWithdrawn,
    ChainBroken,
    ConsumerChangeRefused,
    ConsumerNotFound,
    CursorAhead,
    CursorExpired,
    DatabaseNotFound,
    DataLossRefused,
    DemoRefused,
    IncompatibleSchema,
    IntegrityViolation,
    InvalidRecord,
    JournalDamaged,
    LeaseHeld,
    LeaseLost,
    LifecycleConflict,
    MigrationFailed,
    MissingDependency,
    NotOperationOwner,
    PermanentStorageError,
    PruneRefused,
    ReadOnlySnapshot,
    SchemaOutOfDate,
    SessionJournalError,
    SessionNotFound,
    SnapshotEnded,
    StorageError,
    StoreClosed,
    TransientStorageError,
    UnitOfWorkEnded,
    UsageError,
    WriteInsideUnitOfWork,
    WriterClosed,
)
from .records import (
    CheckpointMetadata,
    CheckpointOperation,
    ConsumerStatus,
    EventRate,
    Histogram,
    SessionPage,
    SessionRecord,
    SessionState,
    SessionSummary,
    StoreMetrics,
)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time `__getattr__` imports them
    from .aio import AsyncLease, AsyncStore
    from .follow import AsyncFollower, Follower
    from .journal.redaction import Redactor
    from .migrations import SCHEMA_LEVEL
    from .services.consumers import Lease
    from .storage.unit_of_work import UnitOfWork
    from .store import Snapshot, Store

# The names backed by the database layer: `__getattr__` imports them on first use.
_DATABASE_NAMES = frozenset(
    {
        "SCHEMA_LEVEL",
        "AsyncFollower",
        "AsyncLease",
        "AsyncStore",
        "Follower",
        "Lease",
        "Snapshot",
        "Store",
        "UnitOfWork",
    }
)

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
    "ApiEventPageBefore",
    "ApiTurnOutcome",
    "AsyncFollower",
    "AsyncLease",
    "AsyncStore",
    "BoundTransactionOpen",
    "CallWithdrawn",
    "CallerCommits",
    "ChainBroken",
    "CheckpointMetadata",
    "CheckpointOperation",
    "CommandEnded",
    "CommandOwner",
    "CommandResult",
    "CommandResultKind",
    "ConsumerChangeRefused",
    "ConsumerNotFound",
    "ConsumerStatus",
    "CursorAhead",
    "CursorExpired",
    "DataLossRefused",
    "DatabaseNotFound",
    "DemoRefused",
    "EventRate",
    "Follower",
    "Histogram",
    "IncompatibleSchema",
    "InputRequired",
    "InputResolved",
    "IntegrityViolation",
    "InvalidRecord",
    "JournalDamaged",
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "LegacyNotice",
    "LifecycleConflict",
    "MigrationFailed",
    "MissingDependency",
    "NotOperationOwner",
    "OutcomeReason",
    "PermanentStorageError",
    "PruneRefused",
    "ReadOnlySnapshot",
    "Redactor",
    "SchemaOutOfDate",
    "SessionFault",
    "SessionJournalError",
    "SessionNotFound",
    "SessionPage",
    "SessionRecord",
    "SessionState",
    "SessionSummary",
    "Snapshot",
    "SnapshotEnded",
    "StorageError",
    "Store",
    "StoreClosed",
    "StoreMetrics",
    "StoreOptions",
    "TransientStorageError",
    "TurnEnded",
    "TurnOutcome",
    "TurnResultKind",
    "TurnStarted",
    "UnitOfWork",
    "UnitOfWorkEnded",
    "UsageError",
    "WriteInsideUnitOfWork",
    "WriterClosed",
]


def __getattr__(name: str) -> Any:
    # PEP 562: called for a name not bound in this module. The modules come together
    # (`store` imports the other two); the names are bound here, so this runs once.
    if name == "Redactor":
        from .journal.redaction import Redactor

        globals()["Redactor"] = Redactor
        return Redactor
    if name not in _DATABASE_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import aio, follow, migrations, store
    from .services import consumers
    from .storage import unit_of_work

    globals().update(
        SCHEMA_LEVEL=migrations.SCHEMA_LEVEL,
        AsyncFollower=follow.AsyncFollower,
        AsyncLease=aio.AsyncLease,
        AsyncStore=aio.AsyncStore,
        Follower=follow.Follower,
        Lease=consumers.Lease,
        Snapshot=store.Snapshot,
        Store=store.Store,
        UnitOfWork=unit_of_work.UnitOfWork,
    )
    return globals()[name]


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included (for `dir()` and completion)."""
    return sorted({*globals(), *__all__})
