"""What the project index stores and how it is searched, without a database: the row derived
from each journal event, the search hit, and the parsing and bounds of a query. `ProjectIndex`
(`services/index.py`) stores the rows and runs the searches;
`storage/repositories/project_events.py` turns the parsed terms into SQL.

Queries are plain user text: words are ANDed, `"quoted phrases"` match as phrases, and anything
else a user types (FTS operators, punctuation) is taken as text, never as query syntax.

A query is bounded (`MAX_QUERY_CHARS`, `MAX_QUERY_WORDS`) and each distinct term is searched once:
both engines score snippets and ranks by comparing every matched term instance with every other,
so a query repeating one word hundreds of times cost seconds per hit before it was bounded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .._validation import check_unicode
from ..errors import InvalidRecord
from .envelope import JournalEnvelope
from .extract import event_kind, extract_anchors, extract_text_content
from .stats import EVENTS_FILE, complete_lines

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


def session_rows(session_dir: str | os.PathLike[str], session_id: str) -> list[IndexRow]:
    """The index rows of a session directory's `events.jsonl`, in file order; lines that do
    not decode (`encode_error` lines, anything torn or foreign) are skipped. `OSError` when the
    file cannot be read."""
    rows = []
    for line in complete_lines(Path(session_dir) / EVENTS_FILE):
        text = line.decode("utf-8", "replace").rstrip("\n")
        try:
            envelope = JournalEnvelope.model_validate_json(text)
        except (ValidationError, ValueError):
            continue  # encode_error lines and anything undecodable
        rows.append(index_row(session_id, envelope, text))
    return rows
