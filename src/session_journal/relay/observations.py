"""Relay events: the hash-chained observations a session's runtime emits (pure, no I/O)."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._json_text import canonical_json
from ..api_events import OutcomeReason
from ..content_blocks import ContentBlock
from ..elicitation import ElicitationRequest

RELAY_EVENT_FORMAT = 1


class RelayCommandKind(StrEnum):
    """What a relay command does."""

    PROMPT = "prompt"
    BEGIN_CHECKPOINT = "begin_checkpoint"
    COMPLETE_CHECKPOINT = "complete_checkpoint"
    CANCEL = "cancel"


class PromptCommand(BaseModel):
    """A prompt for the agent: starts a turn."""

    model_config = ConfigDict(revalidate_instances="always")

    kind: Literal["prompt"] = "prompt"
    prompt: list[ContentBlock]


class ControlCommand(BaseModel):
    """A control command (checkpoint barrier, cancel): never starts or ends a turn."""

    model_config = ConfigDict(revalidate_instances="always")

    kind: Literal["begin_checkpoint", "complete_checkpoint", "cancel"]


RelayCommand = Annotated[PromptCommand | ControlCommand, Field(discriminator="kind")]
"""A queued relay command."""


class PromptOutcome(BaseModel):
    """How a prompt ended, as the agent reported it."""

    model_config = ConfigDict(revalidate_instances="always")

    kind: Literal["prompt"] = "prompt"
    stop_reason: str
    usage: dict[str, Any] | None = None
    diagnostic: str | None = None


class AckOutcome(BaseModel):
    """A control command was carried out."""

    model_config = ConfigDict(revalidate_instances="always")

    kind: Literal["ack"] = "ack"


RelayCommandOutcome = Annotated[PromptOutcome | AckOutcome, Field(discriminator="kind")]
"""The result of a completed relay command."""


class CommandQueued(BaseModel):
    """The relay accepted a command; its ordinal is the command's accepted ordinal."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["command_queued"] = "command_queued"
    command_id: str
    command: RelayCommand
    created_at_ms: int


class CommandStarted(BaseModel):
    """The relay started a command."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["command_started"] = "command_started"
    command_id: str
    started_at_ms: int


class CommandCompleted(BaseModel):
    """A command finished with an outcome."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["command_completed"] = "command_completed"
    command_id: str
    command: RelayCommandKind | None = None
    barrier_command_id: str | None = None
    outcome: RelayCommandOutcome


class _CommandRefusal(BaseModel):
    model_config = ConfigDict(revalidate_instances="always")

    # The fields a refused and an interrupted command share (`type` first in the JSON form).
    type: str
    command_id: str
    command: RelayCommandKind
    reason: OutcomeReason | None = None
    message: str


class CommandRejected(_CommandRefusal):
    """The relay refused a command."""

    type: Literal["command_rejected"] = "command_rejected"


class CommandInterrupted(_CommandRefusal):
    """A command stopped before finishing (runtime stopped, controller lost)."""

    type: Literal["command_interrupted"] = "command_interrupted"


class ElicitationRequested(BaseModel):
    """The agent asks the user a question."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["elicitation_requested"] = "elicitation_requested"
    request: ElicitationRequest


class ElicitationResolved(BaseModel):
    """The question was answered, declined or cancelled; `reply` is the transcript text."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["elicitation_resolved"] = "elicitation_resolved"
    elicitation_id: str
    action: Literal["accept", "decline", "cancel"]
    reply: str | None = None


class AgentMessage(BaseModel):
    """Text from the agent."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["agent_message"] = "agent_message"
    message_id: str
    text: str


class RuntimeFault(BaseModel):
    """The session's runtime failed (`session_fault` is the earlier system's tag for it)."""

    model_config = ConfigDict(revalidate_instances="always")

    type: Literal["runtime_fault", "session_fault"] = "runtime_fault"
    reason: OutcomeReason
    message: str


RelayObservation = Annotated[
    CommandQueued
    | CommandStarted
    | CommandCompleted
    | CommandRejected
    | CommandInterrupted
    | ElicitationRequested
    | ElicitationResolved
    | AgentMessage
    | RuntimeFault,
    Field(discriminator="type"),
]
"""Any relay observation, discriminated by its `type` tag."""


class RelayEvent(BaseModel):
    """One link of a session's relay chain. `digest` and `previous_digest` may be any string
    here; `store.projection.apply` checks them."""

    model_config = ConfigDict(revalidate_instances="always")

    format: int = RELAY_EVENT_FORMAT
    ordinal: Annotated[int, Field(ge=1)]
    previous_digest: str
    digest: str
    recorded_at_ms: int
    command_id: str | None = None
    observation: RelayObservation


def relay_event_digest(event: RelayEvent) -> str:
    """Lowercase hex SHA-256 of the event's canonical JSON without its `digest` (sorted keys, no
    whitespace, non-ASCII kept, every field included)."""
    canonical = canonical_json(event.model_dump(mode="json", exclude={"digest"}))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
