"""Per-session event files: the JSONL writer, redaction, stats and what the project index
stores and searches.

The journal event classes (one per kind, 48 kinds), `Message`, `JournalEnvelope`, and the pure
functions `event_kind`, `extract_anchors` and `extract_text_content` are all importable here.

Nothing in this package touches a database, and importing it loads no database code.
`ProjectIndex`, the service behind `store.index`, lives in `services/index.py`; it is importable
here too (the public API says so), on first use: imported with the package, it would load the
database layer and close an import cycle (the repositories use `search`).
"""

from typing import TYPE_CHECKING, Any

from .approvals import (
    DeferredFormApplied,
    DeferredFormRecorded,
    MermaidDiagram,
    PendingPrompt,
    PermissionGrantCreated,
    PermissionGrantExpired,
    PermissionGroupCreated,
    PermissionGroupResolved,
    PermissionGroupUpdated,
    PermissionRequestApproved,
    PermissionRequestCancelled,
    PermissionRequestCreated,
    PermissionRequestDeferred,
    PermissionRequestDenied,
    PermissionRequestTargeted,
    PromptExpired,
    PromptResolved,
    TerminalFinalState,
    ToolApproved,
    ToolDenied,
    ToolPendingApproval,
    UnrestrictedExecution,
)
from .envelope import (
    JOURNAL_EVENT_ADAPTER,
    JOURNAL_EVENT_KINDS,
    JournalEnvelope,
    JournalEvent,
)
from .extract import event_kind, extract_anchors, extract_text_content
from .index_feeder import IndexSink
from .kinds import (
    AssistantMsg,
    AttachmentDegraded,
    Checkpoint,
    CompactionSummary,
    ContentFilterHit,
    ContextCompact,
    ContextTruncated,
    DiffPreview,
    FileEditApplied,
    FlowEnd,
    FlowGraph,
    FlowNodeEnd,
    FlowNodeStart,
    FlowStart,
    LlmCall,
    LlmPartialCall,
    SystemMsg,
    ToolNode,
    ToolResultMetrics,
    ToolResultMsg,
    TurnEnd,
    TurnStart,
    UserInject,
    UserMsg,
    WatchWarn,
    WorkspaceLifecycle,
)
from .payloads import (
    FlowStatus,
    Message,
    MessageBlock,
    MessageRole,
    PermissionFlowOwner,
    PermissionGrantPayload,
    PermissionGroupOwner,
    PermissionGroupPayload,
    PermissionRequestPayload,
    PermissionSystemOwner,
    PermissionUserOwner,
    UnrestrictedExecutionPayload,
)
from .redaction import Redactor
from .search import IndexRow, SearchHit
from .stats import SessionStats
from .writer import FlushResult, JournalWriter, WriterStatus

if TYPE_CHECKING:  # for type checkers and IDEs; at run time `__getattr__` imports it
    from ..services.index import ProjectIndex

__all__ = [
    "JOURNAL_EVENT_ADAPTER",
    "JOURNAL_EVENT_KINDS",
    "AssistantMsg",
    "AttachmentDegraded",
    "Checkpoint",
    "CompactionSummary",
    "ContentFilterHit",
    "ContextCompact",
    "ContextTruncated",
    "DeferredFormApplied",
    "DeferredFormRecorded",
    "DiffPreview",
    "FileEditApplied",
    "FlowEnd",
    "FlowGraph",
    "FlowNodeEnd",
    "FlowNodeStart",
    "FlowStart",
    "FlowStatus",
    "FlushResult",
    "IndexRow",
    "IndexSink",
    "JournalEnvelope",
    "JournalEvent",
    "JournalWriter",
    "LlmCall",
    "LlmPartialCall",
    "MermaidDiagram",
    "Message",
    "MessageBlock",
    "MessageRole",
    "PendingPrompt",
    "PermissionFlowOwner",
    "PermissionGrantCreated",
    "PermissionGrantExpired",
    "PermissionGrantPayload",
    "PermissionGroupCreated",
    "PermissionGroupOwner",
    "PermissionGroupPayload",
    "PermissionGroupResolved",
    "PermissionGroupUpdated",
    "PermissionRequestApproved",
    "PermissionRequestCancelled",
    "PermissionRequestCreated",
    "PermissionRequestDeferred",
    "PermissionRequestDenied",
    "PermissionRequestPayload",
    "PermissionRequestTargeted",
    "PermissionSystemOwner",
    "PermissionUserOwner",
    "ProjectIndex",
    "PromptExpired",
    "PromptResolved",
    "Redactor",
    "SearchHit",
    "SessionStats",
    "SystemMsg",
    "TerminalFinalState",
    "ToolApproved",
    "ToolDenied",
    "ToolNode",
    "ToolPendingApproval",
    "ToolResultMetrics",
    "ToolResultMsg",
    "TurnEnd",
    "TurnStart",
    "UnrestrictedExecution",
    "UnrestrictedExecutionPayload",
    "UserInject",
    "UserMsg",
    "WatchWarn",
    "WorkspaceLifecycle",
    "WriterStatus",
    "event_kind",
    "extract_anchors",
    "extract_text_content",
]


def __getattr__(name: str) -> Any:
    # PEP 562. The service imports the database layer, whose repositories import this package's
    # `search` module: importing it here eagerly would be an import cycle, and would load
    # SQLAlchemy for every user of the files alone.
    if name == "ProjectIndex":
        from ..services.index import ProjectIndex

        return ProjectIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
