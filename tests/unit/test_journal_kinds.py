"""Journal events: every kind's tag, flat envelope JSON round trip, anchors and indexed text."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from session_journal.journal import (
    JOURNAL_EVENT_ADAPTER,
    JOURNAL_EVENT_KINDS,
    AssistantMsg,
    AttachmentDegraded,
    Checkpoint,
    CompactionSummary,
    ContentFilterHit,
    ContextCompact,
    ContextTruncated,
    DeferredFormApplied,
    DeferredFormRecorded,
    DiffPreview,
    FileEditApplied,
    FlowEnd,
    FlowGraph,
    FlowNodeEnd,
    FlowNodeStart,
    FlowStart,
    FlowStatus,
    JournalEnvelope,
    JournalEvent,
    LlmCall,
    LlmPartialCall,
    MermaidDiagram,
    Message,
    MessageRole,
    PendingPrompt,
    PermissionFlowOwner,
    PermissionGrantCreated,
    PermissionGrantExpired,
    PermissionGrantPayload,
    PermissionGroupCreated,
    PermissionGroupPayload,
    PermissionGroupResolved,
    PermissionGroupUpdated,
    PermissionRequestApproved,
    PermissionRequestCancelled,
    PermissionRequestCreated,
    PermissionRequestDeferred,
    PermissionRequestDenied,
    PermissionRequestPayload,
    PermissionRequestTargeted,
    PermissionSystemOwner,
    PermissionUserOwner,
    PromptExpired,
    PromptResolved,
    SystemMsg,
    TerminalFinalState,
    ToolApproved,
    ToolDenied,
    ToolNode,
    ToolPendingApproval,
    ToolResultMetrics,
    ToolResultMsg,
    TurnEnd,
    TurnStart,
    UnrestrictedExecution,
    UnrestrictedExecutionPayload,
    UserInject,
    UserMsg,
    WatchWarn,
    WorkspaceLifecycle,
    event_kind,
    extract_anchors,
    extract_text_content,
)

TURN = "turn-1"
RUN = "run-1"
SESSION = "session-1"
TS = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)


def msg(role: MessageRole, body: str, turn_id: str = TURN) -> Message:
    return Message.from_text(turn_id, role, body)


REQUEST = PermissionRequestPayload(
    request_id="req-1", requesting_run_id=RUN, permission="fs.write", target_run_id="run-9"
)
GROUP = PermissionGroupPayload(group_id="g-1", owner=PermissionFlowOwner(run_id=RUN))
GRANT = PermissionGrantPayload(
    grant_id="grant-1", requesting_run_id=RUN, permission="net", expires_at=TS
)
BOTH = (TURN, RUN)
FLOW = (None, RUN)
NONE = (None, None)
TURN_ONLY = (TURN, None)

# (kind, event, expected anchors, expected text content): one row per kind, the tags written
# out as the seed's `event_kind` has them, in its order.
ROWS: list[tuple[str, JournalEvent, tuple[str | None, str | None], str | None]] = [
    ("flow_start", FlowStart(run_id=RUN, flow_name="f", spawned=True), FLOW, None),
    (
        "flow_end",
        FlowEnd(run_id=RUN, flow_name="f", status=FlowStatus(kind="completed")),
        FLOW,
        None,
    ),
    ("workspace_lifecycle", WorkspaceLifecycle(run_id=RUN, phase="created", path="/w"), FLOW, None),
    ("llm_call", LlmCall(call_id="c", model="m", input_tokens=5, output_tokens=7), NONE, None),
    ("turn_start", TurnStart(turn_id=TURN), TURN_ONLY, None),
    ("turn_end", TurnEnd(turn_id=TURN, stop_reason="end_turn"), TURN_ONLY, None),
    ("user_msg", UserMsg(turn_id=TURN, message=msg(MessageRole.USER, "hello")), TURN_ONLY, "hello"),
    (
        "assistant_msg",
        AssistantMsg(turn_id=TURN, flow_run_id=RUN, message=msg(MessageRole.ASSISTANT, "hi")),
        BOTH,
        "hi",
    ),
    (
        "tool_result_msg",
        ToolResultMsg(turn_id=TURN, flow_run_id=RUN, message=msg(MessageRole.TOOL_RESULT, "ok")),
        BOTH,
        "ok",
    ),
    (
        "tool_result_metrics",
        ToolResultMetrics(turn_id=TURN, tool_call_id="tc", tool_name="ls", duration_ms=3),
        TURN_ONLY,
        None,
    ),
    ("diff_preview", DiffPreview(flow_run_id=RUN, path="a.py", diff="-a\n+b"), FLOW, None),
    (
        "file_edit_applied",
        FileEditApplied(turn_id=TURN, path="a.py", added_lines=1),
        TURN_ONLY,
        None,
    ),
    (
        "compaction_summary",
        CompactionSummary(
            session_id=SESSION,
            range_start=0,
            range_end=4,
            compacted_count=5,
            before_tokens=900,
            after_tokens=90,
            summary="we agreed",
        ),
        NONE,
        "we agreed",
    ),
    (
        "system_msg",
        SystemMsg(turn_id=TURN, message=msg(MessageRole.SYSTEM, "be brief")),
        TURN_ONLY,
        "be brief",
    ),
    ("user_inject", UserInject(turn_id=TURN, text="also this"), TURN_ONLY, None),
    (
        "content_filter_hit",
        ContentFilterHit(turn_id=TURN, flow_run_id=RUN, category="x"),
        BOTH,
        None,
    ),
    (
        "context_compact",
        ContextCompact(
            session_id=SESSION,
            flow_run_id=RUN,
            before_tokens=9,
            after_tokens=1,
            compacted_range_start=0,
            compacted_range_end=3,
            summary_text="s",
            replacement_msg_seq=4,
        ),
        FLOW,
        None,
    ),
    (
        "checkpoint",
        Checkpoint(session_id=SESSION, messages=[msg(MessageRole.USER, "m")], window_tokens=10),
        NONE,
        None,
    ),
    (
        "context_truncated",
        ContextTruncated(turn_id=TURN, before_tokens=9, after_tokens=2, dropped_messages=3),
        TURN_ONLY,
        None,
    ),
    ("watch_warn", WatchWarn(flow_run_id=RUN, message="looping"), FLOW, "looping"),
    ("pending_prompt", PendingPrompt(prompt_id="p", prompt="Proceed?", expires_at=TS), NONE, None),
    ("prompt_expired", PromptExpired(prompt_id="p"), NONE, None),
    ("prompt_resolved", PromptResolved(prompt_id="p", answer="yes"), NONE, None),
    (
        "deferred_form_recorded",
        DeferredFormRecorded(form_id="f", values={"a": [1, None]}),
        NONE,
        None,
    ),
    (
        "deferred_form_applied",
        DeferredFormApplied(form_id="f", message=msg(MessageRole.USER, "form", turn_id="turn-2")),
        ("turn-2", None),
        "form",
    ),
    (
        "llm_partial_call",
        LlmPartialCall(turn_id=TURN, flow_run_id=RUN, call_id="c", model="m", reason="cancelled"),
        BOTH,
        None,
    ),
    ("flow_graph", FlowGraph(run_id=RUN, graph={"nodes": ["a"], "edges": []}), FLOW, None),
    ("flow_node_start", FlowNodeStart(run_id=RUN, node_id="n", node_kind="llm"), FLOW, None),
    (
        "flow_node_end",
        FlowNodeEnd(run_id=RUN, node_id="n", status=FlowStatus(kind="cancelled", message="stop")),
        FLOW,
        None,
    ),
    (
        "tool_node",
        ToolNode(run_id=RUN, node_id="n", tool_name="ls", arguments={"p": "."}),
        FLOW,
        None,
    ),
    (
        "attachment_degraded",
        AttachmentDegraded(turn_id=TURN, file_basename="big.png", reason="too large"),
        TURN_ONLY,
        "big.png too large",
    ),
    (
        "tool_pending_approval",
        ToolPendingApproval(run_id=RUN, tool_call_id="tc", tool_name="rm"),
        FLOW,
        None,
    ),
    ("tool_approved", ToolApproved(run_id=RUN, tool_call_id="tc"), FLOW, None),
    ("tool_denied", ToolDenied(run_id=RUN, tool_call_id="tc", reason="no"), FLOW, None),
    ("permission_request_created", PermissionRequestCreated(payload=REQUEST), FLOW, None),
    ("permission_request_targeted", PermissionRequestTargeted(payload=REQUEST), FLOW, None),
    ("permission_request_deferred", PermissionRequestDeferred(payload=REQUEST), FLOW, None),
    ("permission_request_approved", PermissionRequestApproved(payload=REQUEST), FLOW, None),
    ("permission_request_denied", PermissionRequestDenied(payload=REQUEST), FLOW, None),
    ("permission_request_cancelled", PermissionRequestCancelled(payload=REQUEST), FLOW, None),
    ("permission_group_created", PermissionGroupCreated(payload=GROUP), FLOW, None),
    (
        "permission_group_updated",
        PermissionGroupUpdated(
            payload=PermissionGroupPayload(
                group_id="g-1", owner=PermissionUserOwner(session_id=SESSION), request_ids=["r"]
            )
        ),
        (None, f"user:{SESSION}"),
        None,
    ),
    (
        "permission_group_resolved",
        PermissionGroupResolved(
            payload=PermissionGroupPayload(
                group_id="g-1", owner=PermissionSystemOwner(), resolution="approved"
            )
        ),
        (None, "system"),
        None,
    ),
    ("permission_grant_created", PermissionGrantCreated(payload=GRANT), FLOW, None),
    ("permission_grant_expired", PermissionGrantExpired(payload=GRANT), FLOW, None),
    (
        "unrestricted_execution",
        UnrestrictedExecution(payload=UnrestrictedExecutionPayload(requesting_run_id=RUN)),
        FLOW,
        None,
    ),
    ("terminal_final_state", TerminalFinalState(terminal_id="t", exit_code=1), NONE, None),
    ("mermaid_diagram", MermaidDiagram(title="g", source="graph TD; a-->b"), NONE, None),
]
IDS = [row[0] for row in ROWS]


def test_the_table_and_the_union_cover_the_seeds_kinds_in_order() -> None:
    assert len(set(IDS)) == len(IDS) == 48
    assert list(JOURNAL_EVENT_KINDS) == IDS


@pytest.mark.parametrize(("kind", "event", "anchors", "text_content"), ROWS, ids=IDS)
def test_kind_anchors_and_text(
    kind: str,
    event: JournalEvent,
    anchors: tuple[str | None, str | None],
    text_content: str | None,
) -> None:
    assert event.type == kind
    assert event_kind(event) == kind
    assert extract_anchors(event) == anchors
    assert extract_text_content(event) == text_content


@pytest.mark.parametrize(("kind", "event"), [row[:2] for row in ROWS], ids=IDS)
def test_the_envelope_is_one_flat_json_object_and_round_trips(
    kind: str, event: JournalEvent
) -> None:
    envelope = JournalEnvelope(seq=7, ts=TS, event=event)
    flat = envelope.model_dump(mode="json")

    assert list(flat)[:3] == ["seq", "ts", "type"]
    assert (flat["seq"], flat["type"]) == (7, kind)
    assert datetime.fromisoformat(flat["ts"]) == TS
    assert set(flat) == {"seq", "ts", *type(event).model_fields}
    assert json.loads(envelope.model_dump_json()) == flat
    assert JournalEnvelope.model_validate(flat) == envelope
    assert JournalEnvelope.model_validate_json(envelope.model_dump_json()) == envelope
    assert JOURNAL_EVENT_ADAPTER.validate_python(event.model_dump(mode="json")) == event
