"""Scenarios: processes racing for one session's checkpoint operation, and recovery after a
controller restart racing the owner's finish, round after round with random head starts.

(`tests/integration/test_checkpoint_races.py` forces each order of the recovery race with
threads; here separate processes race freely, as controllers on several hosts would.)

Every racer is its own process with its own store; the racers leave a barrier together, then
each waits a random 0-3 ms, so that the winner changes from round to round.

This proves, on SQLite and PostgreSQL, round after round:
- RACERS processes calling `checkpoints.begin` on one running session: exactly one opens the
  operation, every other one gets `LifecycleConflict`; the open operation is the winner's and
  the session is `checkpointing`;
- `checkpoints.recover_interrupted` in one process racing the owner's `save_requested` or
  `finish_failed` (failed or deferred) in another: exactly one of them ends the operation. If the
  owner's call reported success, the session is exactly what the owner saved, recovery did not
  count it, and the log has only the owner's `command_ended`; otherwise the owner's call
  returned `False` or raised `NotOperationOwner`, recovery counted the session, which is back to
  `running` with the interruption noted and its previous checkpoint, and the log has only the
  `cancelled` `command_ended`.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from session_journal import (
    ApiEventFilter,
    CheckpointOperation,
    CommandResultKind,
    OutcomeReason,
    SessionState,
    Store,
)
from tests.factories import CheckpointMetadataFactory, CommandEndedFactory, SessionFactory
from tests.helpers import bodies
from tests.reliability import children
from tests.reliability.harness import Workers, rounds

pytestmark = pytest.mark.reliability

RACERS = 4
LONGEST_HEAD_START_S = 0.003
RESTART = "2026-09-27T12:00:00Z"
NOTE = f"checkpoint interrupted by controller restart at {RESTART}"


def test_of_racing_begins_exactly_one_opens_the_operation(
    store: Store, migrated_url: str, workers: Workers, rng: random.Random
) -> None:
    barrier = workers.barrier(RACERS)
    racers = [workers.start(f"racer-{n}", migrated_url, barrier) for n in range(RACERS)]
    winners = Counter[int]()
    for round_ in range(rounds(4)):
        session = f"session-{round_}"
        store.sessions.save(SessionFactory(id=session))
        started = SessionFactory(id=session, state=SessionState.CHECKPOINTING)
        for n, racer in enumerate(racers):
            delay = rng.uniform(0, LONGEST_HEAD_START_S)
            racer.send(children.race_begin, started, f"attempt-{round_}-{n}", delay)
        results = [racer.receive() for racer in racers]

        assert sorted(results) == ["began"] + ["conflict"] * (RACERS - 1)
        winner = results.index("began")
        winners[winner] += 1
        assert store.checkpoints.get(session) == CheckpointOperation(
            session_id=session, command_id=f"attempt-{round_}-{winner}"
        )
        assert store.sessions.get(session) == started
        assert store.events.latest_seq() == 0
    for racer in racers:
        racer.stop()
    print(f"rounds won by each racer: {dict(winners)}")


OUTCOMES = {
    "succeeded": CommandEndedFactory(command_id="owner", outcome=CommandResultKind.SUCCEEDED),
    "failed": CommandEndedFactory(
        command_id="owner",
        outcome=CommandResultKind.FAILED,
        reason=OutcomeReason.CHECKPOINT_FAILED,
        message="failed by the owner",
    ),
    "deferred": CommandEndedFactory(
        command_id="owner",
        outcome=CommandResultKind.REJECTED,
        reason=OutcomeReason.CHECKPOINT_DEFERRED,
        message="deferred by the owner",
    ),
}


def test_recovery_racing_the_owners_finish_never_overrides_a_reported_outcome(
    store: Store, migrated_url: str, workers: Workers, rng: random.Random
) -> None:
    barrier = workers.barrier(2)
    owner = workers.start("owner", migrated_url, barrier)
    recoverer = workers.start("recoverer", migrated_url, barrier)
    tally = Counter[tuple[str, str]]()
    for round_ in range(rounds(12)):
        outcome = list(OUTCOMES)[round_ % len(OUTCOMES)]
        session = f"session-{round_}"
        previous = SessionFactory(id=session, checkpoint=CheckpointMetadataFactory(name="previous"))
        store.sessions.save(previous)
        store.checkpoints.begin(
            previous.model_copy(update={"state": SessionState.CHECKPOINTING}), "owner"
        )
        saved = previous.model_copy(
            update={
                "native_session_id": f"native-{round_}",
                "checkpoint": CheckpointMetadataFactory(name=f"new-{round_}")
                if outcome == "succeeded"
                else None,
                "last_checkpoint_error": "archive upload failed" if outcome == "failed" else None,
            }
        )

        owner.send(
            children.race_finish, outcome, saved, "owner", rng.uniform(0, LONGEST_HEAD_START_S)
        )
        recoverer.send(children.race_recover, RESTART, rng.uniform(0, LONGEST_HEAD_START_S))
        finished, recovered = owner.receive(), recoverer.receive()

        round_bodies = bodies(store, ApiEventFilter(session_id=session))
        if finished == "finished":
            assert recovered == 0, f"round {round_}: recovery also ended the owner's {outcome}"
            if outcome == "succeeded":
                assert store.sessions.get(session) == saved
            else:  # a failure saves the lifecycle fields only: the previous checkpoint stays
                assert store.sessions.get(session) == previous.model_copy(
                    update={"last_checkpoint_error": saved.last_checkpoint_error}
                )
            assert round_bodies == [OUTCOMES[outcome]]
        else:
            assert (finished, recovered) == ("not owner", 1)
            assert store.sessions.get(session) == previous.model_copy(
                update={"last_checkpoint_error": NOTE}
            )
            assert round_bodies == [
                CommandEndedFactory(
                    command_id="owner",
                    outcome=CommandResultKind.CANCELLED,
                    reason=OutcomeReason.CONTROLLER_RESTARTED,
                    message=NOTE,
                )
            ]
        assert store.checkpoints.get(session) is None
        tally[outcome, "owner" if finished == "finished" else "recovery"] += 1
    for worker in [owner, recoverer]:
        worker.stop()
    print(f"rounds by outcome and winner: {dict(tally)}")
