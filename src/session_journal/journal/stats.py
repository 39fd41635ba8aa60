"""`SessionStats`: counts of a session's persisted events, kept in `stats.json` beside the file."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ValidationError

log = logging.getLogger("session_journal.journal")

EVENTS_FILE = "events.jsonl"
STATS_FILE = "stats.json"
MESSAGE_KINDS = frozenset({"user_msg", "assistant_msg", "tool_result_msg", "system_msg"})


class SessionStats(BaseModel):
    """Persisted events, `*_msg` events, `user_msg` events, bytes of `events.jsonl`, last seq."""

    event_count: int = 0
    message_count: int = 0
    user_message_count: int = 0
    event_bytes: int = 0
    last_seq: int | None = None

    def count(self, kind: str, seq: int | None, size: int) -> None:
        """Account for one persisted line of `size` bytes."""
        self.event_count += 1
        self.message_count += kind in MESSAGE_KINDS
        self.user_message_count += kind == "user_msg"
        self.event_bytes += size
        if seq is not None:
            self.last_seq = seq

    def save(self, session_dir: Path) -> None:
        """Write `stats.json` atomically (a reader sees the old or the new file, whole). Not
        fsynced: after a crash, `load_or_rebuild` notices stale stats by the file's size."""
        target = session_dir / STATS_FILE
        temporary = target.with_suffix(".json.tmp")
        temporary.write_text(self.model_dump_json())
        os.replace(temporary, target)

    @classmethod
    def load_or_rebuild(cls, session_dir: str | os.PathLike[str]) -> SessionStats:
        """The stored stats if they match the size of `events.jsonl`, else stats rebuilt by
        scanning the file (and stored)."""
        directory = Path(session_dir)
        events = directory / EVENTS_FILE
        size = events.stat().st_size if events.exists() else 0
        try:
            stored = cls.model_validate_json((directory / STATS_FILE).read_bytes())
            if stored.event_bytes == size:
                return stored
        except (OSError, ValidationError):
            pass
        rebuilt = cls.scan(events)
        if directory.is_dir():
            try:
                rebuilt.save(directory)
            except OSError as error:  # a full disk: the stats are still right, just not stored
                log.warning("cannot store the stats of %s: %s", directory, error)
        return rebuilt

    @classmethod
    def scan(cls, events: Path) -> SessionStats:
        """Stats of the complete lines of an events file."""
        stats = cls()
        if events.exists():
            for line in complete_lines(events):
                kind, seq = _kind_and_seq(line)
                stats.count(kind, seq, len(line))
        return stats


def complete_lines(events: Path) -> Iterator[bytes]:
    """The lines of an events file up to a torn tail (which is not a persisted event)."""
    with events.open("rb") as lines:
        for line in lines:
            if not line.endswith(b"\n"):
                return
            yield line


def _kind_and_seq(line: bytes) -> tuple[str, int | None]:
    try:
        value = json.loads(line)
    except ValueError:
        return "", None
    if not isinstance(value, dict):
        return "", None
    seq = value.get("seq")
    kind = value.get("type")
    return (kind if isinstance(kind, str) else ""), (seq if isinstance(seq, int) else None)
