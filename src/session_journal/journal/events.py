"""Journal events: one pydantic class per kind, their discriminated union, and the envelope that
is one line of a session's `events.jsonl` (pure, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
    model_validator,
)

# --- messages and shared payloads ------------------------------------------------------------


class MessageRole(StrEnum):
    """Who a journal message is from."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"


class MessageBlock(BaseModel):
    """One content block: `{"type": "text", "text": ...}`; other block types (tool use, images,
    ...) are kept as opaque JSON (their fields are preserved as extras)."""

    model_config = ConfigDict(extra="allow")

    type: str

    @model_validator(mode="after")
    def _text_blocks_have_text(self) -> MessageBlock:
        if self.type == "text" and not isinstance(getattr(self, "text", None), str):
            raise ValueError("a text block needs a string `text`")
        return self

    def as_text(self) -> str | None:
        """The block's text if it is a text block, else None."""
        if self.type != "text":
            return None
        text = getattr(self, "text", None)
        return text if isinstance(text, str) else None


class Message(BaseModel):
    """A conversation message as the journal records it."""

    turn_id: str
    role: MessageRole
    content: list[MessageBlock]

    @classmethod
    def from_text(cls, turn_id: str, role: MessageRole, text: str) -> Message:
        """A message holding one text block."""
        return cls(turn_id=turn_id, role=role, content=[MessageBlock(type="text", text=text)])

    def text_concat(self) -> str:
        """The text of the text blocks, joined with newlines; other blocks are skipped."""
        return "\n".join(t for t in (block.as_text() for block in self.content) if t is not None)


class FlowStatus(BaseModel):
    """How a flow (or a flow node) ended; `message` says why it errored or was cancelled."""

    kind: Literal["completed", "errored", "cancelled"]
    message: str | None = None


class PermissionRequestPayload(BaseModel):
    """The audit record of a permission request. `requesting_run_id` is the flow run that asked;
    further audit fields (target run, deferral, ...) are kept as opaque JSON extras."""

    model_config = ConfigDict(extra="allow")

    request_id: str
    requesting_run_id: str
    permission: str
    reason: str | None = None


class PermissionFlowOwner(BaseModel):
    """A permission group owned by a flow run."""

    kind: Literal["flow"] = "flow"
    run_id: str


class PermissionUserOwner(BaseModel):
    """A permission group owned by the user of a session."""

    kind: Literal["user"] = "user"
    session_id: str


class PermissionSystemOwner(BaseModel):
    """A permission group owned by the system."""

    kind: Literal["system"] = "system"


PermissionGroupOwner = Annotated[
    PermissionFlowOwner | PermissionUserOwner | PermissionSystemOwner,
    Field(discriminator="kind"),
]
"""Who owns a permission group, discriminated by `kind`."""


class PermissionGroupPayload(BaseModel):
    """The audit record of a group of permission requests decided together; `resolution` is set
    once the group is resolved. Further audit fields are kept as opaque JSON extras."""

    model_config = ConfigDict(extra="allow")

    group_id: str
    owner: PermissionGroupOwner
    request_ids: list[str] = Field(default_factory=list)
    resolution: str | None = None


class PermissionGrantPayload(BaseModel):
    """The audit record of a standing grant given to a flow run (`expires_at` None: until the
    run ends). Further audit fields are kept as opaque JSON extras."""

    model_config = ConfigDict(extra="allow")

    grant_id: str
    requesting_run_id: str
    permission: str
    expires_at: AwareDatetime | None = None


class UnrestrictedExecutionPayload(BaseModel):
    """The audit record of a flow run allowed to execute without permission checks. Further
    audit fields are kept as opaque JSON extras."""

    model_config = ConfigDict(extra="allow")

    requesting_run_id: str
    reason: str | None = None


# --- flows and turns -------------------------------------------------------------------------


class FlowStart(BaseModel):
    """A flow run started (`spawned`: started by another flow's node)."""

    type: Literal["flow_start"] = "flow_start"
    run_id: str
    flow_name: str
    parent_run_id: str | None = None
    parent_node_id: str | None = None
    spawned: bool = False


class FlowEnd(BaseModel):
    """A flow run ended."""

    type: Literal["flow_end"] = "flow_end"
    run_id: str
    flow_name: str
    status: FlowStatus


