"""Relay projection: the seed's scenarios and the exact API events each must produce."""

from __future__ import annotations

import pytest

from session_journal import (
    ApiEvent,
    ChainBroken,
    CommandEnded,
    CommandOwner,
    CommandResultKind,
    InputRequired,
    InputResolved,
    OutcomeReason,
    SessionFault,
    SessionState,
    Store,
    TurnEnded,
    TurnResultKind,
    TurnStarted,
)
from session_journal.relay import (
    Accept,
    CommandCompleted,
    CommandInterrupted,
    CommandRejected,
    ContentBlock,
    ElicitationRequest,
    ElicitationRequested,
    ElicitationResolved,
    RelayChain,
    RelayCommandKind,
    RelayObservation,
    RuntimeFault,
    System,
)
from tests.factories import RelayChainFactory, SessionFactory, relay_turn
from tests.helpers import all_events

pytestmark = pytest.mark.both_apis


@pytest.fixture
def session(store: Store) -> str:
    store.sessions.save(SessionFactory(id="session-1"))
    return "session-1"


def page(store: Store, chain: RelayChain, observations: list[RelayObservation]) -> int:
    return store.projection.apply("session-1", chain.extend(observations, recorded_at_ms=100))


def kinds(events: list[ApiEvent]) -> list[str]:
    return [event.event.type for event in events]


def test_a_failed_page_leaves_nothing_then_applies_once_and_survives_reopening(
    store: Store, session: str, migrated_url: str
) -> None:
    events = RelayChainFactory()
    tampered = events[2].model_copy(update={"recorded_at_ms": 101})  # digest no longer matches
    with pytest.raises(ChainBroken, match="digest does not match"):
        store.projection.apply(session, [*events[:2], tampered])
    assert all_events(store) == []
    loaded = store.projection.load(session)
    assert loaded is not None and loaded.applied_event_ordinal == 0 and loaded.transcript == []

    assert store.projection.apply(session, events) == 3
    first = store.events.load(after_seq=0, limit=1)
    assert kinds(first.events) == ["turn_started"]
    rest = store.events.load(after_seq=first.next_after_seq, limit=100)
    assert kinds(rest.events) == ["turn_ended"]
    assert [event.recorded_at_ms for event in all_events(store)] == [100, 100]
    current = store.projection.load(session)
    assert current is not None and current.active_turn is None
    assert current.applied_event_ordinal == 3 and current.applied_event_digest == events[2].digest

    # Re-delivering the committed frontier (or anything before it) adds nothing.
    assert store.projection.apply(session, [events[2]]) == 0
    assert store.projection.apply(session, events) == 0
    assert len(all_events(store)) == 2
    with Store.open(migrated_url) as reopened:
        assert reopened.projection.load(session) == current


def test_a_question_its_answer_and_the_completion(store: Store, session: str) -> None:
    request = ElicitationRequest.from_acp_params(
        "question-1",
        {
            "mode": "form",
            "sessionId": "session-1",
            "message": "Which directory?",
            "requestedSchema": {
                "type": "object",
                "properties": {"directory": {"type": "string"}},
                "required": ["directory"],
            },
        },
    )
    observations = relay_turn()
    observations[0].command.prompt.append(  # type: ignore[union-attr]
        ContentBlock(type="text", text="Inspect the chosen directory")
    )
    reply = request.reply_text(Accept(content={"directory": "src"}))
    observations[2:2] = [
        ElicitationRequested(request=request),
        ElicitationResolved(elicitation_id="question-1", action="accept", reply=reply),
    ]
    assert page(store, RelayChain(), observations) == 5
    record = SessionFactory(id="session-1", last_error="provisioning failed")
    store.sessions.save(record)
    store.sessions.save(record)

    events = all_events(store)
    assert kinds(events) == [
        "turn_started",
        "input_required",
        "input_resolved",
        "turn_ended",
        "session_fault",
    ]
    assert events[0].event == TurnStarted(turn_id=1, command_id="prompt-1", started_at_ms=2)
    assert events[1].event == InputRequired(request=request, turn_id=1)
    assert events[2].event == InputResolved(elicitation_id="question-1", action="accept", turn_id=1)
    current = store.projection.load(session)
    assert current is not None
    assert current.pending_elicitations == [] and current.active_turn is None
    replies = [
        item for item in current.transcript if item.stable_id.startswith("elicitation-reply:")
    ]
    assert [item.body.text for item in replies] == ["Which directory?\n\ndirectory: src"]  # type: ignore[union-attr]
    assert not replies[0].is_turn_start
    turn_start = next(item for item in current.transcript if item.is_turn_start)
    assert turn_start.stable_id == "prompt:prompt-1"
    assert current.latest_completed_turn_position == turn_start.position == 0
    assert [item.position for item in current.transcript] == [0, 1]
    assert current.last_turn_outcome is not None
    assert current.last_turn_outcome.accepted_ordinal == 1


def test_a_provider_error_is_a_failed_turn_that_keeps_its_command(
    store: Store, session: str
) -> None:
    page(store, RelayChain(), relay_turn("provider_error"))
    events = all_events(store)
    assert len(events) == 2
    ended = events[1].event
    assert isinstance(ended, TurnEnded)
    assert (ended.turn.command_id, ended.turn.accepted_ordinal) == ("prompt-1", 1)
    assert ended.turn.outcome.kind is TurnResultKind.FAILED
    assert ended.turn.outcome.stop_reason == "provider_error"


