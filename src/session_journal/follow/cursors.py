"""The cursor rules every page of the log obeys, whoever serves it (the database, the window, a
stream): where a page's cursor goes (`page_after`) and which cursors are refused
(`check_cursor`, `check_not_expired`)."""

from __future__ import annotations

from ..api_events import ApiEvent, ApiEventPage
from ..errors import CursorAhead, CursorExpired
from ..storage.counters import StoreCounters


def check_cursor(
    cursor: int, latest_seq: int, pruned_through: int, counters: StoreCounters | None = None
) -> None:
    """`CursorExpired` if the cursor is below the floor (`check_not_expired`), `CursorAhead` if
    it is above the frontier: it comes from another database or a restored backup."""
    check_not_expired(cursor, pruned_through, counters)
    if cursor > latest_seq:
        raise CursorAhead(
            f"after_seq {cursor} is above the frontier {latest_seq}: the cursor comes "
            "from another database or a restored backup; resync the client"
        )


def check_not_expired(
    cursor: int, pruned_through: int, counters: StoreCounters | None = None
) -> None:
    """`CursorExpired` if `0 < cursor < pruned_through`: events after the cursor were pruned.
    A cursor of 0 means "from the oldest retained event" and never expires. `counters`: the
    store's, which count it."""
    if 0 < cursor < pruned_through:
        raise expired(pruned_through, cursor, counters)


def expired(pruned_through: int, cursor: int, counters: StoreCounters | None) -> CursorExpired:
    """The `CursorExpired` of `cursor` below the floor, counted in `counters` (the store's, for
    `store.metrics()`) if given."""
    if counters is not None:
        counters.cursor_expired()
    return CursorExpired(pruned_through, cursor)


def page_after(
    cursor: int, latest: int, events: tuple[ApiEvent, ...], pruned_through: int = 0
) -> ApiEventPage:
    """The page of `events` read after `cursor` with the frontier `latest`: `next_after_seq`
    is the last event's seq, else `max(latest, cursor)`, so it never moves back and an empty
    filtered page still advances it."""
    after = events[-1].seq if events else max(latest, cursor)
    return ApiEventPage(
        events=events, next_after_seq=after, latest_seq=latest, pruned_through=pruned_through
    )
