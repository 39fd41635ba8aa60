"""The page statement of the ordered log, by filter shape (`page_query`), the check of a
filter's types that decides that shape (`checked_types`), and the split of its rows into the
frontier row and the events (`split_floor`, `split_frontier`)."""

from __future__ import annotations

import functools
from operator import itemgetter
from typing import Any

import sqlalchemy as sa

from ...api_events import EVENT_TYPES
from ...errors import InvalidRecord, PermanentStorageError
from ..models import ApiEventRow, EventSequenceRow, SessionContextRow, StoredType

API_EVENTS = "api_events"
"""The name of the log's row in `event_sequences`."""
_by_seq = itemgetter(0)
_NO_FRONTIER = "event_sequences has no 'api_events' row: the schema is damaged"


_PAGE_COLUMNS = (
    ApiEventRow.seq,
    ApiEventRow.session_id,
    ApiEventRow.recorded_at_ms,
    ApiEventRow.body,
    ApiEventRow.body_canonical,
)
_KNOWN_TYPES = frozenset(EVENT_TYPES)


@functools.cache
def page_query(
    *, sqlite: bool, by_session: bool, by_workspace: bool, types: int, before: bool = False
) -> sa.CompoundSelect[Any]:
    # One statement per backend and filter combination, so each gets its own plan: a generic
    # `(:sid IS NULL OR session_id = :sid)` keeps SQLite off the (session_id, seq) index, and the
    # workspace filter must let both backends walk the log in seq order and stop when the page is
    # full, rather than read every event of the workspace's sessions and sort them on each page.
    # A type filter (`types` tags, bound as `type_0`...) is one scan per type of the (tag, seq)
    # or (session_id, tag, seq) index, in seq order, merged (SQLite: MERGE (UNION ALL) of
    # co-routines; PostgreSQL: Merge Append of limited scans), each read only as far as the
    # page takes it: a page reads at most `limit` index entries per type (plus, with a
    # workspace, those of other workspaces' sessions that the membership check passes over).
    # `before`: the events below `before_seq`, newest first: the same scans, backwards.
    def arm(tag: int | None) -> sa.Select[int, str, int, str, bool]:
        if before:
            bound = ApiEventRow.seq < sa.bindparam("before_seq")
        else:
            bound = ApiEventRow.seq > sa.bindparam("after_seq")
        query = sa.select(*_PAGE_COLUMNS).where(bound)
        if by_session:
            query = query.where(ApiEventRow.session_id == sa.bindparam("session_id"))
        if tag is not None:
            query = query.where(StoredType(ApiEventRow.body) == sa.bindparam(f"type_{tag}"))
        if by_workspace:
            members = sa.select(SessionContextRow.session_id).where(
                SessionContextRow.workspace_id == sa.bindparam("workspace_id")
            )
            if sqlite and not by_session:
                # SQLite: `+session_id` (SQLite's documented way to keep a term off an index)
                # makes the IN list a lookup while the scan follows seq; twice as fast as an
                # EXISTS.
                query = query.where(sa.literal_column("+api_events.session_id").in_(members))
            else:
                # PostgreSQL plans the correlated EXISTS as a nested loop in seq order.
                correlated = members.where(SessionContextRow.session_id == ApiEventRow.session_id)
                query = query.where(correlated.exists())
        return query

    limit: sa.BindParameter[int] = sa.bindparam("limit")
    order: Any = ApiEventRow.seq.desc() if before else ApiEventRow.seq
    merged_order: Any = sa.literal_column("seq").desc() if before else sa.literal_column("seq")
    if types <= 1:
        page = arm(0 if types else None).order_by(order).limit(limit).subquery("page")
    elif sqlite:  # co-routines in seq order, merged: no sort
        merged = sa.union_all(*(arm(tag) for tag in range(types)))
        page = merged.order_by(merged_order).limit(limit).subquery("page")
    else:  # limited arms, which PostgreSQL merges (Merge Append) rather than sorts
        arms = [
            sa.select(arm(tag).order_by(order).limit(limit).subquery(f"of_type_{tag}"))
            for tag in range(types)
        ]
        page = sa.union_all(*arms).order_by(merged_order).limit(limit).subquery("page")
    # The frontier rides along as one more row (its session_id is NULL), so that the page and
    # `latest_seq` come from one statement: one snapshot on both backends, one round trip.
    # Its third column is the floor of the pruned log (`pruned_through`), from the same snapshot.
    frontier = sa.select(
        EventSequenceRow.last_seq, sa.null(), EventSequenceRow.pruned_through, sa.null(), sa.null()
    ).where(EventSequenceRow.name == API_EVENTS)
    return sa.union_all(sa.select(page), frontier)


def checked_types(types: tuple[str, ...] | None) -> tuple[str, ...]:
    """The tags of a filter as `ApiEventFilter` validates them (a filter made without
    validation, `model_construct`, is checked here too: it decides the statement's shape)."""
    if types is None:
        return ()
    if (
        not isinstance(types, tuple)
        or not types
        or not all(isinstance(tag, str) for tag in types)
        or len(set(types)) != len(types)
        or not _KNOWN_TYPES.issuperset(types)
    ):
        raise InvalidRecord(
            f"filter types must be distinct known event types ({', '.join(EVENT_TYPES)}), "
            f"got {types!r}"
        )
    return types


def split_floor(rows: list[Any]) -> tuple[int, int, list[Any]]:
    """The frontier, the floor of the pruned log (the frontier row's third column) and the
    event rows in seq order (see `split_frontier`)."""
    frontier, rows = _split(rows)
    return int(frontier[0]), int(frontier[2] or 0), rows


def split_frontier(rows: list[Any]) -> tuple[int, list[Any]]:
    """The frontier (the row whose session_id is NULL) and the event rows in seq order.

    The page statement has no ORDER BY over its UNION ALL (a sort there costs more than the
    rest of the statement): both backends return the page branch, in its own order, then the
    frontier row. This does not rely on that: it finds the frontier row anywhere and sorts the
    events by seq, which takes one pass over rows already in order.
    """
    frontier, rows = _split(rows)
    return int(frontier[0]), rows


def _split(rows: list[Any]) -> tuple[Any, list[Any]]:
    """The frontier row and the event rows in seq order."""
    if rows and rows[-1][1] is None:
        frontier = rows.pop()
    else:
        found = [row for row in rows if row[1] is None]
        if not found:
            raise PermanentStorageError(_NO_FRONTIER)
        frontier = found[0]
        rows.remove(frontier)
    rows.sort(key=_by_seq)
    return frontier, rows
