"""Messages and the payloads journal events share (pure, no I/O)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
)

from ..content_blocks import ContentBlock

# --- messages and shared payloads ------------------------------------------------------------


class MessageRole(StrEnum):
    """Who a journal message is from."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"


class MessageBlock(ContentBlock):
    """One content block of a journal message: `{"type": "text", "text": ...}`; other block
    types (tool use, images, ...) are kept as opaque JSON (their fields are preserved as
    extras). The text-block rule is `ContentBlock`'s."""

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
