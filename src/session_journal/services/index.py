"""`ProjectIndex` (`store.index`): every persisted journal event, searchable by full text.

SQLite: an FTS5 table over `project_events.text_content`, kept in sync by SQLite triggers.
PostgreSQL: a generated `tsvector` column (`simple` configuration) with a GIN index.

The rows, the hits and the query language are the journal's (`journal/search.py`, no database);
`storage/repositories/project_events.py` turns the parsed terms into SQL. This service validates
the arguments and owns the transactions.
"""

from __future__ import annotations

import os

from .._validation import optional_id, require_id
from ..errors import InvalidRecord
from ..journal.search import (
    MAX_SEARCH_LIMIT,
    IndexRow,
    SearchHit,
    parse_query,
    session_rows,
)
from ..storage.database import Database
from ..storage.unit_of_work import UnitOfWork


class ProjectIndex:
    """`store.index`: insert, search and rebuild the project's journal index. A
    `JournalWriter` given it as `index` feeds it (it is the writer's `IndexSink`)."""

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
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        uow: UnitOfWork | None = None,
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
        with self._database.reading("search the project index", uow) as read:
            return read.project_events.search(terms, session_id, min(limit, MAX_SEARCH_LIMIT))

    def rebuild(
        self,
        session_dir: str | os.PathLike[str],
        session_id: str,
        *,
        uow: UnitOfWork | None = None,
    ) -> int:
        """Re-index a session from its `events.jsonl` (lines that do not decode are skipped);
        returns the rows indexed."""
        session_id = require_id(session_id, "session_id")
        try:
            rows = session_rows(session_dir, session_id)
        except OSError as error:
            raise InvalidRecord(f"cannot read the events of {session_id!r}: {error}") from None

        def work(context: UnitOfWork) -> None:
            context.project_events.delete_session(session_id)
            context.project_events.insert(rows)
            context.commit()

        self._database.submit(work, f"rebuild the index of {session_id!r}", uow)
        return len(rows)