class WorkspaceLifecycle(BaseModel):
    """A flow run's workspace changed state: `phase` names it (e.g. `created`, `reused`,
    `removed`), `path` is the workspace directory, `detail` free text."""

    type: Literal["workspace_lifecycle"] = "workspace_lifecycle"
    run_id: str
    phase: str
    path: str | None = None
    detail: str | None = None


class FlowGraph(BaseModel):
    """The node graph of a flow run, as opaque JSON (nodes, edges)."""

    type: Literal["flow_graph"] = "flow_graph"
    run_id: str
    graph: dict[str, Any]


class FlowNodeStart(BaseModel):
    """A node of a flow run started; `node_kind` says what sort of node it is."""

    type: Literal["flow_node_start"] = "flow_node_start"
    run_id: str
    node_id: str
    node_kind: str | None = None


class FlowNodeEnd(BaseModel):
    """A node of a flow run ended with `status`."""

    type: Literal["flow_node_end"] = "flow_node_end"
    run_id: str
    node_id: str
    status: FlowStatus


class ToolNode(BaseModel):
    """A flow node that calls a tool: its tool name and arguments (opaque JSON)."""

    type: Literal["tool_node"] = "tool_node"
    run_id: str
    node_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class TurnStart(BaseModel):
    """A turn started."""

    type: Literal["turn_start"] = "turn_start"
    turn_id: str


class TurnEnd(BaseModel):
    """A turn ended; `stop_reason` is the agent's reason when it gave one."""

    type: Literal["turn_end"] = "turn_end"
    turn_id: str
    stop_reason: str | None = None


class LlmCall(BaseModel):
    """One completed model call: model, token usage, duration and stop reason."""

    type: Literal["llm_call"] = "llm_call"
    call_id: str
    model: str
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    duration_ms: NonNegativeInt | None = None
    stop_reason: str | None = None


class LlmPartialCall(BaseModel):
    """A model call that stopped before completing (`reason`), with the usage so far."""

    type: Literal["llm_partial_call"] = "llm_partial_call"
    turn_id: str | None = None
    flow_run_id: str | None = None
    call_id: str
    model: str
    reason: str
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0


# --- messages --------------------------------------------------------------------------------


class _ConversationMessage(BaseModel):
    # The four message events share these fields.
    turn_id: str
    flow_run_id: str | None = None
    message: Message


class UserMsg(_ConversationMessage):
    """A user message; `flow_run_id` is set when a flow owns the conversation."""

    type: Literal["user_msg"] = "user_msg"


class AssistantMsg(_ConversationMessage):
    """An assistant message; `flow_run_id` is set when a flow owns the conversation."""

    type: Literal["assistant_msg"] = "assistant_msg"


class ToolResultMsg(_ConversationMessage):
    """A tool-result message; `flow_run_id` is set when a flow owns the conversation."""

    type: Literal["tool_result_msg"] = "tool_result_msg"


class SystemMsg(_ConversationMessage):
    """A system message; `flow_run_id` is set when a flow owns the conversation."""

    type: Literal["system_msg"] = "system_msg"


class UserInject(BaseModel):
    """Text the user injected into a running turn."""

    type: Literal["user_inject"] = "user_inject"
    turn_id: str
    text: str


class ToolResultMetrics(BaseModel):
    """Measurements of one tool call: duration, output size, whether it failed."""

    type: Literal["tool_result_metrics"] = "tool_result_metrics"
    turn_id: str
    flow_run_id: str | None = None
    tool_call_id: str
    tool_name: str
    duration_ms: NonNegativeInt
    output_bytes: NonNegativeInt | None = None
    is_error: bool = False


class DiffPreview(BaseModel):
    """A proposed edit of `path`, shown as a unified `diff` before it is applied."""

    type: Literal["diff_preview"] = "diff_preview"
    turn_id: str | None = None
    flow_run_id: str | None = None
    path: str
    diff: str


class FileEditApplied(BaseModel):
    """An edit of `path` was applied, with its added and removed line counts."""

    type: Literal["file_edit_applied"] = "file_edit_applied"
    turn_id: str | None = None
    flow_run_id: str | None = None
    path: str
    added_lines: NonNegativeInt = 0
    removed_lines: NonNegativeInt = 0


