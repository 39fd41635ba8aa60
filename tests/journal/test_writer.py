"""The writer's ordinary life: the seed's scenarios (no database)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from session_journal import SessionJournalError, WriterClosed
from session_journal.journal import (
    FlowEnd,
    FlowStatus,
    JournalWriter,
    Redactor,
    SessionStats,
)
from tests.factories import JournalEnvelopeFactory, flow_start, user_msg


def lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_five_events_become_five_json_lines_with_matching_stats(tmp_path: Path) -> None:
    with JournalWriter(tmp_path / "session") as writer:
        for seq in range(1, 6):
            writer.send(flow_start(seq))
        result = writer.flush()
        assert result.persisted and not result.status.degraded
    written = lines(writer.events_path)
    assert [line["seq"] for line in written] == [1, 2, 3, 4, 5]
    assert written[0] == {
        "seq": 1,
        "ts": "2026-11-29T12:00:01Z",
        "type": "flow_start",
        "run_id": "run-1",
        "flow_name": "flow_1",
        "parent_run_id": None,
        "parent_node_id": None,
        "spawned": False,
    }
    stats = SessionStats.load_or_rebuild(tmp_path / "session")
    assert (stats.event_count, stats.message_count) == (5, 0)
    assert stats.event_bytes == writer.events_path.stat().st_size
    assert stats.last_seq == 5


def test_a_flow_end_with_an_errored_status(tmp_path: Path) -> None:
    status = FlowStatus(kind="errored", message="tool crashed")
    with JournalWriter(tmp_path) as writer:
        writer.send(
            JournalEnvelopeFactory(
                seq=1, event=FlowEnd(run_id="run-1", flow_name="build", status=status)
            )
        )
    [line] = lines(writer.events_path)
    assert line["status"] == {"kind": "errored", "message": "tool crashed"}


def test_message_stats_count_messages_and_user_messages(tmp_path: Path) -> None:
    with JournalWriter(tmp_path) as writer:
        writer.send(flow_start(1))
        writer.send(user_msg(2, "hello"))
    stats = SessionStats.load_or_rebuild(tmp_path)
    assert (stats.event_count, stats.message_count, stats.user_message_count) == (2, 1, 1)


def test_overwriting_a_partial_line_leaves_exactly_one_valid_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(b'{"seq":1,"ts":"2026-11-29T12:00:01Z","type":"flow_sta')
    with JournalWriter(tmp_path) as writer:
        writer.send(flow_start(1))
    assert [line["seq"] for line in lines(events)] == [1]
    assert (tmp_path / "events.jsonl.torn").read_bytes().startswith(b'{"seq":1,"ts"')
    assert SessionStats.load_or_rebuild(tmp_path).event_bytes == events.stat().st_size


def test_reopening_appends_after_the_existing_lines(tmp_path: Path) -> None:
    with JournalWriter(tmp_path) as writer:
        writer.send(flow_start(1))
    with JournalWriter(tmp_path) as writer:
        writer.send(flow_start(2))
    assert [line["seq"] for line in lines(tmp_path / "events.jsonl")] == [1, 2]
    assert SessionStats.load_or_rebuild(tmp_path).event_count == 2


def test_an_event_that_cannot_be_encoded_becomes_an_encode_error_line(tmp_path: Path) -> None:
    with JournalWriter(tmp_path) as writer:
        writer.send(user_msg(1, "lone \ud800 surrogate"))
        writer.send("not an envelope")
        writer.send(flow_start(3))
    written = lines(tmp_path / "events.jsonl")
    assert [(line["seq"], line["type"]) for line in written] == [
        (1, "encode_error"),
        (None, "encode_error"),
        (3, "flow_start"),
    ]
    assert "surrogate" in str(written[0]["error"])


def test_redaction_applies_before_the_line_is_written(tmp_path: Path) -> None:
    secret = "sk-proj-" + "a1B2" * 8
    with JournalWriter(tmp_path, redactor=Redactor()) as writer:
        writer.send(user_msg(1, f"my key is {secret}"))
    text = (tmp_path / "events.jsonl").read_text()
    assert secret not in text and "[REDACTED]" in text


def test_close_is_idempotent_and_send_after_close_is_refused(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path)
    writer.close()
    writer.close()
    with pytest.raises(WriterClosed, match="closed"):
        writer.send(flow_start(1))
    assert writer.flush().persisted


@pytest.mark.parametrize("session_id", ["../escape", "a/b", "..", ".", ""])
def test_session_ids_with_path_separators_or_dots_are_refused(
    tmp_path: Path, session_id: str
) -> None:
    with pytest.raises(SessionJournalError, match="invalid id"):
        JournalWriter(tmp_path, session_id=session_id)


def test_the_directory_is_created_with_its_parents(tmp_path: Path) -> None:
    with JournalWriter(tmp_path / "a" / "b" / "session") as writer:
        assert writer.events_path.exists()


def test_events_still_queued_at_interpreter_exit_are_written(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from session_journal.journal import JournalWriter\n"
        "from tests.factories import flow_start\n"
        "writer = JournalWriter(sys.argv[1])\n"
        "for seq in range(1, 501):\n"
        "    writer.send(flow_start(seq))\n"
    )  # no close(): the exit hook closes it
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        check=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert [line["seq"] for line in lines(tmp_path / "events.jsonl")] == list(range(1, 501))
