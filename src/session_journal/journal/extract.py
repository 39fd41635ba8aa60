"""What the project index needs from a journal event: its kind, its anchors and its searchable
text (pure, no I/O). The tables follow the seed's `event_kind`, `extract_anchors` and
`extract_text_content`."""

from __future__ import annotations

from typing import assert_never

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
    JournalEvent,
)
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
    PermissionFlowOwner,
    PermissionSystemOwner,
    PermissionUserOwner,
)


def event_kind(event: JournalEvent) -> str:
    """The event's tag (`flow_start`, `user_msg`, ...), as stored in `project_events.kind`."""
    return event.type


def extract_anchors(event: JournalEvent) -> tuple[str | None, str | None]:
    """`(turn_id, flow_run_id)` the event is filed under. Permission groups are filed under
    their owner: the flow's run id, `"user:<session_id>"` or `"system"`."""
    match event:
        case FlowStart() | FlowEnd() | WorkspaceLifecycle():
            return None, event.run_id
        case TurnStart() | TurnEnd() | UserInject():
            return event.turn_id, None
        case UserMsg() | AssistantMsg() | ToolResultMsg() | ToolResultMetrics() | SystemMsg():
            return event.turn_id, event.flow_run_id
        case (
            DiffPreview()
            | FileEditApplied()
            | ContentFilterHit()
            | ContextTruncated()
            | WatchWarn()
            | LlmPartialCall()
            | AttachmentDegraded()
        ):
            return event.turn_id, event.flow_run_id
        case (
            FlowGraph()
            | FlowNodeStart()
            | FlowNodeEnd()
            | ToolNode()
            | ToolPendingApproval()
            | ToolApproved()
            | ToolDenied()
        ):
            return None, event.run_id
        case (
            PermissionRequestCreated()
            | PermissionRequestTargeted()
            | PermissionRequestDeferred()
            | PermissionRequestApproved()
            | PermissionRequestDenied()
            | PermissionRequestCancelled()
            | UnrestrictedExecution()
            | PermissionGrantCreated()
            | PermissionGrantExpired()
        ):
            return None, event.payload.requesting_run_id
        case PermissionGroupCreated() | PermissionGroupUpdated() | PermissionGroupResolved():
            return None, _group_owner_anchor(event.payload.owner)
        case CompactionSummary() | ContextCompact() | Checkpoint():
            return None, event.flow_run_id
        case (
            LlmCall()
            | PendingPrompt()
            | PromptExpired()
            | PromptResolved()
            | DeferredFormRecorded()
            | TerminalFinalState()
            | MermaidDiagram()
        ):
            return None, None
        case DeferredFormApplied():
            return event.message.turn_id, None
        case _:
            assert_never(event)


def _group_owner_anchor(
    owner: PermissionFlowOwner | PermissionUserOwner | PermissionSystemOwner,
) -> str:
    match owner:
        case PermissionFlowOwner():
            return owner.run_id
        case PermissionUserOwner():
            return f"user:{owner.session_id}"
        case PermissionSystemOwner():
            return "system"
        case _:
            assert_never(owner)


def extract_text_content(event: JournalEvent) -> str | None:
    """The event's searchable text, or None for kinds that have none."""
    match event:
        case UserMsg() | AssistantMsg() | ToolResultMsg() | SystemMsg() | DeferredFormApplied():
            return event.message.text_concat()
        case WatchWarn():
            return event.message
        case CompactionSummary():
            return event.summary
        case AttachmentDegraded():
            return f"{event.file_basename} {event.reason}"
        case _:
            return None
