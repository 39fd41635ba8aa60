"""Projection rules: one relay event -> new state, API events and transcript items (no I/O)."""

from __future__ import annotations

from ..api_events import (
    ApiEventData,
    ApiTurnOutcome,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    InputRequired,
    InputResolved,
    SessionFault,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from .observations import (
    AckOutcome,
    AgentMessage,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    RelayCommandKind,
    RelayEvent,
    RuntimeFault,
)
from .state import (
    ActiveTurn,
    AgentText,
    ElicitationReply,
    PendingQuestion,
    ProjectionState,
    System,
    TrackedCommand,
    TranscriptBody,
    TranscriptItem,
    UserPrompt,
)

_COMPLETED = {"end_turn", "max_tokens", "max_turn_requests", "refusal"}


def turn_result_kind(stop_reason: str) -> TurnResultKind:
    """A prompt's result from its stop reason (case-insensitive): `end_turn`, `max_tokens`,
    `max_turn_requests`, `refusal` complete; `cancelled` cancels; anything else failed."""
    reason = stop_reason.lower()
    if reason in _COMPLETED:
        return TurnResultKind.COMPLETED
    return TurnResultKind.CANCELLED if reason == "cancelled" else TurnResultKind.FAILED


class Projector:
    """Applies relay events in order to a `ProjectionState`, which it updates in place, and
    says which API events and transcript items each one yields."""

    def __init__(self, state: ProjectionState) -> None:
        self.state = state
        self._events: list[ApiEventData] = []
        self._items: list[TranscriptItem] = []

    def apply(self, event: RelayEvent) -> tuple[list[ApiEventData], list[TranscriptItem]]:
        """Project one event (already checked to follow the chain)."""
        self._events, self._items = [], []
        observation = event.observation
        match observation:
            case CommandQueued():
                self._queued(observation, event.ordinal)
            case CommandStarted():
                self._started(observation)
            case CommandCompleted():
                self._completed(observation)
            case CommandRejected() | CommandInterrupted():
                self._refused(observation, event.ordinal)
            case ElicitationRequested():
                self._asked(observation)
            case ElicitationResolved():
                self._answered(observation)
            case AgentMessage():
                self._item("agent:" + observation.message_id, AgentText(text=observation.text))
            case RuntimeFault():
                # A fault never rewrites the turn: a completed turn stays completed.
                self._events.append(
                    SessionFault(
                        reason=observation.reason,
                        message=observation.message,
                        command_id=event.command_id,
                    )
                )
        return self._events, self._items

    def _queued(self, observation: CommandQueued, ordinal: int) -> None:
        command = observation.command
        self.state.commands[observation.command_id] = TrackedCommand(
            kind=RelayCommandKind(command.kind), accepted_ordinal=ordinal
        )
        if isinstance(command, PromptCommand):
            self._item("prompt:" + observation.command_id, UserPrompt(content=command.prompt))

    def _started(self, observation: CommandStarted) -> None:
        tracked = self.state.commands.get(observation.command_id)
        if tracked is None or tracked.kind is not RelayCommandKind.PROMPT:
            return  # control commands never start a turn; unknown ones are not ours to start
        self.state.active_turn = ActiveTurn(
            command_id=observation.command_id,
            accepted_ordinal=tracked.accepted_ordinal,
            started_at_ms=observation.started_at_ms,
        )
        self._events.append(
            TurnStarted(
                turn_id=tracked.accepted_ordinal,
                command_id=observation.command_id,
                started_at_ms=observation.started_at_ms,
            )
        )

    def _completed(self, observation: CommandCompleted) -> None:
        kind = self._kind(observation.command_id, observation.command)
        if kind is None:
            return
        if kind is not RelayCommandKind.PROMPT:
            self._command_ended(observation.command_id, kind, CommandResultKind.SUCCEEDED)
            return
        outcome = observation.outcome
        if isinstance(outcome, AckOutcome):
            self._turn_ended(observation.command_id, TurnOutcome(kind=TurnResultKind.COMPLETED))
            return
        self._turn_ended(
            observation.command_id,
            TurnOutcome(
                kind=turn_result_kind(outcome.stop_reason),
                stop_reason=outcome.stop_reason,
                message=outcome.diagnostic,
            ),
        )

    def _refused(self, observation: CommandRejected | CommandInterrupted, ordinal: int) -> None:
        rejected = isinstance(observation, CommandRejected)
        if observation.command is RelayCommandKind.PROMPT:
            kind = TurnResultKind.REJECTED if rejected else TurnResultKind.INTERRUPTED
            outcome = TurnOutcome(kind=kind, reason=observation.reason, message=observation.message)
            self._turn_ended(observation.command_id, outcome)
            return
        self._command_ended(
            observation.command_id,
            observation.command,
            CommandResultKind.FAILED if rejected else CommandResultKind.CANCELLED,
            observation,
        )
        if rejected:  # a failed control command is shown, never hidden
            self._item(f"system:{ordinal}", System(text=observation.message))

    def _asked(self, observation: ElicitationRequested) -> None:
        active = self.state.active_turn
        turn_id = active.accepted_ordinal if active else None
        self.state.pending.append(PendingQuestion(request=observation.request, turn_id=turn_id))
        self._events.append(InputRequired(request=observation.request, turn_id=turn_id))

    def _answered(self, observation: ElicitationResolved) -> None:
        question = next(
            (q for q in self.state.pending if q.request.id == observation.elicitation_id), None
        )
        if question is not None:
            self.state.pending.remove(question)
            turn_id = question.turn_id
        else:
            active = self.state.active_turn
            turn_id = active.accepted_ordinal if active else None
        self._events.append(
            InputResolved(
                elicitation_id=observation.elicitation_id,
                action=observation.action,
                turn_id=turn_id,
            )
        )
        if observation.reply is not None:
            reply = ElicitationReply(
                elicitation_id=observation.elicitation_id, text=observation.reply
            )
            self._item("elicitation-reply:" + observation.elicitation_id, reply)

    def _kind(self, command_id: str, reported: RelayCommandKind | None) -> RelayCommandKind | None:
        tracked = self.state.commands.get(command_id)
        return tracked.kind if tracked is not None else reported

    def _turn_ended(self, command_id: str, outcome: TurnOutcome) -> None:
        tracked = self.state.commands.pop(command_id, None)
        accepted = tracked.accepted_ordinal if tracked else None
        turn = ApiTurnOutcome(command_id=command_id, accepted_ordinal=accepted, outcome=outcome)
        self.state.last_turn_outcome = turn
        active = self.state.active_turn
        if active is not None and active.command_id == command_id:
            self.state.active_turn = None
        if accepted is not None:
            self.state.pending = [q for q in self.state.pending if q.turn_id != accepted]
        self._events.append(TurnEnded(turn=turn))

    def _command_ended(
        self,
        command_id: str,
        kind: RelayCommandKind,
        outcome: CommandResultKind,
        refusal: CommandRejected | CommandInterrupted | None = None,
    ) -> None:
        self.state.commands.pop(command_id, None)
        result = CommandResult(
            owner=CommandOwner.RELAY,
            command_id=command_id,
            command_kind=kind.value,
            outcome=outcome,
            reason=refusal.reason if refusal else None,
            message=refusal.message if refusal else None,
        )
        self._events.append(CommandEnded(result=result))

    def _item(self, stable_id: str, body: TranscriptBody) -> None:
        position = self.state.next_position
        self.state.next_position += 1
        self._items.append(TranscriptItem(stable_id=stable_id, position=position, body=body))
