"""Reading the ordered log by cursor."""

from __future__ import annotations

from ..api_events import ApiEventFilter, ApiEventPage
from ..arguments import Given, Int64, validate_arguments
from ..unit_of_work import Transactions

MAX_PAGE = 1000


class EventService:
    """`store.events`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments()
    def load(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
    ) -> ApiEventPage:
        """Events with `seq > after_seq` matching `filter`, ascending, at most `limit` (clamped
        to 1..1000). `after_seq=None` starts at the frontier. `next_after_seq` is the last
        returned seq, else `max(latest_seq, after_seq)`: it never moves back and an empty filtered
        page still advances it. The page and `latest_seq` come from one snapshot."""
        event_filter = ApiEventFilter() if filter is None else filter
        cursor = after_seq
        size = max(1, min(limit, MAX_PAGE))
        with self._transactions.reading_one_statement("load events") as uow:
            if cursor is None:  # the tail: nothing is after the frontier in this snapshot
                latest = uow.events.latest_seq()
                return ApiEventPage(events=[], next_after_seq=latest, latest_seq=latest)
            latest, events = uow.events.page(event_filter, cursor, size)
        next_after_seq = events[-1].seq if events else max(latest, cursor)
        return ApiEventPage(events=events, next_after_seq=next_after_seq, latest_seq=latest)

    def latest_seq(self) -> int:
        """The frontier: the largest seq ever assigned; deleting events never lowers it."""
        with self._transactions.reading_one_statement("read latest seq") as uow:
            return uow.events.latest_seq()
