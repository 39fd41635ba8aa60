"""0004_outcome_bodies: legacy bodies rewritten in place; seqs, times and the frontier untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiTurnOutcome,
    DataLossRefused,
    LegacyNotice,
    Store,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
    migrations,
)
from tests.helpers import table_counts

BEFORE = "0003_checkpoint_operations"


def legacy_turn(stop_reason: str | None, error: str | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"command_id": "prompt-1", "accepted_ordinal": 1}
    turn["stop_reason"] = stop_reason
    if error is not None:
        turn["error"] = error
    return {"type": "turn_ended", "data": {"turn": turn}}


def new_turn(kind: str, stop_reason: str | None, message: str | None = None) -> dict[str, Any]:
    outcome = {"kind": kind, "stop_reason": stop_reason, "reason": None, "message": message}
    turn = {"command_id": "prompt-1", "accepted_ordinal": 1, "outcome": outcome}
    return {"type": "turn_ended", "data": {"turn": turn}}


TURN_STARTED = {
    "type": "turn_started",
    "data": {"turn_id": 1, "command_id": "prompt-1", "started_at_ms": 2},
}
ERROR = {"type": "error", "data": {"command_id": "arbitrary", "message": "old diagnostic"}}
NOTICE = {
    "type": "legacy_notice",
    "data": {"original_type": "error", "command_id": "arbitrary", "message": "old diagnostic"},
}


def seed(url: str, bodies: dict[int, dict[str, Any]], frontier: int) -> None:
    """Events with the given seqs and bodies, and the frontier, written with raw SQL in the
    legacy era (0001_initial)."""
    migrations.upgrade(url, "0001_initial")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO sessions (session_id, project_id, state) "
                "VALUES ('session-1', 'p', 'running')"
            )
        )
        for seq, body in bodies.items():
            connection.execute(
                sa.text(
                    "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                    "VALUES (:seq, 'session-1', :at, :body)"
                ),
                {"seq": seq, "at": 1000 + seq, "body": json.dumps(body)},
            )
        connection.execute(
            sa.text("UPDATE event_sequences SET last_seq = :f WHERE name = 'api_events'"),
            {"f": frontier},
        )
    engine.dispose()


def stored(url: str) -> list[tuple[int, int, Any]]:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT seq, recorded_at_ms, CAST(body AS TEXT) FROM api_events ORDER BY seq")
        ).all()
    engine.dispose()
    return [(seq, at, json.loads(body)) for seq, at, body in rows]


def last_seq(url: str) -> int:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        value: int = connection.execute(
            sa.text("SELECT last_seq FROM event_sequences WHERE name = 'api_events'")
        ).scalar_one()
    engine.dispose()
    return value


def test_event_migration_preserves_cursors_and_keeps_unknown_history_explicit(url: str) -> None:
    seed(url, {1: TURN_STARTED, 2: legacy_turn("end_turn"), 8: ERROR}, frontier=10)

    migrations.upgrade(url)

    assert stored(url) == [
        (1, 1001, TURN_STARTED),
        (2, 1002, new_turn("completed", "end_turn")),
        (8, 1008, NOTICE),
    ]
    assert last_seq(url) == 10
    with Store.open(url) as store:
        page = store.events.load(after_seq=0)
        assert [event.seq for event in page.events] == [1, 2, 8]
        assert (page.latest_seq, page.next_after_seq) == (10, 8)
        assert [event.event for event in page.events] == [
            TurnStarted(turn_id=1, command_id="prompt-1", started_at_ms=2),
            TurnEnded(
                turn=ApiTurnOutcome(
                    command_id="prompt-1",
                    accepted_ordinal=1,
                    outcome=TurnOutcome(kind=TurnResultKind.COMPLETED, stop_reason="end_turn"),
                )
            ),
            LegacyNotice(original_type="error", command_id="arbitrary", message="old diagnostic"),
        ]
        assert store.events.load(after_seq=8).next_after_seq == 10

    upgraded = stored(url)
    migrations.downgrade(url, BEFORE)
    legacy_again = legacy_turn("end_turn")
    legacy_again["data"]["turn"]["error"] = None  # the downgrade writes `error` explicitly
    assert stored(url) == [(1, 1001, TURN_STARTED), (2, 1002, legacy_again), (8, 1008, ERROR)]
    migrations.upgrade(url)
    assert stored(url) == upgraded
    assert last_seq(url) == 10


CASES = [
    (legacy_turn("end_turn"), new_turn("completed", "end_turn")),
    (legacy_turn("END_TURN"), new_turn("completed", "END_TURN")),
    (legacy_turn("max_tokens"), new_turn("completed", "max_tokens")),
    (legacy_turn("max_turn_requests"), new_turn("completed", "max_turn_requests")),
    (legacy_turn("refusal"), new_turn("completed", "refusal")),
    (legacy_turn("cancelled"), new_turn("cancelled", "cancelled")),
    (legacy_turn("provider_error", "boom"), new_turn("failed", "provider_error", "boom")),
    (legacy_turn(None, "lost"), new_turn("failed", None, "lost")),
    (
        {"type": "error", "data": {"message": "no command \u0000 nul"}},
        {
            "type": "legacy_notice",
            "data": {
                "original_type": "error",
                "command_id": None,
                "message": "no command \u0000 nul",
            },
        },
    ),
    # Already new, or of another type: untouched.
    (new_turn("completed", "end_turn"), new_turn("completed", "end_turn")),
    (TURN_STARTED, TURN_STARTED),
    ({"type": "mystery", "data": {"x": [1, 2]}}, {"type": "mystery", "data": {"x": [1, 2]}}),
]


def test_every_legacy_shape_is_rewritten_and_round_trips(url: str) -> None:
    seed(url, {3 * n + 1: case[0] for n, case in enumerate(CASES)}, frontier=100)
    counts = table_counts(url, ["api_events", "sessions"])

    migrations.upgrade(url)
    upgraded = stored(url)
    assert [body for _, _, body in upgraded] == [case[1] for case in CASES]
    assert [(seq, at) for seq, at, _ in upgraded] == [
        (3 * n + 1, 1001 + 3 * n) for n in range(len(CASES))
    ]
    assert last_seq(url) == 100

    migrations.downgrade(url, BEFORE)
    downgraded = [body for _, _, body in stored(url)]
    assert downgraded[0] == {
        "type": "turn_ended",
        "data": {
            "turn": {
                "command_id": "prompt-1",
                "accepted_ordinal": 1,
                "stop_reason": "end_turn",
                "error": None,
            }
        },
    }
    assert downgraded[-1] == CASES[-1][0]

    migrations.upgrade(url)
    assert stored(url) == upgraded
    assert table_counts(url, ["api_events", "sessions"]) == counts
    assert last_seq(url) == 100
    with Store.open(url) as store:
        decoded = [event.event for event in store.events.load(after_seq=0).events]
    assert [body.type for body in decoded] == [
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "turn_ended",
        "legacy_notice",
        "turn_ended",
        "turn_started",
        "legacy_notice",  # the unknown type, shown rather than dropped
    ]


def test_downgrade_loses_what_the_legacy_shape_cannot_hold(url: str) -> None:
    # As the revision's docstring says: `outcome.reason`, and a kind the stop reason does not
    # imply, do not survive a downgrade.
    interrupted = new_turn("interrupted", None, "runtime stopped")
    interrupted["data"]["turn"]["outcome"]["reason"] = "runtime_stopped"
    seed(url, {1: interrupted}, frontier=1)
    migrations.upgrade(url)
    assert [body for _, _, body in stored(url)] == [interrupted]
    # So the downgrade names the loss and refuses, changing nothing, unless told to lose it.
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, BEFORE)
    assert refused.value.losses == (
        "0004_outcome_bodies: 1 turn_ended body(ies) would lose outcome.reason or a kind that "
        "stop_reason does not imply",
    )
    assert [body for _, _, body in stored(url)] == [interrupted]
    assert migrations.status_at(url).revision == migrations.head()
    migrations.downgrade(url, BEFORE, allow_data_loss=True)
    migrations.upgrade(url)
    assert [body for _, _, body in stored(url)] == [new_turn("failed", None, "runtime stopped")]


def test_the_rewrite_is_idempotent(url: str) -> None:
    seed(url, {1: ERROR, 2: legacy_turn("refusal")}, frontier=2)
    migrations.upgrade(url)
    once = stored(url)
    migrations.downgrade(url, BEFORE)
    migrations.upgrade(url)
    migrations.upgrade(url)
    assert stored(url) == once


@pytest.mark.parametrize("size", [0, 4999])
def test_batches_cover_every_row(url: str, size: int) -> None:
    bodies = {seq: ERROR for seq in range(1, size + 2)}
    seed(url, bodies, frontier=size + 1)
    migrations.upgrade(url)
    assert [body for _, _, body in stored(url)] == [NOTICE] * (size + 1)