class AttachmentDegraded(BaseModel):
    """An attachment could not be passed on as it was (`reason`), e.g. it was too large."""

    type: Literal["attachment_degraded"] = "attachment_degraded"
    turn_id: str | None = None
    flow_run_id: str | None = None
    file_basename: str
    reason: str


# --- context management ----------------------------------------------------------------------


class CompactionSummary(BaseModel):
    """The summary that replaced messages `range_start..range_end` of the context."""

    type: Literal["compaction_summary"] = "compaction_summary"
    session_id: str
    flow_run_id: str | None = None
    range_start: NonNegativeInt
    range_end: NonNegativeInt
    compacted_count: NonNegativeInt
    before_tokens: NonNegativeInt
    after_tokens: NonNegativeInt
    summary: str


class ContextCompact(BaseModel):
    """The context was compacted; `replacement_msg_seq` is the seq of the replacing message."""

    type: Literal["context_compact"] = "context_compact"
    session_id: str
    flow_run_id: str | None = None
    before_tokens: NonNegativeInt
    after_tokens: NonNegativeInt
    compacted_range_start: NonNegativeInt
    compacted_range_end: NonNegativeInt
    summary_text: str | None = None
    replacement_msg_seq: NonNegativeInt | None = None


class Checkpoint(BaseModel):
    """The messages of the context window at a point, and its size in tokens."""

    type: Literal["checkpoint"] = "checkpoint"
    session_id: str
    flow_run_id: str | None = None
    messages: list[Message]
    window_tokens: NonNegativeInt


class ContextTruncated(BaseModel):
    """Messages were dropped to fit the context window: token counts and how many dropped."""

    type: Literal["context_truncated"] = "context_truncated"
    turn_id: str | None = None
    flow_run_id: str | None = None
    before_tokens: NonNegativeInt
    after_tokens: NonNegativeInt
    dropped_messages: NonNegativeInt


class ContentFilterHit(BaseModel):
    """The provider's content filter stopped or altered output: its `category` and detail."""

    type: Literal["content_filter_hit"] = "content_filter_hit"
    turn_id: str | None = None
    flow_run_id: str | None = None
    category: str
    detail: str | None = None


class WatchWarn(BaseModel):
    """A warning from a watcher (loop, budget, stall) with its human-readable `message`."""

    type: Literal["watch_warn"] = "watch_warn"
    turn_id: str | None = None
    flow_run_id: str | None = None
    message: str


# --- prompts and deferred forms --------------------------------------------------------------


class PendingPrompt(BaseModel):
    """A question (`prompt`) waits for the user's answer until `expires_at` (None: no limit)."""

    type: Literal["pending_prompt"] = "pending_prompt"
    prompt_id: str
    prompt: str
    expires_at: AwareDatetime | None = None


class PromptExpired(BaseModel):
    """A pending prompt expired unanswered."""

    type: Literal["prompt_expired"] = "prompt_expired"
    prompt_id: str


class PromptResolved(BaseModel):
    """A pending prompt was resolved; `answer` is None when it was dismissed."""

    type: Literal["prompt_resolved"] = "prompt_resolved"
    prompt_id: str
    answer: str | None = None


class DeferredFormRecorded(BaseModel):
    """A form's `values` (opaque JSON) were recorded to be applied later."""

    type: Literal["deferred_form_recorded"] = "deferred_form_recorded"
    form_id: str
    values: dict[str, Any] = Field(default_factory=dict)


class DeferredFormApplied(BaseModel):
    """A recorded form was applied as `message`, in the message's turn."""

    type: Literal["deferred_form_applied"] = "deferred_form_applied"
    form_id: str
    message: Message


# --- tool approval and permissions -----------------------------------------------------------


class ToolPendingApproval(BaseModel):
    """A flow run's tool call waits for approval; `arguments` are opaque JSON."""

    type: Literal["tool_pending_approval"] = "tool_pending_approval"
    run_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolApproved(BaseModel):
    """A flow run's pending tool call was approved."""

    type: Literal["tool_approved"] = "tool_approved"
    run_id: str
    tool_call_id: str


class ToolDenied(BaseModel):
    """A flow run's pending tool call was denied, with the `reason` when one was given."""

    type: Literal["tool_denied"] = "tool_denied"
    run_id: str
    tool_call_id: str
    reason: str | None = None


class _PermissionRequestEvent(BaseModel):
    # The six permission request events carry the same audit payload.
    payload: PermissionRequestPayload