@pytest.mark.parametrize(
    ("terminal", "kind", "reason"),
    [
        (relay_turn("Cancelled")[2], TurnResultKind.CANCELLED, None),
        (relay_turn("QuotaLimit")[2], TurnResultKind.FAILED, None),
        (
            CommandRejected(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                reason=OutcomeReason.ADMISSION_REJECTED,
                message="unavailable",
            ),
            TurnResultKind.REJECTED,
            OutcomeReason.ADMISSION_REJECTED,
        ),
        (
            CommandInterrupted(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                reason=OutcomeReason.RUNTIME_STOPPED,
                message="runtime stopped",
            ),
            TurnResultKind.INTERRUPTED,
            OutcomeReason.RUNTIME_STOPPED,
        ),
    ],
)
def test_terminal_prompt_results_are_semantic_and_not_duplicate_error_events(
    store: Store,
    session: str,
    terminal: RelayObservation,
    kind: TurnResultKind,
    reason: OutcomeReason | None,
) -> None:
    page(store, RelayChain(), [*relay_turn()[:2], terminal])
    events = all_events(store)
    assert kinds(events) == ["turn_started", "turn_ended"]
    ended = events[1].event
    assert isinstance(ended, TurnEnded)
    assert ended.turn.command_id == "prompt-1"
    assert (ended.turn.outcome.kind, ended.turn.outcome.reason) == (kind, reason)


def test_a_runtime_fault_does_not_rewrite_a_completed_turn(store: Store, session: str) -> None:
    chain = RelayChain()
    page(store, chain, relay_turn())
    page(
        store,
        chain,
        [
            RuntimeFault(
                type="session_fault", reason="runtime_unavailable", message="runtime exited"
            )
        ],
    )
    events = all_events(store)
    assert kinds(events) == ["turn_started", "turn_ended", "session_fault"]
    assert events[2].event == SessionFault(
        reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited"
    )
    current = store.projection.load(session)
    assert current is not None and current.last_turn_outcome is not None
    assert current.last_turn_outcome.outcome.kind is TurnResultKind.COMPLETED


def test_checkpoint_cleanup_does_not_end_a_turn_or_hide_control_failure(
    store: Store, session: str
) -> None:
    chain = RelayChain()
    page(store, chain, relay_turn()[:2])
    for command_id, reason in [
        ("arbitrary-one", OutcomeReason.CONTROLLER_DISCONNECTED),
        ("arbitrary-two", OutcomeReason.OWNER_LOST_ON_RESTART),
    ]:
        page(
            store,
            chain,
            [
                CommandInterrupted(
                    command_id=command_id,
                    command=RelayCommandKind.BEGIN_CHECKPOINT,
                    reason=reason,
                    message="diagnostic wording is not a contract",
                )
            ],
        )
    page(
        store,
        chain,
        [
            CommandRejected(
                command_id="arbitrary-three",
                command=RelayCommandKind.COMPLETE_CHECKPOINT,
                reason=OutcomeReason.COMMAND_FAILED,
                message="Cannot save recovery floor",
            )
        ],
    )

    current = store.projection.load(session)
    assert current is not None
    assert current.active_turn is not None and current.last_turn_outcome is None
    texts = [item.body.text for item in current.transcript if isinstance(item.body, System)]
    assert texts == ["Cannot save recovery floor"]

    page(store, chain, [relay_turn()[2]])
    events = all_events(store)
    assert len(events) == 5
    for event, command_id in zip(events[1:3], ["arbitrary-one", "arbitrary-two"], strict=True):
        assert isinstance(event.event, CommandEnded)
        result = event.event.result
        assert (result.owner, result.command_id, result.command_kind, result.outcome) == (
            CommandOwner.RELAY,
            command_id,
            "begin_checkpoint",
            CommandResultKind.CANCELLED,
        )
    assert isinstance(events[3].event, CommandEnded)
    assert events[3].event.result.outcome is CommandResultKind.FAILED
    assert events[3].event.result.command_kind == "complete_checkpoint"
    assert isinstance(events[4].event, TurnEnded)
    assert events[4].event.turn.outcome.kind is TurnResultKind.COMPLETED


def test_a_completed_control_command_succeeds_without_touching_the_turn(
    store: Store, session: str
) -> None:
    chain = RelayChain()
    page(store, chain, relay_turn()[:2])
    page(
        store,
        chain,
        [
            CommandCompleted(
                command_id="barrier-1",
                command=RelayCommandKind.BEGIN_CHECKPOINT,
                outcome={"kind": "ack"},
            )
        ],
    )  # type: ignore[arg-type]
    events = all_events(store)
    assert kinds(events) == ["turn_started", "command_ended"]
    assert isinstance(events[1].event, CommandEnded)
    assert events[1].event.result.outcome is CommandResultKind.SUCCEEDED
    current = store.projection.load(session)
    assert current is not None and current.active_turn is not None


def test_loading_a_session_without_relay_events_and_an_unknown_one(
    store: Store, session: str
) -> None:
    loaded = store.projection.load(session)
    assert loaded is not None
    assert (loaded.applied_event_ordinal, loaded.applied_event_digest) == (0, "")
    assert loaded.latest_completed_turn_position is None
    assert store.projection.load("ghost") is None
    store.sessions.save(SessionFactory(id="session-1", state=SessionState.CLOSED))
    assert store.projection.load(session) == loaded
