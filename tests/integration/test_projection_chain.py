"""Applying a relay chain: every violation is `ChainBroken` or `InvalidRecord` and changes
nothing; any split into pages, with re-deliveries, gives the same result as one page."""

from __future__ import annotations

import itertools
import threading
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_journal import ApiEventFilter, ChainBroken, InvalidRecord, SessionNotFound, Store
from session_journal.relay import (
    AgentMessage,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ControlCommand,
    ElicitationRequest,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    PromptOutcome,
    RelayEvent,
    RelayObservation,
    RuntimeFault,
    relay_event_digest,
)
from tests.factories import RelayChainFactory, SessionFactory, relay_turn
from tests.helpers import all_events

pytestmark = pytest.mark.both_apis


@pytest.fixture
def applied(store: Store) -> tuple[Store, list[RelayEvent]]:
    """A session with one turn applied (ordinals 1-3)."""
    store.sessions.save(SessionFactory(id="session-1"))
    events = RelayChainFactory()
    store.projection.apply("session-1", events)
    return store, events


def unchanged(store: Store, events: list[RelayEvent]) -> None:
    current = store.projection.load("session-1")
    assert current is not None
    assert (current.applied_event_ordinal, current.applied_event_digest) == (3, events[2].digest)
    assert len(all_events(store)) == 2


def next_event(events: list[RelayEvent], **changes: Any) -> RelayEvent:
    [event] = RelayChainFactory(
        ordinal=3,
        digest=events[2].digest,
        observations=[AgentMessage(message_id="m", text="hello")],
        recorded_at_ms=200,
    )
    return event.model_copy(update=changes)


def test_a_gap_is_chain_broken(applied: tuple[Store, list[RelayEvent]]) -> None:
    store, events = applied
    event = next_event(events, ordinal=5)
    event = event.model_copy(update={"digest": relay_event_digest(event)})
    with pytest.raises(ChainBroken, match="ordinal 5: gap after applied ordinal 3"):
        store.projection.apply("session-1", [event])
    unchanged(store, events)


def test_a_wrong_previous_digest_is_chain_broken(applied: tuple[Store, list[RelayEvent]]) -> None:
    store, events = applied
    event = next_event(events, previous_digest=events[1].digest)
    event = event.model_copy(update={"digest": relay_event_digest(event)})
    with pytest.raises(ChainBroken, match="previous digest"):
        store.projection.apply("session-1", [event])
    unchanged(store, events)


def test_a_wrong_digest_is_chain_broken(applied: tuple[Store, list[RelayEvent]]) -> None:
    store, events = applied
    with pytest.raises(ChainBroken, match="digest does not match the event"):
        store.projection.apply("session-1", [next_event(events, recorded_at_ms=201)])
    unchanged(store, events)


def test_a_different_event_at_the_frontier_is_chain_broken(
    applied: tuple[Store, list[RelayEvent]],
) -> None:
    store, events = applied
    other = RelayChainFactory(observations=relay_turn("refusal"))[2]
    with pytest.raises(ChainBroken, match="ordinal 3 was applied with digest"):
        store.projection.apply("session-1", [other])
    unchanged(store, events)


def test_an_unknown_format_is_chain_broken(applied: tuple[Store, list[RelayEvent]]) -> None:
    store, events = applied
    event = next_event(events, format=2)
    event = event.model_copy(update={"digest": relay_event_digest(event)})
    with pytest.raises(ChainBroken, match="unknown format 2"):
        store.projection.apply("session-1", [event])
    unchanged(store, events)


def test_a_broken_event_rolls_back_the_valid_ones_before_it(
    applied: tuple[Store, list[RelayEvent]],
) -> None:
    store, events = applied
    good = RelayChainFactory(ordinal=3, digest=events[2].digest, recorded_at_ms=300)
    bad = good[2].model_copy(update={"digest": "0" * 64})
    with pytest.raises(ChainBroken):
        store.projection.apply("session-1", [*good[:2], bad])
    unchanged(store, events)


def raw_event(observation: Any, events: list[RelayEvent]) -> RelayEvent:
    return RelayEvent.model_construct(
        format=1,
        ordinal=4,
        previous_digest=events[2].digest,
        digest="x",
        recorded_at_ms=1,
        command_id=None,
        observation=observation,
    )


@pytest.mark.parametrize(
    ("observation", "message"),
    [
        ({"type": "mystery"}, "does not match any of the expected tags"),
        ({"type": "agent_message", "message_id": "m"}, "text"),
        (
            ElicitationRequested.model_construct(
                type="elicitation_requested",
                # Not a request (an immutable value is only made validated): what it was made of.
                request={
                    "id": "q",
                    "session_id": "session-1",
                    "mode": "form",
                    "message": "Where?",
                    "requested_schema": {
                        "type": "object",
                        "properties": {"place": {"type": "object", "properties": {}}},
                    },
                },
            ),
            "nested objects and arrays are not supported",
        ),
    ],
)
def test_bad_observations_are_invalid_records(
    applied: tuple[Store, list[RelayEvent]], observation: Any, message: str
) -> None:
    store, events = applied
    with pytest.raises(InvalidRecord, match=message):
        store.projection.apply("session-1", [raw_event(observation, events)])
    unchanged(store, events)


