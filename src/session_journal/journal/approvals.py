"""Journal events of prompts, deferred forms, approvals, permissions and terminals (pure,
no I/O)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    Field,
)

from .payloads import (
    Message,
    PermissionGrantPayload,
    PermissionGroupPayload,
    PermissionRequestPayload,
    UnrestrictedExecutionPayload,
)

__all__ = [
    "DeferredFormApplied",
    "DeferredFormRecorded",
    "MermaidDiagram",
    "PendingPrompt",
    "PermissionGrantCreated",
    "PermissionGrantExpired",
    "PermissionGroupCreated",
    "PermissionGroupResolved",
    "PermissionGroupUpdated",
    "PermissionRequestApproved",
    "PermissionRequestCancelled",
    "PermissionRequestCreated",
    "PermissionRequestDeferred",
    "PermissionRequestDenied",
    "PermissionRequestTargeted",
    "PromptExpired",
    "PromptResolved",
    "TerminalFinalState",
    "ToolApproved",
    "ToolDenied",
    "ToolPendingApproval",
    "UnrestrictedExecution",
]
"""The journal event kinds this module defines (sorted): `journal.envelope` names each in the
union `JournalEvent` (in the seed's order), and `session_journal.journal` exports them from here;
`tests/unit/test_journal_kind_list.py` fails if a kind is missing from either."""

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
