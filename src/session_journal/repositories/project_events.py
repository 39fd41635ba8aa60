"""`project_events`: journal events indexed for full-text search (FTS5 or tsvector)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ._tables import project_events as _rows

if TYPE_CHECKING:
    from ..journal.index import IndexRow, SearchHit, SearchTerm


class ProjectEventRepository:
    """Insert, delete and search indexed journal events."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def insert(self, rows: Sequence[IndexRow]) -> None:
        """Insert rows, skipping any (session_id, seq) already indexed."""
        if not rows:
            return
        values = [asdict(row) for row in rows]
        if self._connection.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        statement = insert(_rows).on_conflict_do_nothing(index_elements=["session_id", "seq"])
        self._connection.execute(statement, values)

    def delete_session(self, session_id: str) -> None:
        """Forget a session's indexed events."""
        self._connection.execute(sa.delete(_rows).where(_rows.c.session_id == session_id))

    def search(
        self, terms: list[SearchTerm], session_id: str | None, limit: int
    ) -> list[SearchHit]:
        """Events whose text contains every term (its words as a phrase), best first."""
        from ..journal.index import SearchHit

        if self._connection.dialect.name == "postgresql":
            rows = self._search_postgresql(terms, session_id, limit)
        else:
            rows = self._search_sqlite(terms, session_id, limit)
        return [
            SearchHit(session_id=r[0], seq=r[1], kind=r[2], ts=r[3], snippet=r[4], rank=float(r[5]))
            for r in rows
        ]

    def _search_sqlite(
        self, terms: list[SearchTerm], session_id: str | None, limit: int
    ) -> Sequence[Any]:
        # Every term becomes an FTS5 string of its words (the tokenizer splits on punctuation
        # as the words do), so nothing the user typed is FTS5 syntax; strings side by side are
        # ANDed.
        match = " ".join('"' + " ".join(term.words).replace('"', '""') + '"' for term in terms)
        sql = (
            "SELECT e.session_id, e.seq, e.kind, e.ts, "
            "snippet(project_events_fts, 0, '[', ']', '...', 12), -bm25(project_events_fts) "
            "FROM project_events_fts JOIN project_events e ON e.id = project_events_fts.rowid "
            "WHERE project_events_fts MATCH :match"
            + (" AND e.session_id = :session_id" if session_id is not None else "")
            + " ORDER BY bm25(project_events_fts), e.seq LIMIT :limit"
        )
        params = {"match": match, "session_id": session_id, "limit": limit}
        return self._connection.execute(sa.text(sql), params).all()

    def _search_postgresql(
        self, terms: list[SearchTerm], session_id: str | None, limit: int
    ) -> Sequence[Any]:
        # Each term is bound to phraseto_tsquery, which never fails on user text: as typed (the
        # parser keeps `src/main.py`, `3.14` or an email address as one token) OR as its words
        # (what the text's own tokens may be split into).
        parts = [
            f"(phraseto_tsquery('simple', :raw_{n}) || phraseto_tsquery('simple', :words_{n}))"
            for n in range(len(terms))
        ]
        query = " && ".join(parts)
        sql = (
            f"WITH q AS (SELECT {query} AS query) "
            "SELECT e.session_id, e.seq, e.kind, e.ts, "
            "ts_headline('simple', coalesce(e.text_content, ''), q.query, "
            "'StartSel=[, StopSel=], MaxWords=24, MinWords=8'), ts_rank(e.tsv, q.query) "
            "FROM project_events e, q WHERE e.tsv @@ q.query"
            + (" AND e.session_id = :session_id" if session_id is not None else "")
            + " ORDER BY ts_rank(e.tsv, q.query) DESC, e.seq LIMIT :limit"
        )
        params: dict[str, Any] = {}
        for n, term in enumerate(terms):
            params |= {f"raw_{n}": term.raw, f"words_{n}": " ".join(term.words)}
        params |= {"session_id": session_id, "limit": limit}
        return self._connection.execute(sa.text(sql), params).all()
