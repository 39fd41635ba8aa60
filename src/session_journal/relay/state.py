"""Materialized sessions: the current state a relay chain projects to, and its transcript."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..api_events import ApiTurnOutcome
from ..content_blocks import ContentBlock
from ..elicitation import ElicitationRequest
from .observations import RelayCommandKind


class ActiveTurn(BaseModel):
    """The turn in progress: its prompt command and when it started."""

    command_id: str
    accepted_ordinal: int | None
    started_at_ms: int | None


class UserPrompt(BaseModel):
    """A prompt the user sent: the start of a turn."""

    type: Literal["user_prompt"] = "user_prompt"
    content: list[ContentBlock]


class AgentText(BaseModel):
    """Text from the agent."""

    type: Literal["agent_text"] = "agent_text"
    text: str


class System(BaseModel):
    """A system notice, such as a control command that failed."""

    type: Literal["system"] = "system"
    text: str


class ElicitationReply(BaseModel):
    """The user's answer to a question, as text."""

    type: Literal["elicitation_reply"] = "elicitation_reply"
    elicitation_id: str
    text: str


TranscriptBody = Annotated[
    UserPrompt | AgentText | System | ElicitationReply, Field(discriminator="type")
]
"""What a transcript item holds."""


class TranscriptItem(BaseModel):
    """One transcript entry; positions start at 0 and increase by 1."""

    stable_id: str
    position: int
    body: TranscriptBody

    @property
    def is_turn_start(self) -> bool:
        """Only a user prompt starts a turn."""
        return isinstance(self.body, UserPrompt)


class MaterializedSession(BaseModel):
    """A session's projected state at `applied_event_ordinal`."""

    session_id: str
    applied_event_ordinal: int = 0
    applied_event_digest: str = ""
    active_turn: ActiveTurn | None = None
    last_turn_outcome: ApiTurnOutcome | None = None
    pending_elicitations: list[ElicitationRequest] = Field(default_factory=list)
    transcript: list[TranscriptItem] = Field(default_factory=list)

    @property
    def latest_completed_turn_position(self) -> int | None:
        """Position of the user prompt that started the most recently ended turn."""
        if self.last_turn_outcome is None:
            return None
        stable_id = "prompt:" + self.last_turn_outcome.command_id
        for item in reversed(self.transcript):
            if item.stable_id == stable_id:
                return item.position
        return None


class TranscriptPage(BaseModel):
    """A page of a session's transcript, newest first (`projection.transcript`); go further back
    with `before_position=next_before_position`. `next_before_position` is the oldest returned
    position, else the `before_position` asked for (0 when none was): an empty page means
    nothing older."""

    session_id: str
    items: list[TranscriptItem]
    next_before_position: int


class TrackedCommand(BaseModel):
    """A queued command not yet finished (kept only while in flight)."""

    kind: RelayCommandKind
    accepted_ordinal: int


class PendingQuestion(BaseModel):
    """An open question and the turn it belongs to."""

    request: ElicitationRequest
    turn_id: int | None


class ProjectionState(BaseModel):
    """What applying the next relay event needs, stored in one row so that applying costs the
    same at any ordinal: in-flight commands only, open questions, and the next position."""

    active_turn: ActiveTurn | None = None
    last_turn_outcome: ApiTurnOutcome | None = None
    pending: list[PendingQuestion] = Field(default_factory=list)
    commands: dict[str, TrackedCommand] = Field(default_factory=dict)
    next_position: int = 0
