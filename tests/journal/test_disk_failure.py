"""The writer under injected disk failures: `os.write` / `os.fdatasync` (as the writer module
sees them) fail with ENOSPC or EIO, fully or after a short write. Pure filesystem.

How each test can fail (checked by breaking the writer in a scratch copy):
- without the truncate back to the last good offset in `_fail`, the half line stays in the
  file (`read_events` finds a line that is not JSON) or is duplicated on the rewrite;
- with a bare retry of `fdatasync` instead of a rewrite, the recorded calls show a successful
  `fdatasync` right after the failed one, with no `write` of the line in between;
- without the buffer (a failed line just skipped), the recovered file misses seqs;
- without drop-oldest, `dropped`/`buffered` and the recovered lines differ;
- without the ERROR at `close()`, caplog has no such record;
- without the retry on the timer, the `timer` variants time out waiting for recovery.
The last three tests guard bugs found and fixed in the writer: retries held off by a steady
stream of events, a rewrite glued to a half line when the truncate fails, and a zero-sized buffer.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from session_journal import SessionJournalError
from session_journal.journal import JournalEnvelope, JournalWriter
from tests.journal._disk import (
    DiskFault,
    expected_json,
    make_envelope,
    read_events,
    wait_for,
)

LOGGER = "session_journal.journal"


def open_writer(tmp_path: Path, **options: Any) -> JournalWriter:
    return JournalWriter(tmp_path / "session", **options)


@pytest.mark.parametrize("mode", ["raise", "short", "partial"])
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_events_sent_while_writes_fail_are_buffered_then_persisted_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, error: int
) -> None:
    # No timer retries (recovery_interval=60): the file is read only between flushes, when the
    # writer's thread is idle, so a retry cannot be caught half-way.
    writer = open_writer(tmp_path, recovery_interval=60)
    try:
        fault = DiskFault(writer.events_path, error=error, mode=mode).install(monkeypatch)
        envelopes = [make_envelope(seq, 300) for seq in range(8)]
        for envelope in envelopes[:2]:
            writer.send(envelope)
        assert writer.flush().persisted

        fault.failing = True
        for envelope in envelopes[2:]:
            writer.send(envelope)
        result = writer.flush()  # handles the six, then retries once (still failing)
        assert not result.persisted
        assert result.status.degraded and writer.status.degraded
        assert result.status.buffered == 6 and result.status.dropped == 0
        assert result.status.last_error is not None
        assert f"errno {error}" in result.status.last_error
        assert fault.write_failures >= 2  # the first attempt and the flush's retry
        # Nothing half-written: only the two good lines, whole.
        assert read_events(writer.events_path) == expected_json(envelopes[:2])

        fault.failing = False
        result = writer.flush()
        assert result.persisted
        assert not result.status.degraded and result.status.buffered == 0
        assert result.status.dropped == 0
        assert read_events(writer.events_path) == expected_json(envelopes)
    finally:
        writer.close()
    assert read_events(writer.events_path) == expected_json(envelopes)


def test_buffered_events_are_retried_on_the_timer_without_a_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(tmp_path, recovery_interval=0.05)
    try:
        fault = DiskFault(writer.events_path, mode="short").install(monkeypatch)
        fault.failing = True
        envelopes = [make_envelope(seq, 200) for seq in range(5)]
        for envelope in envelopes:
            writer.send(envelope)
        assert wait_for(lambda: writer.status.buffered == 5)
        retried = fault.write_failures
        assert wait_for(lambda: fault.write_failures > retried + 1)  # the timer retries
        assert writer.status.degraded

        fault.failing = False
        assert wait_for(lambda: not writer.status.degraded), "no retry on the timer"
        assert writer.status.buffered == 0 and writer.status.dropped == 0
    finally:
        writer.close()
    assert read_events(writer.events_path) == expected_json(envelopes)


def _check_rewrites_after_failed_syncs(fault: DiskFault, line: bytes, good_offset: int) -> None:
    """After every failed fdatasync: a truncate back to `good_offset`, and the next successful
    write-or-sync is a write of the whole line again (never a bare retry of the sync)."""
    failed = [i for i, call in enumerate(fault.calls) if call.op == "fdatasync" and not call.ok]
    assert len(failed) == fault.sync_failures > 0
    for index in failed:
        written_before = [c for c in fault.calls[:index] if c.op == "write" and c.ok]
        assert written_before[-1].data == line  # the sync that failed was the line's
        later = fault.calls[index + 1 :]
        ops = [c for c in later if c.op in ("write", "fdatasync") and c.ok]
        assert ops, "the line was never rewritten"
        assert ops[0].op == "write", f"after a failed fdatasync the next success is {ops[0]}"
        assert ops[0].data == line
        first = later.index(ops[0])
        truncates = [c for c in later[:first] if c.op == "ftruncate" and c.ok]
        assert [c.length for c in truncates][-1:] == [good_offset]


@pytest.mark.parametrize("trigger", ["flush", "timer"])
@pytest.mark.parametrize("failures", [1, 3])
def test_a_failed_fdatasync_truncates_and_rewrites_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trigger: str, failures: int
) -> None:
    interval = 60.0 if trigger == "flush" else 0.05
    writer = open_writer(tmp_path, recovery_interval=interval)
    try:
        fault = DiskFault(writer.events_path).install(monkeypatch)
        envelopes = [make_envelope(seq, 500) for seq in range(6)]
        for envelope in envelopes[:2]:
            writer.send(envelope)
        assert writer.flush().persisted
        good_offset = writer.events_path.stat().st_size

        fault.fail_syncs = failures  # the fdatasync after the write of seq 2 fails
        for envelope in envelopes[2:]:
            writer.send(envelope)
        assert wait_for(lambda: fault.sync_failures >= 1)
        if trigger == "flush":
            assert wait_for(lambda: writer.status.buffered == 4)
            assert writer.status.degraded
            assert "errno 5" in (writer.status.last_error or "")
            for _ in range(failures):
                result = writer.flush()
                if result.persisted:
                    break
            assert result.persisted
        else:
            assert wait_for(lambda: fault.sync_failures == failures)
            assert wait_for(lambda: not writer.status.degraded), "no retry on the timer"
            assert writer.flush().persisted
        assert fault.sync_failures == failures
        status = writer.status
        assert (status.degraded, status.buffered, status.dropped) == (False, 0, 0)
    finally:
        writer.close()

    # Exactly the six lines: the line whose sync failed is neither lost nor doubled.
    raw = writer.events_path.read_bytes().splitlines(keepends=True)
    assert read_events(writer.events_path) == expected_json(envelopes)
    assert len(raw) == len(set(raw)) == 6
    _check_rewrites_after_failed_syncs(fault, raw[2], good_offset)


def test_at_capacity_the_oldest_buffered_events_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(tmp_path, max_buffered=3, recovery_interval=60)
    try:
        fault = DiskFault(writer.events_path).install(monkeypatch)
        fault.failing = True
        envelopes = [make_envelope(seq, 100) for seq in range(5)]
        for envelope in envelopes:
            writer.send(envelope)
        result = writer.flush()
        assert not result.persisted
        assert (result.status.degraded, result.status.buffered, result.status.dropped) == (
            True,
            3,
            2,
        )
        assert read_events(writer.events_path) == []

        fault.failing = False
        result = writer.flush()
        assert result.persisted
        assert (result.status.degraded, result.status.buffered, result.status.dropped) == (
            False,
            0,
            2,
        )
    finally:
        writer.close()
    assert read_events(writer.events_path) == expected_json(envelopes[2:])


def test_close_while_failing_logs_what_was_not_persisted_and_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    writer = open_writer(tmp_path, max_buffered=3, recovery_interval=60)
    fault = DiskFault(writer.events_path).install(monkeypatch)
    fault.failing = True
    for seq in range(5):
        writer.send(make_envelope(seq, 100))
    writer.close()  # drains the five, retries a last time (fails), then reports

    errors = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in caplog.records]
    message = errors[0].getMessage()
    assert "3 events not persisted" in message
    assert "2 dropped" in message
    assert os.strerror(errno.ENOSPC) in message and "errno 28" in message
    assert (writer.status.buffered, writer.status.dropped) == (3, 2)
    assert not writer.flush().persisted
    assert read_events(writer.events_path) == []


class _SlowEnvelope(JournalEnvelope):
    """Takes 10 ms to serialise, so a burst of them keeps the writer's queue non-empty for a
    known time without relying on the sending thread's timing."""

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        time.sleep(0.01)
        return super().model_dump(**kwargs)


