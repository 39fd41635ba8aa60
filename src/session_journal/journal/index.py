"""The project index: every persisted journal event, searchable by full text (`store.index`).

SQLite: an FTS5 table over `project_events.text_content`, kept in sync by SQLite triggers.
PostgreSQL: a generated `tsvector` column (`simple` configuration) with a GIN index.

Queries are plain user text: words are ANDed, `"quoted phrases"` match as phrases, and anything
else a user types (FTS operators, punctuation) is taken as text, never as query syntax.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..errors import InvalidRecord, SessionJournalError
from ..unit_of_work import Database
from ..validation import optional_id, require_id
from .envelope import JournalEnvelope
from .extract import event_kind, extract_anchors, extract_text_content
from .stats import EVENTS_FILE

log = logging.getLogger("session_journal.journal")

_PHRASE_OR_WORD = re.compile(r'"([^"]*)"|(\w+)')
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class IndexRow:
    """One journal event as the index stores it."""

    session_id: str
    seq: int
    ts: str
    kind: str
    turn_id: str | None
    flow_run_id: str | None
    text_content: str | None
    payload_json: str


@dataclass(frozen=True)
class SearchHit:
    """A search result: where the event is, what it is, a snippet around the match (matched
    words in `[` `]`), and its rank (higher is better)."""

    session_id: str
    seq: int
    kind: str
    ts: str
    snippet: str
    rank: float


def search_terms(query: str) -> list[list[str]]:
    """The query as phrases, each a list of words: quoted text is one phrase, every other word
    a phrase of its own; punctuation and operators are not words."""
    terms = []
    for phrase, word in _PHRASE_OR_WORD.findall(query):
        words = _WORD.findall(phrase) if phrase else [word]
        if words:
            terms.append(words)
    return terms


class ProjectIndex:
    """`store.index`: insert, search and rebuild the project's journal index."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def insert(self, rows: list[IndexRow]) -> None:
        """Insert rows; a row whose (session_id, seq) is already indexed is left as it is."""
        if rows:
            with self._database.writing("index journal events") as uow:
                uow.project_events.insert(rows)
                uow.commit()

    def search(
        self, query: str, *, session_id: str | None = None, limit: int = 20
    ) -> list[SearchHit]:
        """Hits for `query`, best first. `InvalidRecord` for an empty query; `[]` when the
        query has no searchable word."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidRecord("query must be non-empty text")
        session_id = optional_id(session_id, "session_id")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidRecord(f"limit must be an integer, got {type(limit).__name__}")
        terms = search_terms(query.replace("\x00", ""))
        if not terms:
            return []
        with self._database.reading("search the project index") as uow:
            return uow.project_events.search(terms, session_id, max(1, min(limit, 1000)))

    def rebuild(self, session_dir: str | os.PathLike[str], session_id: str) -> int:
        """Re-index a session from its `events.jsonl` (lines that do not decode are skipped);
        returns the rows indexed."""
        session_id = require_id(session_id, "session_id")
        rows = list(_rows_of(Path(session_dir) / EVENTS_FILE, session_id))
        with self._database.writing(f"rebuild the index of {session_id!r}") as uow:
            uow.project_events.delete_session(session_id)
            uow.project_events.insert(rows)
            uow.commit()
        return len(rows)


def index_row(session_id: str, envelope: JournalEnvelope, payload_json: str) -> IndexRow:
    """The index row of an envelope whose (redacted) line is `payload_json`."""
    turn_id, flow_run_id = extract_anchors(envelope.event)
    text = extract_text_content(envelope.event)
    return IndexRow(
        session_id=session_id,
        seq=envelope.seq,
        ts=envelope.model_dump(mode="json")["ts"],
        kind=event_kind(envelope.event),
        turn_id=turn_id,
        flow_run_id=flow_run_id,
        text_content=text.replace("\x00", "") if text is not None else None,
        payload_json=payload_json,
    )


def _rows_of(events: Path, session_id: str) -> list[IndexRow]:
    rows = []
    with events.open("rb") as lines:
        for line in lines:
            if not line.endswith(b"\n"):
                break
            text = line.decode("utf-8", "replace").rstrip("\n")
            try:
                envelope = JournalEnvelope.model_validate_json(text)
            except (ValidationError, ValueError):
                continue  # encode_error lines and anything undecodable
            rows.append(index_row(session_id, envelope, text))
    return rows


class IndexFeeder:
    """Indexes a writer's persisted lines on a thread of its own, so the index never delays
    the file: it builds the rows from the (redacted) lines and inserts them in batches (what
    arrives within `_GATHER` seconds, at most 500 rows), one transaction per batch.

    Failures are logged, at most once a minute with a count, and never raised.
    """

    def __init__(self, index: ProjectIndex, session_id: str) -> None:
        self._index = index
        self._session_id = session_id
        self._queue: queue.SimpleQueue[bytes | threading.Event | None] = queue.SimpleQueue()
        self._failures = 0
        self._last_report = 0.0
        self._thread = threading.Thread(target=self._run, name="journal-index", daemon=True)
        self._thread.start()

    def put(self, line: bytes) -> None:
        """Queue a persisted line."""
        self._queue.put(line)

    def wait(self) -> None:
        """Return once every line queued before has had its insert attempted."""
        reached = threading.Event()
        self._queue.put(reached)
        reached.wait()

    def close(self) -> None:
        """Insert what is queued, then stop."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            batch: list[IndexRow] = []
            item = self._queue.get()
            deadline = time.monotonic() + _GATHER
            while isinstance(item, bytes):
                row = self._row(item)
                if row is not None:
                    batch.append(row)
                if len(batch) >= 500:
                    break
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    item = b""
                    break
            self._insert(batch)
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()

    def _row(self, line: bytes) -> IndexRow | None:
        text = line.decode("utf-8").rstrip("\n")
        try:
            envelope = JournalEnvelope.model_validate_json(text)
        except ValidationError as error:
            log.debug("not indexing a line of %s: %s", self._session_id, error)
            return None
        return index_row(self._session_id, envelope, text)

    def _insert(self, batch: list[IndexRow]) -> None:
        if not batch:
            return
        try:
            self._index.insert(batch)
        except (SessionJournalError, OSError) as error:
            self._failures += 1
            now = time.monotonic()
            if now - self._last_report >= 60:
                log.error(
                    "index inserts failed %d time(s); the events file is unaffected: %s",
                    self._failures,
                    error,
                )
                self._last_report, self._failures = now, 0


_GATHER = 0.05  # seconds the index thread gathers rows before a transaction
