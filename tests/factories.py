"""factory-boy factories: each kind of object the tests build is built here.

Records and activity snapshots, API event bodies, checkpoint metadata, relay observations and
hash-chained relay events, journal events and envelopes. A test names the fields its scenario
is about and leaves the rest to the defaults below.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import factory

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    CheckpointMetadata,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    SessionFault,
    SessionRecord,
    SessionState,
)
from session_journal.api_events import OutcomeReason
from session_journal.journal import (
    AssistantMsg,
    FlowStart,
    JournalEnvelope,
    Message,
    MessageRole,
    UserMsg,
)
from session_journal.relay import (
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    ContentBlock,
    PromptCommand,
    PromptOutcome,
    RelayChain,
    RelayObservation,
)

# Records


class CheckpointMetadataFactory(factory.Factory):
    """The metadata of a checkpoint archive that covers no event yet."""

    class Meta:
        model = CheckpointMetadata

    class Params:
        name = "archive"

    archive_path = factory.LazyAttribute(lambda o: f"/archives/{o.name}.tar")
    sha256 = "a" * 64
    created_at = "2026-09-27T12:00:00Z"
    event_frontier = 0


class SessionFactory(factory.Factory):
    """A running session in the default workspace."""

    class Meta:
        model = SessionRecord

    id = factory.Sequence(lambda n: f"session-{n + 1}")
    project_id = "project-1"
    workspace_id = "default"
    state = SessionState.RUNNING


class ActivityDetailsFactory(factory.Factory):
    """Idle since 100 ms; `turn=True`: a turn started at 1 ms, last active at 2 ms."""

    class Meta:
        model = ApiActivityDetails

    class Params:
        turn = factory.Trait(
            kind=ApiActivityKind.TURN,
            idle_since_ms=None,
            turn_started_at_ms=1,
            last_activity_at_ms=2,
        )

    kind = ApiActivityKind.IDLE
    idle_since_ms = 100


class ActivityFactory(factory.Factory):
    """An idle activity snapshot; `busy=True`: running a turn (`ActivityDetailsFactory`)."""

    class Meta:
        model = ApiActivityState

    class Params:
        busy = factory.Trait(
            is_idle=False, details=factory.SubFactory(ActivityDetailsFactory, turn=True)
        )

    state = "running"
    details = factory.SubFactory(ActivityDetailsFactory)
    is_idle = True
    waiting_for_input = False
    capacity_retry = False


# API event bodies


class SessionFaultFactory(factory.Factory):
    """A startup fault (`reason=...` for another kind of fault)."""

    class Meta:
        model = SessionFault

    reason = OutcomeReason.STARTUP_FAILED
    message = factory.Sequence(lambda n: f"fault {n + 1}")


class CommandResultFactory(factory.Factory):
    """A checkpoint command of the daemon that succeeded."""

    class Meta:
        model = CommandResult

    owner = CommandOwner.DAEMON
    command_id = factory.Sequence(lambda n: f"command-{n + 1}")
    command_kind = "checkpoint"
    outcome = CommandResultKind.SUCCEEDED
    reason = None
    message = None
    related_command_ids = factory.LazyFunction(list)


class CommandEndedFactory(factory.Factory):
    """The end of a command: its result's `command_id`, `outcome`, `reason`, `message` and
    `related_command_ids` are given as they are to `CommandResultFactory`."""

    class Meta:
        model = CommandEnded

    class Params:
        command_id = factory.Sequence(lambda n: f"command-{n + 1}")
        outcome = CommandResultKind.SUCCEEDED
        reason = None
        message = None
        related_command_ids = factory.LazyFunction(list)

    result = factory.SubFactory(
        CommandResultFactory,
        command_id=factory.SelfAttribute("..command_id"),
        outcome=factory.SelfAttribute("..outcome"),
        reason=factory.SelfAttribute("..reason"),
        message=factory.SelfAttribute("..message"),
        related_command_ids=factory.SelfAttribute("..related_command_ids"),
    )


# Relay observations and chains


class CommandQueuedFactory(factory.Factory):
    """A prompt queued as command `prompt-1`."""

    class Meta:
        model = CommandQueued

    class Params:
        text = "Fix the test"

    command_id = "prompt-1"
    command = factory.LazyAttribute(
        lambda o: PromptCommand(prompt=[ContentBlock(type="text", text=o.text)])
    )
    created_at_ms = 1


class CommandStartedFactory(factory.Factory):
    """Command `prompt-1` started."""

    class Meta:
        model = CommandStarted

    command_id = "prompt-1"
    started_at_ms = 2


class CommandCompletedFactory(factory.Factory):
    """Command `prompt-1` completed (`stop_reason=...`, `end_turn` by default)."""

    class Meta:
        model = CommandCompleted

    class Params:
        stop_reason = "end_turn"

    command_id = "prompt-1"
    outcome = factory.LazyAttribute(lambda o: PromptOutcome(stop_reason=o.stop_reason))


def relay_turn(stop_reason: str = "end_turn") -> list[RelayObservation]:
    """The observations of one turn: a prompt queued, started and completed."""
    return [
        CommandQueuedFactory(),
        CommandStartedFactory(),
        CommandCompletedFactory(stop_reason=stop_reason),
    ]


class RelayChainFactory(factory.Factory):
    """The hash-chained relay events of `observations` (one turn by default), recorded at
    100 ms, continuing a chain at `ordinal` and `digest` (the start by default)."""

    class Meta:
        model = RelayChain

    ordinal = 0
    digest = ""
    observations = factory.LazyFunction(relay_turn)
    recorded_at_ms = 100

    @classmethod
    def _create(cls, model_class: type[RelayChain], *args: Any, **kwargs: Any) -> Any:
        observations, recorded_at_ms = kwargs.pop("observations"), kwargs.pop("recorded_at_ms")
        return model_class(**kwargs).extend(observations, recorded_at_ms=recorded_at_ms)

    _build = _create


# Journal events and envelopes

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
"""The time of the journal envelope of seq 0; seq n is n seconds later."""


class FlowStartFactory(factory.Factory):
    """The start of flow run `run-<n>`."""

    class Meta:
        model = FlowStart

    class Params:
        n = factory.Sequence(lambda n: n + 1)

    run_id = factory.LazyAttribute(lambda o: f"run-{o.n}")
    flow_name = factory.LazyAttribute(lambda o: f"flow_{o.n}")


def _message(role: MessageRole) -> Any:
    return factory.LazyAttribute(lambda o: Message.from_text(o.turn_id, role, o.text))


class UserMsgFactory(factory.Factory):
    """A user message of turn `turn-1` in flow run `run-1`."""

    class Meta:
        model = UserMsg

    class Params:
        text = "hello"

    turn_id = "turn-1"
    flow_run_id = "run-1"
    message = _message(MessageRole.USER)


class AssistantMsgFactory(factory.Factory):
    """An assistant message of turn `turn-1`, outside any flow run."""

    class Meta:
        model = AssistantMsg

    class Params:
        text = "hello"

    turn_id = "turn-1"
    flow_run_id = None
    message = _message(MessageRole.ASSISTANT)


class JournalEnvelopeFactory(factory.Factory):
    """The envelope of `event` (a flow start named after the seq by default) at seq `seq`,
    `seq` seconds after `T0`."""

    class Meta:
        model = JournalEnvelope

    seq = factory.Sequence(lambda n: n + 1)
    ts = factory.LazyAttribute(lambda o: T0 + timedelta(seconds=o.seq))
    event = factory.LazyAttribute(lambda o: FlowStartFactory(n=o.seq))


def flow_start(seq: int) -> JournalEnvelope:
    """The envelope of seq `seq`: the start of flow run `run-<seq>`."""
    return JournalEnvelopeFactory(seq=seq)


def user_msg(seq: int, text: str, turn_id: str = "turn-1") -> JournalEnvelope:
    """The envelope of seq `seq`: a user message of `turn_id` saying `text`."""
    return JournalEnvelopeFactory(seq=seq, event=UserMsgFactory(text=text, turn_id=turn_id))


def assistant_msg(seq: int, text: str) -> JournalEnvelope:
    """The envelope of seq `seq`: an assistant message of turn `turn-1` saying `text`."""
    return JournalEnvelopeFactory(seq=seq, event=AssistantMsgFactory(text=text))
