"""The relay stream of a session and its projection into materialized state and API events.

Pure code: event and observation types, the digest, a chain builder and the projection rules.
`store.projection` applies events to the database.
"""

from ..content_blocks import ContentBlock
from ..elicitation import Accept, Cancel, Decline, ElicitationRequest, ElicitationResponse
from .chain import RelayChain
from .observations import (
    RELAY_EVENT_FORMAT,
    AckOutcome,
    AgentMessage,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ControlCommand,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    PromptOutcome,
    RelayCommand,
    RelayCommandKind,
    RelayCommandOutcome,
    RelayEvent,
    RelayObservation,
    RuntimeFault,
    relay_event_digest,
)
from .projection import Projector, turn_result_kind
from .state import (
    ActiveTurn,
    AgentText,
    ElicitationReply,
    MaterializedSession,
    System,
    TranscriptBody,
    TranscriptItem,
    TranscriptPage,
    UserPrompt,
)

__all__ = [
    "RELAY_EVENT_FORMAT",
    "Accept",
    "AckOutcome",
    "ActiveTurn",
    "AgentMessage",
    "AgentText",
    "Cancel",
    "CommandCompleted",
    "CommandInterrupted",
    "CommandQueued",
    "CommandRejected",
    "CommandStarted",
    "ContentBlock",
    "ControlCommand",
    "Decline",
    "ElicitationReply",
    "ElicitationRequest",
    "ElicitationRequested",
    "ElicitationResolved",
    "ElicitationResponse",
    "MaterializedSession",
    "Projector",
    "PromptCommand",
    "PromptOutcome",
    "RelayChain",
    "RelayCommand",
    "RelayCommandKind",
    "RelayCommandOutcome",
    "RelayEvent",
    "RelayObservation",
    "RuntimeFault",
    "System",
    "TranscriptBody",
    "TranscriptItem",
    "TranscriptPage",
    "UserPrompt",
    "relay_event_digest",
    "turn_result_kind",
]
