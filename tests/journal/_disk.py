"""Helpers of the journal's disk-failure and crash tests: envelopes, a strict reader of
`events.jsonl`, and `DiskFault`, which injects failures into the `os` calls the writer makes.

Child processes import this module too, so it only uses `session_journal` and the standard
library, and reports problems as data (not `assert`) where a child needs them.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from session_journal.journal import (
    FlowStart,
    JournalEnvelope,
    Message,
    MessageRole,
    UserMsg,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# The real functions, taken before any test patches the `os` module.
_REAL_WRITE = os.write
_REAL_FDATASYNC = os.fdatasync
_REAL_FTRUNCATE = os.ftruncate


def make_envelope(seq: int, text_size: int = 64) -> JournalEnvelope:
    """A flow start every third seq, else a user message of about `text_size` characters."""
    ts = T0 + timedelta(milliseconds=seq)
    if seq % 3 == 0:
        event: Any = FlowStart(run_id=f"run-{seq}", flow_name=f"flow_{seq}")
    else:
        text = f"event {seq}: " + "abcdefghij" * (text_size // 10 + 1)
        message = Message.from_text(f"turn-{seq}", MessageRole.USER, text[:text_size])
        event = UserMsg(turn_id=f"turn-{seq}", flow_run_id="run-0", message=message)
    return JournalEnvelope(seq=seq, ts=ts, event=event)


def expected_json(envelopes: list[JournalEnvelope]) -> list[dict[str, Any]]:
    """What the lines of these envelopes decode to (no redactor)."""
    return [envelope.model_dump(mode="json") for envelope in envelopes]


def scan_events(path: Path) -> dict[str, Any]:
    """Decode `events.jsonl` strictly: `valid` is false if any line is not a JSON object;
    `ends_with_newline` is true for an empty file too."""
    data = path.read_bytes()
    raw = data.splitlines(keepends=True)
    values: list[Any] = []
    valid = True
    for line in raw:
        try:
            value = json.loads(line)
        except ValueError:
            valid = False
            continue
        if not isinstance(value, dict):
            valid = False
            continue
        values.append(value)
    return {
        "valid": valid,
        "ends_with_newline": data == b"" or data.endswith(b"\n"),
        "size": len(data),
        "raw": raw,
        "values": values,
        "seqs": [value.get("seq") for value in values],
    }


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every line of `events.jsonl`, decoded; fails the test on a half-written line."""
    scanned = scan_events(path)
    assert scanned["valid"], f"a line of {path} is not JSON: {scanned['raw']!r:.2000}"
    assert scanned["ends_with_newline"], f"{path} does not end with a newline"
    values: list[dict[str, Any]] = scanned["values"]
    return values


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds or `timeout` passes; its last value."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@dataclass
class Call:
    """One call the writer made on the events file: `op` is write, fdatasync or ftruncate."""

    op: str
    ok: bool
    data: bytes | None = None  # the bytes a write actually put in the file (if ok)
    length: int | None = None  # ftruncate's length


@dataclass
class DiskFault:
    """Wraps `os.write`, `os.fdatasync` and `os.ftruncate` (the module the writer calls them
    through) for calls on one file, recording them and failing them on demand.

    - `failing`: every write fails with `error` (`mode`: `"raise"` writes nothing, `"short"`
      returns a short count for half the bytes and fails on the rest, `"partial"` writes half
      the bytes and then raises);
    - `fail_syncs`: that many next `fdatasync` calls fail with EIO (after the write succeeded);
    - `fail_truncates`: that many next `ftruncate` calls fail with EIO.
    Calls on other files go straight to the real functions.
    """

    target: Path
    error: int = errno.ENOSPC
    mode: str = "raise"
    failing: bool = False
    fail_syncs: int = 0
    fail_truncates: int = 0
    calls: list[Call] = field(default_factory=list)
    write_failures: int = 0
    sync_failures: int = 0
    _key: tuple[int, int] = (0, 0)
    _short_pending: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self, monkeypatch: Any) -> DiskFault:
        from session_journal.journal import writer as writer_module

        stat = self.target.stat()
        self._key = (stat.st_dev, stat.st_ino)
        monkeypatch.setattr(writer_module.os, "write", self._write)
        monkeypatch.setattr(writer_module.os, "fdatasync", self._fdatasync)
        monkeypatch.setattr(writer_module.os, "ftruncate", self._ftruncate)
        return self

    def _ours(self, fd: int) -> bool:
        try:
            stat = os.fstat(fd)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._key

    def _raise(self, code: int) -> None:
        raise OSError(code, os.strerror(code))

    def _write(self, fd: int, data: Any) -> int:
        if not self._ours(fd):
            return _REAL_WRITE(fd, data)
        data = bytes(data)
        with self._lock:
            if self.failing:
                if self.mode == "short" and not self._short_pending and len(data) > 1:
                    self._short_pending = True
                    written = _REAL_WRITE(fd, data[: len(data) // 2])
                    self.calls.append(Call("write", True, data[:written]))
                    return written
                self._short_pending = False
                if self.mode == "partial":
                    _REAL_WRITE(fd, data[: len(data) // 2])
                self.write_failures += 1
                self.calls.append(Call("write", False))
                self._raise(self.error)
            written = _REAL_WRITE(fd, data)
            self.calls.append(Call("write", True, data[:written]))
            return written

    def _fdatasync(self, fd: int) -> None:
        if not self._ours(fd):
            return _REAL_FDATASYNC(fd)
        with self._lock:
            if self.fail_syncs > 0:
                self.fail_syncs -= 1
                self.sync_failures += 1
                self.calls.append(Call("fdatasync", False))
                self._raise(errno.EIO)
            _REAL_FDATASYNC(fd)
            self.calls.append(Call("fdatasync", True))
        return None

    def _ftruncate(self, fd: int, length: int) -> None:
        if not self._ours(fd):
            return _REAL_FTRUNCATE(fd, length)
        with self._lock:
            if self.fail_truncates > 0:
                self.fail_truncates -= 1
                self.calls.append(Call("ftruncate", False, length=length))
                self._raise(errno.EIO)
            _REAL_FTRUNCATE(fd, length)
            self.calls.append(Call("ftruncate", True, length=length))
        return None


def report(result: Any, path: Path) -> dict[str, Any]:
    """What a child process reports about a `FlushResult` and the file after it."""
    scanned = scan_events(path)
    return {
        "persisted": result.persisted,
        "degraded": result.status.degraded,
        "buffered": result.status.buffered,
        "dropped": result.status.dropped,
        "last_error": result.status.last_error,
        "size": scanned["size"],
        "valid": scanned["valid"],
        "ends_with_newline": scanned["ends_with_newline"],
        "seqs": scanned["seqs"],
    }
