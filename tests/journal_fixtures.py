"""Journal envelopes the journal tests share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from session_journal.journal import (
    FlowStart,
    JournalEnvelope,
    JournalEvent,
    Message,
    MessageRole,
    UserMsg,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def envelope(seq: int, event: JournalEvent) -> JournalEnvelope:
    return JournalEnvelope(seq=seq, ts=T0 + timedelta(seconds=seq), event=event)


def flow_start(seq: int) -> JournalEnvelope:
    return envelope(seq, FlowStart(run_id=f"run-{seq}", flow_name=f"flow_{seq}"))


def user_msg(seq: int, text: str, turn_id: str = "turn-1") -> JournalEnvelope:
    message = Message.from_text(turn_id, MessageRole.USER, text)
    return envelope(seq, UserMsg(turn_id=turn_id, flow_run_id="run-1", message=message))