def test_bad_arguments(applied: tuple[Store, list[RelayEvent]]) -> None:
    store, events = applied
    with pytest.raises(SessionNotFound, match="'ghost'"):
        store.projection.apply("ghost", events)
    with pytest.raises(InvalidRecord, match="invalid id"):
        store.projection.apply("../x", events)
    with pytest.raises(InvalidRecord, match="events must be a sequence"):
        store.projection.apply("session-1", "not events")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match=r"events\[0\] must be a RelayEvent"):
        store.projection.apply("session-1", [{"ordinal": 4}])  # type: ignore[list-item]
    unchanged(store, events)


# The property: random observation sequences, split into random pages with re-deliveries.

COMMANDS = ["p1", "p2", "c1"]
QUESTIONS = ["q1", "q2"]


def question(elicitation_id: str) -> ElicitationRequest:
    return ElicitationRequest(
        id=elicitation_id,
        session_id="s",
        message=f"{elicitation_id}?",
        requested_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
    )


command_ids = st.sampled_from(COMMANDS)
kinds = st.sampled_from(["prompt", "begin_checkpoint", "complete_checkpoint", "cancel"])
observations: st.SearchStrategy[RelayObservation] = st.one_of(
    st.builds(
        lambda cid: CommandQueued(
            command_id=cid,
            command=PromptCommand(prompt=[{"type": "text", "text": cid}])  # type: ignore[list-item]
            if cid.startswith("p")
            else ControlCommand(kind="begin_checkpoint"),
            created_at_ms=1,
        ),
        command_ids,
    ),
    st.builds(lambda cid: CommandStarted(command_id=cid, started_at_ms=2), command_ids),
    st.builds(
        lambda cid, stop: CommandCompleted(command_id=cid, outcome=PromptOutcome(stop_reason=stop)),
        command_ids,
        st.sampled_from(["end_turn", "cancelled", "QuotaLimit"]),
    ),
    st.builds(
        lambda cid, kind: CommandRejected(command_id=cid, command=kind, message="no"),
        command_ids,
        kinds,
    ),
    st.builds(
        lambda cid, kind: CommandInterrupted(command_id=cid, command=kind, message="stop"),
        command_ids,
        kinds,
    ),
    st.builds(lambda qid: ElicitationRequested(request=question(qid)), st.sampled_from(QUESTIONS)),
    st.builds(
        lambda qid, action: ElicitationResolved(
            elicitation_id=qid, action=action, reply="yes" if action == "accept" else None
        ),
        st.sampled_from(QUESTIONS),
        st.sampled_from(["accept", "decline", "cancel"]),
    ),
    st.builds(lambda n: AgentMessage(message_id=f"m{n}", text=f"text {n}"), st.integers(0, 9)),
    st.just(RuntimeFault(reason="runtime_unavailable", message="gone")),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sequence=st.lists(observations, min_size=1, max_size=15),
    cuts=st.lists(st.integers(0, 15), max_size=5),
    overlaps=st.lists(st.integers(0, 3), min_size=6, max_size=6),
)
def test_any_split_with_redeliveries_equals_one_page(
    store: Store, sequence: list[RelayObservation], cuts: list[int], overlaps: list[int]
) -> None:
    run = uuid.uuid4().hex[:8]
    once, paged = f"once-{run}", f"paged-{run}"
    for session_id in (once, paged):
        store.sessions.save(SessionFactory(id=session_id))
    events = RelayChainFactory(observations=sequence)
    assert store.projection.apply(once, events) == len(events)

    bounds = sorted({0, len(events), *(cut for cut in cuts if cut < len(events))})
    applied = 0
    for index, (start, end) in enumerate(itertools.pairwise(bounds)):
        redelivered = max(0, start - overlaps[index % len(overlaps)])
        applied += store.projection.apply(paged, events[redelivered:end])
    assert applied == len(events)

    def outcome(session_id: str) -> tuple[Any, Any]:
        from tests.helpers import all_events as every

        feed = [
            (e.recorded_at_ms, e.event) for e in every(store, ApiEventFilter(session_id=session_id))
        ]
        state = store.projection.load(session_id)
        assert state is not None
        return feed, state.model_copy(update={"session_id": ""})

    assert outcome(paged) == outcome(once)


def test_two_controllers_applying_the_same_chain_at_once_apply_each_event_once(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url, upgrade=True) as first, Store.open(migrated_url) as second:
        first.sessions.save(SessionFactory(id="session-1"))
        events = RelayChainFactory(
            observations=[
                *(AgentMessage(message_id=f"m{n}", text=f"message {n}") for n in range(60)),
                *relay_turn(),
            ],
            recorded_at_ms=1,
        )
        barrier = threading.Barrier(2)
        applied: list[int] = []
        errors: list[BaseException] = []

        def deliver(store: Store) -> None:
            try:
                barrier.wait()
                for start in range(0, len(events), 7):
                    applied.append(store.projection.apply("session-1", events[: start + 7]))
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=deliver, args=(store,)) for store in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sum(applied) == len(events)
        assert [event.event.type for event in all_events(first)] == ["turn_started", "turn_ended"]
        loaded = first.projection.load("session-1")
        assert loaded is not None and loaded.applied_event_ordinal == len(events)
        assert [item.position for item in loaded.transcript] == list(range(61))
