"""`ProjectIndex` (`store.index`): every persisted journal event, searchable by full text.

SQLite: an FTS5 table over `project_events.text_content`, kept in sync by SQLite triggers.
PostgreSQL: a generated `tsvector` column (`simple` configuration) with a GIN index.

The rows, the hits and the query language are the journal's (`journal/search.py`, no database);
`storage/repositories/project_events.py` turns the parsed terms into SQL. This service checks
the arguments and runs the work in the store's transactions, as the other services do.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated, Any, cast

from pydantic import BeforeValidator

from .._arguments import Passed, listed, validate_arguments
from .._validation import Id, path_argument
from ..errors import InvalidRecord
from ..journal.search import (
    MAX_SEARCH_LIMIT,
    IndexRow,
    SearchHit,
    parse_query,
    session_rows,
)
from ..storage.protocols import Transactions, WriteContext


def _positive(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a positive integer, got {value!r}")
    return value


SearchLimit = Annotated[int, BeforeValidator(_positive)]
"""A search's `limit`: a positive integer (above `MAX_SEARCH_LIMIT` it is clamped)."""


class ProjectIndex:
    """`store.index`: insert, search and rebuild the project's journal index. A
    `JournalWriter` given it as `index` feeds it (it is the writer's `IndexSink`)."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside a write transaction of the index's store."""
        return self._transactions.writing_in_this_thread()

    @validate_arguments(rows="index rows")
    def insert(
        self,
        rows: Annotated[Iterable[IndexRow], listed(IndexRow, "IndexRow")],
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> None:
        """Insert rows (any iterable of `IndexRow`s, as `session_rows` or a `JournalWriter`
        builds them, read once); a row whose (session_id, seq) is already indexed is left as it
        is. Anything else (`None`, a tuple for a row) is `InvalidRecord`, before anything runs."""
        batch = cast(list[IndexRow], rows)  # `listed` read it into a list
        if not batch:
            return None

        def work(context: WriteContext) -> None:
            context.project_events.insert(batch)
            context.commit()

        return self._transactions.submit(work, "index journal events", uow)

    @validate_arguments()
    def search(
        self,
        query: str,
        *,
        session_id: Id | None = None,
        limit: SearchLimit = 20,
        workspace_id: Id | None = None,
        uow: Passed[WriteContext | None] = None,
    ) -> list[SearchHit]:
        """Hits for `query`, best first, at most `limit` (a positive integer; above
        `MAX_SEARCH_LIMIT` it is clamped). With `workspace_id`, only events of that workspace's
        sessions: index rows of sessions that `store.sessions` does not hold (a journal needs
        no session row) are never served to a workspace-scoped caller. `InvalidRecord` for a
        query `parse_query` refuses, a malformed `session_id` or `workspace_id` or a bad
        `limit`, the same on both backends; `[]` when the query has no searchable word."""
        terms = parse_query(query)
        if not terms:
            return []
        limit = min(limit, MAX_SEARCH_LIMIT)
        with self._transactions.reading("search the project index", uow) as read:
            return read.project_events.search(terms, session_id, limit, workspace_id)

    @validate_arguments()
    def rebuild(
        self,
        session_dir: Passed[str | os.PathLike[str]],
        session_id: Id,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> int:
        """Re-index a session from its `events.jsonl` (lines that do not decode are skipped):
        its index rows are replaced by the file's, in one transaction; returns the rows
        indexed. `InvalidRecord` when `session_dir` is not a path or the file cannot be read."""
        path = path_argument(
            session_dir, "session_dir", "the path of a session directory", "nothing was indexed"
        )
        try:
            rows = session_rows(path, session_id)
        except OSError as error:
            raise InvalidRecord(f"cannot read the events of {session_id!r}: {error}") from None

        def work(context: WriteContext) -> None:
            context.project_events.delete_session(session_id)
            context.project_events.insert(rows)
            context.commit()

        self._transactions.submit(work, f"rebuild the index of {session_id!r}", uow)
        return len(rows)
