"""`project_events`: journal events indexed for full-text search (FTS5 or tsvector)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa

from ...journal.search import IndexRow, SearchHit, SearchTerm
from ..models import ProjectEventRow
from ._dialect import dialect_insert


class ProjectEventRepository:
    """Insert, delete and search indexed journal events."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def insert(self, rows: Sequence[IndexRow]) -> None:
        """Insert rows, skipping any (session_id, seq) already indexed."""
        if not rows:
            return
        values = [asdict(row) for row in rows]
        statement = dialect_insert(self._connection, ProjectEventRow).on_conflict_do_nothing(
            index_elements=[ProjectEventRow.session_id, ProjectEventRow.seq]
        )
        self._connection.execute(statement, values)

    def delete_session(self, session_id: str) -> None:
        """Forget a session's indexed events."""
        self._connection.execute(
            sa.delete(ProjectEventRow).where(ProjectEventRow.session_id == session_id)
        )

    def search(
        self,
        terms: list[SearchTerm],
        session_id: str | None,
        limit: int,
        workspace_id: str | None = None,
    ) -> list[SearchHit]:
        """Events whose text contains every term (its words as a phrase), best first. With
        `workspace_id`, only events of sessions of that workspace: a row whose session is not
        in `sessions` (journal sessions need not be) belongs to no workspace."""
        if self._connection.dialect.name == "postgresql":
            rows = self._search_postgresql(terms, session_id, limit, workspace_id)
        else:
            rows = self._search_sqlite(terms, session_id, limit, workspace_id)
        return [
            SearchHit(session_id=r[0], seq=r[1], kind=r[2], ts=r[3], snippet=r[4], rank=float(r[5]))
            for r in rows
        ]

    def _search_sqlite(
        self, terms: list[SearchTerm], session_id: str | None, limit: int, workspace: str | None
    ) -> Sequence[Any]:
        sql = (
            "SELECT e.session_id, e.seq, e.kind, e.ts, "
            "snippet(project_events_fts, 0, '[', ']', '...', 12), -bm25(project_events_fts) "
            "FROM project_events_fts JOIN project_events e ON e.id = project_events_fts.rowid "
            "WHERE project_events_fts MATCH :match"
            + (" AND e.session_id = :session_id" if session_id is not None else "")
            + (_IN_WORKSPACE if workspace is not None else "")
            + " ORDER BY bm25(project_events_fts), e.seq LIMIT :limit"
        )
        params = {"match": fts5_match(terms), "session_id": session_id, "limit": limit}
        params["workspace_id"] = workspace
        return self._connection.execute(sa.text(sql), params).all()

    def _search_postgresql(
        self, terms: list[SearchTerm], session_id: str | None, limit: int, workspace: str | None
    ) -> Sequence[Any]:
        query, params = tsquery_sql(terms)
        headline, headline_params = headline_tsquery_sql(terms)
        sql = (
            f"WITH q AS (SELECT {query} AS query, {headline} AS headline) "
            "SELECT e.session_id, e.seq, e.kind, e.ts, "
            "ts_headline('simple', coalesce(e.text_content, ''), q.headline, "
            "'StartSel=[, StopSel=], MaxWords=24, MinWords=8'), ts_rank(e.tsv, q.query) "
            "FROM project_events e, q WHERE e.tsv @@ q.query"
            + (" AND e.session_id = :session_id" if session_id is not None else "")
            + (_IN_WORKSPACE if workspace is not None else "")
            + " ORDER BY ts_rank(e.tsv, q.query) DESC, e.seq LIMIT :limit"
        )
        values: dict[str, Any] = {**params, **headline_params}
        values |= {"session_id": session_id, "limit": limit, "workspace_id": workspace}
        return self._connection.execute(sa.text(sql), values).all()


_IN_WORKSPACE = (
    " AND e.session_id IN (SELECT c.session_id FROM session_contexts c"
    " WHERE c.workspace_id = :workspace_id)"
)
"""The workspace scope of a search: sessions of the workspace (`session_contexts`, whose
workspace index answers it); index rows of unknown sessions never match."""


# The builders below turn each term into a fixed-size piece of query text, so a query grows
# linearly with its terms, and they add no operand twice (the terms themselves come distinct
# from `parse_query`). Both engines compare every matched term instance with every other when
# they rank and cut snippets, so a repeated operand costs far more than it seems: a word typed
# 400 times took seconds per hit, and `raw || words` of a plain word doubled every term.


def fts5_match(terms: Sequence[SearchTerm]) -> str:
    """The SQLite FTS5 MATCH expression: one string of each term's words (the tokenizer splits
    on punctuation as the words do), so nothing the user typed is FTS5 syntax; strings side
    by side are ANDed."""
    return " ".join('"' + " ".join(term.words).replace('"', '""') + '"' for term in terms)


def tsquery_sql(terms: Sequence[SearchTerm]) -> tuple[str, dict[str, str]]:
    """The PostgreSQL tsquery expression and its bound parameters: each term goes to
    `phraseto_tsquery`, which never fails on user text, as typed (the parser keeps
    `src/main.py`, `3.14` or an email address as one token) OR as its words (what the text's
    own tokens may be split into) when those differ; the terms are ANDed."""
    parts, params = [], {}
    for n, term in enumerate(terms):
        params[f"raw_{n}"] = term.raw
        part = f"phraseto_tsquery('simple', :raw_{n})"
        words = " ".join(term.words)
        if words != term.raw:
            params[f"words_{n}"] = words
            part = f"({part} || phraseto_tsquery('simple', :words_{n}))"
        parts.append(part)
    return " && ".join(parts), params


def headline_tsquery_sql(terms: Sequence[SearchTerm]) -> tuple[str, dict[str, str]]:
    """The PostgreSQL tsquery that picks and marks a hit's snippet, and its parameters: every
    distinct word of the terms and every distinct space-separated piece as typed (which the
    parser may keep whole: `src/main.py`), ORed, without phrase operators.

    `ts_headline` tries candidate fragments against its query: with phrase operators its work
    grows steeply with the phrase (16 words of one repeated word took seconds on one event),
    and an AND of 32 words costs about eight times an OR of them on a long event. The hit
    itself matched the full query of `tsquery_sql`; the snippet shows where its words are.
    """
    operands = dict.fromkeys(
        operand for term in terms for operand in (*term.raw.split(), *term.words)
    )
    params = {f"hl_{n}": operand for n, operand in enumerate(operands)}
    parts = [f"plainto_tsquery('simple', :{name})" for name in params]
    return " || ".join(parts), params