def _slow(envelope: JournalEnvelope) -> _SlowEnvelope:
    return _SlowEnvelope(seq=envelope.seq, ts=envelope.ts, event=envelope.event)


def test_the_timer_retries_the_buffer_even_while_events_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(tmp_path, recovery_interval=0.1)
    try:
        fault = DiskFault(writer.events_path).install(monkeypatch)
        fault.failing = True
        first = make_envelope(0, 100)
        writer.send(first)
        assert wait_for(lambda: writer.status.degraded)
        fault.failing = False  # the disk is fine again from here on

        burst = [_slow(make_envelope(seq, 100)) for seq in range(1, 61)]
        for envelope in burst:  # about 0.6 s of work: six recovery intervals
            writer.send(envelope)
        recovered = False
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            status = writer.status
            if not status.degraded:
                recovered = True
                break
            if status.buffered == 61:  # the whole burst was held, none retried
                break
            time.sleep(0.005)
        assert recovered, "still degraded after the burst: the buffer was never retried"
        assert writer.flush().persisted
    finally:
        writer.close()
    assert read_events(writer.events_path) == expected_json([first, *burst])


def test_a_failed_truncate_does_not_glue_the_rewrite_to_the_half_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(tmp_path, recovery_interval=60)
    try:
        fault = DiskFault(writer.events_path, mode="short").install(monkeypatch)
        envelopes = [make_envelope(seq, 300) for seq in range(4)]
        writer.send(envelopes[0])
        assert writer.flush().persisted

        fault.failing = True
        fault.fail_truncates = 1  # a transient EIO on the truncate after the short write
        writer.send(envelopes[1])
        assert wait_for(lambda: writer.status.degraded)
        fault.failing = False
        for envelope in envelopes[2:]:
            writer.send(envelope)
        assert writer.flush().persisted
    finally:
        writer.close()
    assert read_events(writer.events_path) == expected_json(envelopes)


