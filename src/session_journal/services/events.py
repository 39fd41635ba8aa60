"""Reading the ordered log by cursor."""

from __future__ import annotations

from typing import Any

from ..database import Database
from ..errors import InvalidRecord
from ..events import ApiEventFilter, ApiEventPage
from ..records import revalidate
from ..validation import require_int

MAX_PAGE = 1000


class EventService:
    """`store.events`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def load(
        self,
        filter: ApiEventFilter | None = None,
        after_seq: int | None = None,
        limit: int = 100,
    ) -> ApiEventPage:
        """Events with `seq > after_seq` matching `filter`, ascending, at most `limit` (clamped
        to 1..1000). `after_seq=None` starts at the frontier. `next_after_seq` is the last
        returned seq, else `max(latest_seq, after_seq)`: it never moves back and an empty filtered
        page still advances it. The page and `latest_seq` come from one snapshot."""
        event_filter = (
            ApiEventFilter() if filter is None else revalidate(filter, ApiEventFilter, "filter")
        )
        cursor = None if after_seq is None else require_int(after_seq, "after_seq")
        size = _clamp(limit)
        with self._database.reading_one_statement("load events") as uow:
            if cursor is None:  # the tail: nothing is after the frontier in this snapshot
                latest = uow.events.latest_seq()
                return ApiEventPage(events=[], next_after_seq=latest, latest_seq=latest)
            latest, events = uow.events.page(event_filter, cursor, size)
        next_after_seq = events[-1].seq if events else max(latest, cursor)
        return ApiEventPage(events=events, next_after_seq=next_after_seq, latest_seq=latest)

    def latest_seq(self) -> int:
        """The frontier: the largest seq ever assigned; deleting events never lowers it."""
        with self._database.reading_one_statement("read latest seq") as uow:
            return uow.events.latest_seq()


def _clamp(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidRecord(f"limit must be an integer, got {type(limit).__name__}")
    return max(1, min(limit, MAX_PAGE))
