"""The union of journal events and the envelope that is one line of a session's
`events.jsonl` (pure, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, get_args

from pydantic import (
    AwareDatetime,
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
    model_validator,
)

from . import approvals, kinds

# --- the union and the envelope --------------------------------------------------------------

JournalEvent = Annotated[
    kinds.FlowStart
    | kinds.FlowEnd
    | kinds.WorkspaceLifecycle
    | kinds.LlmCall
    | kinds.TurnStart
    | kinds.TurnEnd
    | kinds.UserMsg
    | kinds.AssistantMsg
    | kinds.ToolResultMsg
    | kinds.ToolResultMetrics
    | kinds.DiffPreview
    | kinds.FileEditApplied
    | kinds.CompactionSummary
    | kinds.SystemMsg
    | kinds.UserInject
    | kinds.ContentFilterHit
    | kinds.ContextCompact
    | kinds.Checkpoint
    | kinds.ContextTruncated
    | kinds.WatchWarn
    | approvals.PendingPrompt
    | approvals.PromptExpired
    | approvals.PromptResolved
    | approvals.DeferredFormRecorded
    | approvals.DeferredFormApplied
    | kinds.LlmPartialCall
    | kinds.FlowGraph
    | kinds.FlowNodeStart
    | kinds.FlowNodeEnd
    | kinds.ToolNode
    | kinds.AttachmentDegraded
    | approvals.ToolPendingApproval
    | approvals.ToolApproved
    | approvals.ToolDenied
    | approvals.PermissionRequestCreated
    | approvals.PermissionRequestTargeted
    | approvals.PermissionRequestDeferred
    | approvals.PermissionRequestApproved
    | approvals.PermissionRequestDenied
    | approvals.PermissionRequestCancelled
    | approvals.PermissionGroupCreated
    | approvals.PermissionGroupUpdated
    | approvals.PermissionGroupResolved
    | approvals.PermissionGrantCreated
    | approvals.PermissionGrantExpired
    | approvals.UnrestrictedExecution
    | approvals.TerminalFinalState
    | approvals.MermaidDiagram,
    Field(discriminator="type"),
]
"""Any journal event, discriminated by its `type` tag."""

JOURNAL_EVENT_ADAPTER: TypeAdapter[JournalEvent] = TypeAdapter(JournalEvent)
"""Validates and dumps a bare journal event (built once)."""

JOURNAL_EVENT_KINDS: tuple[str, ...] = tuple(
    str(member.model_fields["type"].default) for member in get_args(get_args(JournalEvent)[0])
)
"""Every event tag, in the seed's order."""

_ENVELOPE_KEYS = ("seq", "ts")


class JournalEnvelope(BaseModel):
    """One line of `events.jsonl`. Its JSON form is one flat object, `{"seq", "ts", "type",
    <the event's fields>}`; validation accepts that flat form as well as `event=...`."""

    seq: Annotated[int, Field(ge=0, le=2**63 - 1)]  # stored as BIGINT in the index
    ts: AwareDatetime
    event: JournalEvent

    @classmethod
    def now(cls, seq: int, event: JournalEvent) -> JournalEnvelope:
        """An envelope stamped with the current time."""
        return cls(seq=seq, ts=datetime.now(UTC), event=event)

    @field_validator("ts")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_event(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "event" in data:
            return data
        nested = {key: data[key] for key in _ENVELOPE_KEYS if key in data}
        nested["event"] = {key: v for key, v in data.items() if key not in _ENVELOPE_KEYS}
        return nested

    @model_serializer(mode="wrap")
    def _flatten_event(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        event = data.pop("event", None)
        if not isinstance(event, dict):  # the event was excluded from the dump
            return data
        # `type` right after the envelope's own keys, so a line reads seq, ts, type, fields.
        flat = {key: data[key] for key in _ENVELOPE_KEYS if key in data}
        if "type" in event:
            flat["type"] = event.pop("type")
        flat.update(event)
        return flat