def test_max_buffered_zero_is_refused_or_drops_without_killing_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        writer = open_writer(tmp_path, max_buffered=0, recovery_interval=60)
    except (ValueError, SessionJournalError):
        return  # refusing the setting is a fix too
    fault = DiskFault(writer.events_path).install(monkeypatch)
    fault.failing = True
    writer.send(make_envelope(0))
    flushing = threading.Thread(target=writer.flush, daemon=True)
    flushing.start()
    flushing.join(5)
    assert not flushing.is_alive(), "flush() hangs: the writer's thread died"
    assert writer.status.dropped == 1
    writer.close()


def test_a_flush_after_drops_does_not_claim_everything_persisted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(tmp_path, max_buffered=2, recovery_interval=60)
    try:
        fault = DiskFault(writer.events_path).install(monkeypatch)
        fault.failing = True
        for seq in range(5):
            writer.send(make_envelope(seq, 100))
        deadline = time.monotonic() + 10
        while writer.status.dropped < 3:  # the writer's thread meets the failing disk
            assert time.monotonic() < deadline
            time.sleep(0.01)
        fault.failing = False
        result = writer.flush()  # the buffer is written, but 3 events were dropped before
        assert not result.persisted
        assert (result.status.buffered, result.status.dropped) == (0, 3)
        writer.send(make_envelope(5, 100))
        assert writer.flush().persisted  # nothing dropped since the previous flush
    finally:
        writer.close()
