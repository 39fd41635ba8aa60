"""Journal events of flows, turns, messages and context management (pure, no I/O)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    NonNegativeInt,
)

from .payloads import (
    FlowStatus,
    Message,
)

__all__ = [
    "AssistantMsg",
    "AttachmentDegraded",
    "Checkpoint",
    "CompactionSummary",
    "ContentFilterHit",
    "ContextCompact",
    "ContextTruncated",
    "DiffPreview",
    "FileEditApplied",
    "FlowEnd",
    "FlowGraph",
    "FlowNodeEnd",
    "FlowNodeStart",
    "FlowStart",
    "LlmCall",
    "LlmPartialCall",
    "SystemMsg",
    "ToolNode",
    "ToolResultMetrics",
    "ToolResultMsg",
    "TurnEnd",
    "TurnStart",
    "UserInject",
    "UserMsg",
    "WatchWarn",
    "WorkspaceLifecycle",
]
"""The journal event kinds this module defines (sorted): `journal.envelope` names each in the
union `JournalEvent` (in the seed's order), and `session_journal.journal` exports them from here;
`tests/unit/test_journal_kind_list.py` fails if a kind is missing from either."""

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