class PermissionRequestCreated(_PermissionRequestEvent):
    """A permission request was created."""

    type: Literal["permission_request_created"] = "permission_request_created"


class PermissionRequestTargeted(_PermissionRequestEvent):
    """A permission request was routed to whoever decides it."""

    type: Literal["permission_request_targeted"] = "permission_request_targeted"


class PermissionRequestDeferred(_PermissionRequestEvent):
    """A permission request's decision was deferred."""

    type: Literal["permission_request_deferred"] = "permission_request_deferred"


class PermissionRequestApproved(_PermissionRequestEvent):
    """A permission request was approved."""

    type: Literal["permission_request_approved"] = "permission_request_approved"


class PermissionRequestDenied(_PermissionRequestEvent):
    """A permission request was denied."""

    type: Literal["permission_request_denied"] = "permission_request_denied"


class PermissionRequestCancelled(_PermissionRequestEvent):
    """A permission request was cancelled before a decision."""

    type: Literal["permission_request_cancelled"] = "permission_request_cancelled"


class _PermissionGroupEvent(BaseModel):
    # The three permission group events carry the same audit payload.
    payload: PermissionGroupPayload


class PermissionGroupCreated(_PermissionGroupEvent):
    """A permission group was created."""

    type: Literal["permission_group_created"] = "permission_group_created"


class PermissionGroupUpdated(_PermissionGroupEvent):
    """A permission group changed (requests added or removed)."""

    type: Literal["permission_group_updated"] = "permission_group_updated"


class PermissionGroupResolved(_PermissionGroupEvent):
    """A permission group was resolved (`payload.resolution`)."""

    type: Literal["permission_group_resolved"] = "permission_group_resolved"


class PermissionGrantCreated(BaseModel):
    """A standing permission grant was given to a flow run."""

    type: Literal["permission_grant_created"] = "permission_grant_created"
    payload: PermissionGrantPayload


class PermissionGrantExpired(BaseModel):
    """A standing permission grant expired."""

    type: Literal["permission_grant_expired"] = "permission_grant_expired"
    payload: PermissionGrantPayload


class UnrestrictedExecution(BaseModel):
    """A flow run was allowed to execute without permission checks."""

    type: Literal["unrestricted_execution"] = "unrestricted_execution"
    payload: UnrestrictedExecutionPayload


# --- terminals and diagrams ------------------------------------------------------------------


class TerminalFinalState(BaseModel):
    """A terminal's command finished: exit code or signal, and the tail of its output."""

    type: Literal["terminal_final_state"] = "terminal_final_state"
    terminal_id: str
    command: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    output_tail: str = ""


class MermaidDiagram(BaseModel):
    """A Mermaid diagram (`source`) shown to the user, with an optional title."""

    type: Literal["mermaid_diagram"] = "mermaid_diagram"
    title: str | None = None
    source: str


# --- the union and the envelope --------------------------------------------------------------

JournalEvent = Annotated[
    FlowStart
    | FlowEnd
    | WorkspaceLifecycle
    | LlmCall
    | TurnStart
    | TurnEnd
    | UserMsg
    | AssistantMsg
    | ToolResultMsg
    | ToolResultMetrics
    | DiffPreview
    | FileEditApplied
    | CompactionSummary
    | SystemMsg
    | UserInject
    | ContentFilterHit
    | ContextCompact
    | Checkpoint
    | ContextTruncated
    | WatchWarn
    | PendingPrompt
    | PromptExpired
    | PromptResolved
    | DeferredFormRecorded
    | DeferredFormApplied
    | LlmPartialCall
    | FlowGraph
    | FlowNodeStart
    | FlowNodeEnd
    | ToolNode
    | AttachmentDegraded
    | ToolPendingApproval
    | ToolApproved
    | ToolDenied
    | PermissionRequestCreated
    | PermissionRequestTargeted
    | PermissionRequestDeferred
    | PermissionRequestApproved
    | PermissionRequestDenied
    | PermissionRequestCancelled
    | PermissionGroupCreated
    | PermissionGroupUpdated
    | PermissionGroupResolved
    | PermissionGrantCreated
    | PermissionGrantExpired
    | UnrestrictedExecution
    | TerminalFinalState
    | MermaidDiagram,
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

    seq: NonNegativeInt
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
