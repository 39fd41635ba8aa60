"""Pure rules: event body shapes, decoding, ids and canonical activity JSON (no database)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import ValidationError

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEvent,
    ApiTurnOutcome,
    CheckpointMetadata,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    LegacyNotice,
    OutcomeReason,
    SessionFault,
    SessionRecord,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from session_journal._validation import check_id
from session_journal.api_events import EVENT_DATA, decode_body, decode_events, event_texts


def test_bodies_dump_wrapped_and_construct_by_field() -> None:
    started = TurnStarted(command_id="prompt-1", turn_id=1, started_at_ms=2)
    assert started.type == "turn_started"
    assert started.model_dump(mode="json") == {
        "type": "turn_started",
        "data": {"turn_id": 1, "command_id": "prompt-1", "started_at_ms": 2},
    }
    assert EVENT_DATA.validate_json(started.model_dump_json()) == started


def test_the_documented_turn_ended_body() -> None:
    stored = (
        '{"type":"turn_ended","data":{"turn":{"command_id":"prompt-1","accepted_ordinal":1,'
        '"outcome":{"kind":"completed","stop_reason":"end_turn","reason":null,"message":null}}}}'
    )
    body = decode_body(stored)
    assert body == TurnEnded(
        turn=ApiTurnOutcome(
            command_id="prompt-1",
            accepted_ordinal=1,
            outcome=TurnOutcome(kind=TurnResultKind.COMPLETED, stop_reason="end_turn"),
        )
    )
    assert body.model_dump(mode="json") == json.loads(stored)
    assert body.turn.outcome.kind == "completed"  # type: ignore[union-attr]


def test_enums_accept_their_values_in_lax_mode() -> None:
    ended = CommandEnded(
        result={  # type: ignore[arg-type]
            "owner": "daemon",
            "command_id": "c",
            "command_kind": "checkpoint",
            "outcome": "succeeded",
        }
    )
    assert ended.result == CommandResult(
        owner=CommandOwner.DAEMON,
        command_id="c",
        command_kind="checkpoint",
        outcome=CommandResultKind.SUCCEEDED,
    )
    assert OutcomeReason.CHECKPOINT_DEFERRED == "checkpoint_deferred"


def test_an_api_event_dumps_its_body_wrapped() -> None:
    event = ApiEvent(
        seq=3,
        session_id="s",
        recorded_at_ms=9,
        event=LegacyNotice(original_type="error", message="m"),
    )
    assert event.model_dump(mode="json")["event"] == {
        "type": "legacy_notice",
        "data": {"original_type": "error", "command_id": None, "message": "m"},
    }


@pytest.mark.parametrize(
    ("stored", "original_type", "command_id"),
    [
        ('{"type":"error","data":{"command_id":"c-1","message":"m"}}', "error", "c-1"),
        ('{"type":"turn_started","data":{"turn_id":"x"}}', "turn_started", None),
        ('{"data":{}}', "unknown", None),
        ("not json", "unknown", None),
        ("[1, 2]", "unknown", None),
    ],
)
def test_an_undecodable_body_becomes_a_legacy_notice(
    stored: str, original_type: str, command_id: str | None
) -> None:
    notice = decode_body(stored)
    assert isinstance(notice, LegacyNotice)
    assert (notice.original_type, notice.command_id) == (original_type, command_id)
    assert notice.message.startswith("stored body does not decode")


@pytest.mark.parametrize("good", ["a", "session-1", "A.b_c:d@e-f", "x" * 128, "..."])
def test_good_ids(good: str) -> None:
    assert check_id(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "x" * 129, "a\x00", "é", " a"])
def test_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid id"):
        check_id(bad)


def test_canonical_activity_json_ignores_key_order_and_whitespace() -> None:
    state = ApiActivityState(
        state="running",
        details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=1),
        is_idle=True,
        waiting_for_input=False,
        capacity_retry=False,
    )
    shuffled = json.dumps(json.loads(state.model_dump_json()), sort_keys=False, indent=2)
    again = ApiActivityState.model_validate_json(shuffled)
    assert again.canonical_json() == state.canonical_json()
    assert state.canonical_json().startswith('{"capacity_retry":false,"details":{')


def test_checkpoint_metadata_rules() -> None:
    CheckpointMetadata(
        archive_path="/a", sha256="f" * 64, created_at="2026-01-02T03:04:05Z", event_frontier=0
    )
    for field, value in [
        ("sha256", "F" * 64),
        ("created_at", "2026-01-02 03:04:05"),
        ("event_frontier", -1),
    ]:
        fields = {
            "archive_path": "/a",
            "sha256": "f" * 64,
            "created_at": "2026-01-02T03:04:05+02:00",
            "event_frontier": 0,
        }
        with pytest.raises(ValidationError, match=field):
            CheckpointMetadata(**(fields | {field: value}))


def test_records_validate_assignment() -> None:
    record = SessionRecord(id="s", project_id="p")
    record.state = "error"  # type: ignore[assignment]
    assert record.state == "error"
    with pytest.raises(ValidationError, match="last_error"):
        record.last_error = "nul\x00"


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ("not json", "Invalid JSON: expected ident at line 1 column 2"),
        ("[1, 2]", "Input should be an object"),
        ('{"data":{}}', "Unable to extract tag using discriminator 'type'"),
        (
            '{"type":"turn_started","data":{"turn_id":"x"}}',
            "turn_started.data.turn_id: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
    ],
)
def test_a_legacy_notice_names_the_place_only_when_there_is_one(stored: str, message: str) -> None:
    notice = decode_body(stored)
    assert isinstance(notice, LegacyNotice)
    assert notice.message == f"stored body does not decode ({message})"


@pytest.mark.parametrize("session_id", ["s-1", 'odd "id"\n\u00e9\u2028'])
def test_stored_rows_decode_and_write_as_the_built_event_does(session_id: str) -> None:
    body = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message='m \u00e9 "q"')
    built = ApiEvent(seq=7, session_id=session_id, recorded_at_ms=70, event=body)
    canonical = body.model_dump_json()
    spaced = json.dumps(json.loads(canonical), indent=2, ensure_ascii=True)  # another form
    rows = [(7, session_id, 70, canonical, True), (7, session_id, 70, spaced, False)]
    assert event_texts(rows) == [built.model_dump_json()] * 2
    assert decode_events(rows) == (built, built)
    with pytest.raises(dataclasses.FrozenInstanceError, match="seq"):
        built.seq = 8  # type: ignore[misc]


def test_an_undecodable_stored_body_is_a_notice_in_the_page_and_its_json() -> None:
    rows = [(1, "s", 5, '{"type":"no_such_tag","data":{}}', False)]
    [event] = decode_events(rows)
    assert isinstance(event.event, LegacyNotice) and event.event.original_type == "no_such_tag"
    assert event_texts(rows) == [event.model_dump_json()]
