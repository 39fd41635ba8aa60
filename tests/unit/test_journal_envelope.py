"""Journal envelope and message rules: owned anchors, text blocks, timestamps, refused lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from session_journal.journal import (
    Checkpoint,
    CompactionSummary,
    ContextCompact,
    FlowEnd,
    FlowStatus,
    JournalEnvelope,
    JournalEvent,
    Message,
    MessageBlock,
    MessageRole,
    PermissionFlowOwner,
    PermissionGroupCreated,
    PermissionGroupPayload,
    SystemMsg,
    TurnStart,
    UserMsg,
    extract_anchors,
)
from tests.unit.test_journal_kinds import RUN, TS, TURN, msg


def test_every_owned_message_role_keeps_its_flow_anchor() -> None:
    for event in (
        UserMsg(turn_id=TURN, flow_run_id=RUN, message=msg(MessageRole.USER, "delegated")),
        SystemMsg(turn_id=TURN, flow_run_id=RUN, message=msg(MessageRole.SYSTEM, "handoff")),
    ):
        assert extract_anchors(event) == (TURN, RUN)


def test_every_owned_compaction_event_keeps_its_flow_anchor() -> None:
    for event in (
        CompactionSummary(
            session_id="session",
            flow_run_id=RUN,
            range_start=0,
            range_end=1,
            compacted_count=2,
            before_tokens=100,
            after_tokens=10,
            summary="summary",
        ),
        ContextCompact(
            session_id="session",
            flow_run_id=RUN,
            before_tokens=100,
            after_tokens=10,
            compacted_range_start=0,
            compacted_range_end=1,
            summary_text="summary",
        ),
        Checkpoint(session_id="session", flow_run_id=RUN, messages=[], window_tokens=10),
    ):
        assert extract_anchors(event) == (None, RUN)


def test_a_permission_group_owned_by_a_flow_anchors_to_its_run() -> None:
    owner = PermissionFlowOwner(run_id="run-owner")
    event = PermissionGroupCreated(payload=PermissionGroupPayload(group_id="g", owner=owner))
    assert extract_anchors(event) == (None, "run-owner")


def test_flow_end_with_an_errored_status_serialises_its_kind() -> None:
    event = FlowEnd(run_id=RUN, flow_name="t", status=FlowStatus(kind="errored", message="boom"))
    line = json.loads(JournalEnvelope(seq=0, ts=TS, event=event).model_dump_json())
    assert line["type"] == "flow_end"
    assert line["status"] == {"kind": "errored", "message": "boom"}


def test_text_concat_joins_text_blocks_and_skips_the_others() -> None:
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    message = Message.model_validate(
        {
            "turn_id": TURN,
            "role": "assistant",
            "content": [{"type": "text", "text": "one"}, image, {"type": "text", "text": "two"}],
        }
    )
    assert message.text_concat() == "one\ntwo"
    assert message.content[1].as_text() is None
    assert message.model_dump(mode="json")["content"][1] == image
    assert Message(turn_id=TURN, role=MessageRole.USER, content=[]).text_concat() == ""


def test_a_text_block_needs_text() -> None:
    with pytest.raises(ValidationError):
        MessageBlock.model_validate({"type": "text"})


def test_ts_must_be_timezone_aware_and_is_kept_in_utc() -> None:
    event = TurnStart(turn_id=TURN)
    with pytest.raises(ValidationError):
        JournalEnvelope(seq=1, ts=datetime(2024, 5, 1, 12, 0), event=event)
    with pytest.raises(ValidationError):
        JournalEnvelope.model_validate(
            {"seq": 1, "ts": "2024-05-01T12:00:00", "type": "turn_start", "turn_id": TURN}
        )

    plus_two = datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    envelope = JournalEnvelope(seq=1, ts=plus_two, event=event)
    assert envelope.ts.utcoffset() == timedelta(0)
    assert envelope.ts == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_now_stamps_a_utc_time() -> None:
    before = datetime.now(UTC)
    envelope = JournalEnvelope.now(3, TurnStart(turn_id=TURN))
    assert before <= envelope.ts <= datetime.now(UTC)
    assert envelope.ts.tzinfo is UTC


@pytest.mark.parametrize(
    "line",
    [
        {"seq": -1, "ts": "2024-05-01T12:00:00Z", "type": "turn_start", "turn_id": TURN},
        {"seq": 1, "ts": "2024-05-01T12:00:00Z", "type": "no_such_kind"},
        {"seq": 1, "ts": "2024-05-01T12:00:00Z", "turn_id": TURN},
        {"ts": "2024-05-01T12:00:00Z", "type": "turn_start", "turn_id": TURN},
        {"seq": 1, "ts": "2024-05-01T12:00:00Z", "type": "turn_start"},
    ],
    ids=["negative-seq", "unknown-type", "no-type", "no-seq", "missing-field"],
)
def test_invalid_lines_are_refused(line: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        JournalEnvelope.model_validate(line)


def test_no_event_field_collides_with_the_envelope_keys() -> None:
    for member in get_args(get_args(JournalEvent)[0]):
        assert not {"seq", "ts", "event"} & set(member.model_fields), member.__name__
