"""The project index: every persisted journal event, searchable by full text (`store.index`).

SQLite: an FTS5 table over `project_events.text_content`, kept in sync by SQLite triggers.
PostgreSQL: a generated `tsvector` column (`simple` configuration) with a GIN index.

Queries are plain user text: words are ANDed, `"quoted phrases"` match as phrases, and anything
else a user types (FTS operators, punctuation) is taken as text, never as query syntax.

A query is bounded (`MAX_QUERY_CHARS`, `MAX_QUERY_WORDS`) and each distinct term is searched once:
both engines score snippets and ranks by comparing every matched term instance with every other,
so a query repeating one word hundreds of times cost seconds per hit before it was bounded (see
`repositories/project_events.py` for how terms become SQL).
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import ValidationError

from ..database import Database
from ..errors import InvalidRecord
from ..unit_of_work import UnitOfWork
from ..validation import check_unicode, optional_id, require_id
from .envelope import JournalEnvelope
from .extract import event_kind, extract_anchors, extract_text_content
from .stats import EVENTS_FILE, complete_lines

log = logging.getLogger("session_journal.journal")

_CHUNK = re.compile(r'"([^"]*)"?|([^\s"]+)')
_WORD = re.compile(r"\w+")

MAX_QUERY_CHARS = 1000
"""The longest search query, in characters (code points) as given, NULs included."""

MAX_QUERY_WORDS = 32
"""The most words a search query may hold, counted as `search_terms` splits them: every word of
every term, repeats included."""

MAX_SEARCH_LIMIT = 1000
"""The most hits one search returns; a larger `limit` is clamped to it."""


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


@dataclass(frozen=True)
class SearchTerm:
    """One term of a query: a quoted phrase or a whitespace-separated chunk (`raw`), and the
    words in it, which must appear next to each other."""

    raw: str
    words: tuple[str, ...]


def search_terms(query: str) -> list[SearchTerm]:
    """The query's terms, ANDed: each `"quoted phrase"` and each chunk between spaces
    (`src/main.py`, `NEAR(x)`) is a phrase of its words; a chunk without a word (`*`, `-`) is
    dropped. Operators and punctuation are never syntax."""
    terms = []
    for phrase, chunk in _CHUNK.findall(query):
        raw = phrase or chunk
        words = tuple(_WORD.findall(raw))
        if words:
            terms.append(SearchTerm(raw=raw.strip(), words=words))
    return terms


def parse_query(query: str) -> list[SearchTerm]:
    """The distinct terms of a search query, in order: `search_terms` of the query without its
    NULs (which no text column holds), each identical term once (ANDing a term with itself
    finds nothing more, and every repeat multiplies the engines' snippet and rank work).

    `InvalidRecord`, naming the query and the problem, for a query that is not non-empty text,
    is longer than `MAX_QUERY_CHARS`, holds a lone surrogate (no database encoding can carry
    it) or has more than `MAX_QUERY_WORDS` words. `[]` when it has no searchable word.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidRecord("query must be non-empty text")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRecord(
            f"search query {_preview(query)} is {len(query)} characters long, over the limit "
            f"of {MAX_QUERY_CHARS}"
        )
    try:
        check_unicode(query)
    except ValueError as error:
        raise InvalidRecord(f"search query {_preview(query)} {error}") from None
    terms = search_terms(query.replace("\x00", ""))
    words = sum(len(term.words) for term in terms)
    if words > MAX_QUERY_WORDS:
        raise InvalidRecord(
            f"search query {_preview(query)} has {words} words, over the limit of {MAX_QUERY_WORDS}"
        )
    return list(dict.fromkeys(terms))


def _preview(query: str) -> str:
    # repr() escapes what a terminal should not receive raw (lone surrogates, control chars).
    return repr(query) if len(query) <= 60 else repr(query[:60]) + "..."


class ProjectIndex:
    """`store.index`: insert, search and rebuild the project's journal index."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside a write transaction of the index's store."""
        return self._database.writing_in_this_thread()

    def insert(self, rows: list[IndexRow]) -> None:
        """Insert rows; a row whose (session_id, seq) is already indexed is left as it is."""
        if rows:

            def work(uow: UnitOfWork) -> None:
                uow.project_events.insert(rows)
                uow.commit()

            return self._database.submit(work, "index journal events")

    def search(
        self, query: str, *, session_id: str | None = None, limit: int = 20
    ) -> list[SearchHit]:
        """Hits for `query`, best first, at most `limit` (a positive integer; above
        `MAX_SEARCH_LIMIT` it is clamped). `InvalidRecord` for a query `parse_query` refuses,
        a malformed `session_id` or a bad `limit`, the same on both backends; `[]` when the
        query has no searchable word."""
        terms = parse_query(query)
        session_id = optional_id(session_id, "session_id")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRecord(f"limit must be a positive integer, got {limit!r}")
        if not terms:
            return []
        with self._database.reading("search the project index") as uow:
            return uow.project_events.search(terms, session_id, min(limit, MAX_SEARCH_LIMIT))

    def rebuild(self, session_dir: str | os.PathLike[str], session_id: str) -> int:
        """Re-index a session from its `events.jsonl` (lines that do not decode are skipped);
        returns the rows indexed."""
        session_id = require_id(session_id, "session_id")
        try:
            rows = _rows_of(Path(session_dir) / EVENTS_FILE, session_id)
        except OSError as error:
            raise InvalidRecord(f"cannot read the events of {session_id!r}: {error}") from None

        def work(uow: UnitOfWork) -> None:
            uow.project_events.delete_session(session_id)
            uow.project_events.insert(rows)
            uow.commit()

        self._database.submit(work, f"rebuild the index of {session_id!r}")
        return len(rows)


def index_row(session_id: str, envelope: JournalEnvelope, payload_json: str) -> IndexRow:
    """The index row of an envelope whose (redacted) line is `payload_json`."""
    turn_id, flow_run_id = extract_anchors(envelope.event)
    return IndexRow(
        session_id=session_id,
        seq=envelope.seq,
        ts=envelope.model_dump(mode="json")["ts"],
        kind=event_kind(envelope.event),
        turn_id=_no_nul(turn_id),
        flow_run_id=_no_nul(flow_run_id),
        text_content=_no_nul(extract_text_content(envelope.event)),
        payload_json=payload_json,
    )


def _no_nul(text: str | None) -> str | None:
    # PostgreSQL text columns cannot hold NUL (JSON can: payload_json keeps it escaped).
    return None if text is None else text.replace("\x00", "")


def _rows_of(events: Path, session_id: str) -> list[IndexRow]:
    rows = []
    for line in complete_lines(events):
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
        self._state_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="journal-index", daemon=True)
        self._thread.start()

    def put(self, line: bytes) -> None:
        """Queue a persisted line."""
        self._queue.put(line)

    def wait(self) -> None:
        """Return once every line queued before has had its insert attempted."""
        reached = threading.Event()
        with self._state_lock:
            if self._closed:  # close() inserted everything before stopping
                return
            self._queue.put(reached)
        reached.wait()

    def close(self) -> None:
        """Insert what is queued, then stop."""
        with self._state_lock:
            self._closed = True
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
            try:
                self._insert(batch)
            finally:  # whatever happened, nobody waits forever
                if isinstance(item, threading.Event):
                    item.set()
            if item is None:
                return

    def _row(self, line: bytes) -> IndexRow | None:
        try:
            text = line.decode("utf-8").rstrip("\n")
            return index_row(self._session_id, JournalEnvelope.model_validate_json(text), text)
        except Exception as error:  # a line the index cannot take is skipped, never fatal
            log.debug("not indexing a line of %s: %s", self._session_id, error)
            return None

    def _insert(self, batch: list[IndexRow]) -> None:
        if not batch:
            return
        try:
            self._index.insert(batch)
            return
        except Exception as error:
            first_error: Exception = error
        # One bad row must not keep its neighbours out: insert them one by one, and a row that
        # still fails without its text content is reported.
        failed = 0
        for row in batch:
            for attempt in (row, replace(row, text_content=None)):
                try:
                    self._index.insert([attempt])
                    break
                except Exception:
                    continue
            else:
                failed += 1
        if failed:
            self._report(failed, first_error)

    def _report(self, failed: int, error: Exception) -> None:
        self._failures += failed
        now = time.monotonic()
        if now - self._last_report >= 60:
            log.error(
                "%d journal event(s) could not be indexed; the events file is unaffected: %s",
                self._failures,
                error,
            )
            self._last_report, self._failures = now, 0


_GATHER = 0.05  # seconds the index thread gathers rows before a transaction
