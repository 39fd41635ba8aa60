"""Sessions by page, newest first: `sessions.page(*, workspace_id=None, state=None, before=None,
limit=50)`. Each row carries its activity snapshot and open checkpoint operation, read by one
statement whatever the page's size; paging with `next_before` yields every session once, in
`(created_at, id)` descending order, and a session created meanwhile never shifts a later page.
On both backends and through both APIs; the fakes order the same way."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiActivityState,
    InvalidRecord,
    SessionPage,
    SessionRecord,
    SessionState,
    SessionSummary,
    Store,
)
from tests.fakes import FakeServices

pytestmark = pytest.mark.both_apis

IDLE = ApiActivityState(
    state="idle", details=None, is_idle=True, waiting_for_input=False, capacity_retry=False
)


def fill(services: Any) -> None:
    """Twelve sessions in two workspaces and three states; one with activity, one with an open
    checkpoint operation."""
    for number in range(12):
        services.sessions.save(
            SessionRecord(
                id=f"s-{number:02d}",
                project_id="p",
                workspace_id="w-odd" if number % 2 else "w-even",
                state=[SessionState.RUNNING, SessionState.CLOSED, SessionState.ERROR][number % 3],
            )
        )
    services.activity.record([("s-03", IDLE)], 5)
    checkpointing = SessionRecord(
        id="s-06", project_id="p", workspace_id="w-even", state=SessionState.CHECKPOINTING
    )
    services.checkpoints.begin(checkpointing, "op-1")


def every_page(services: Any, limit: int, **filters: Any) -> list[SessionSummary]:
    found: list[SessionSummary] = []
    before = None
    while True:
        page = services.sessions.page(before=before, limit=limit, **filters)
        assert len(page.sessions) <= limit
        found.extend(page.sessions)
        if page.next_before is None:
            return found
        assert len(page.sessions) == limit
        before = page.next_before


def order(summaries: list[SessionSummary]) -> list[str]:
    return [summary.session.id for summary in summaries]


def newest_first(summaries: list[SessionSummary]) -> list[str]:
    keys = [(summary.created_at, summary.session.id) for summary in summaries]
    return [session_id for _, session_id in sorted(keys, reverse=True)]


@pytest.mark.parametrize("limit", [1, 5, 12, 50])
@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"workspace_id": "w-odd"},
        {"state": SessionState.CLOSED},
        {"workspace_id": "w-even", "state": SessionState.RUNNING},
    ],
    ids=str,
)
def test_paging_gives_every_session_once_newest_first(
    store: Store, limit: int, filters: dict[str, Any]
) -> None:
    fill(store)
    pages = every_page(store, limit, **filters)
    expected = {
        record.id
        for record in store.sessions.list(workspace_id=filters.get("workspace_id"))
        if filters.get("state") in (None, record.state)
    }
    assert sorted(order(pages)) == sorted(expected)
    assert order(pages) == newest_first(pages)


def test_a_row_carries_its_activity_and_open_operation(store: Store) -> None:
    fill(store)
    rows = {summary.session.id: summary for summary in every_page(store, 50)}
    assert rows["s-03"].activity == IDLE and rows["s-03"].checkpoint_operation is None
    operation = rows["s-06"].checkpoint_operation
    assert operation is not None and (operation.session_id, operation.command_id) == (
        "s-06",
        "op-1",
    )
    assert rows["s-06"].session == store.sessions.get("s-06")
    assert rows["s-01"].activity is None and rows["s-01"].session.workspace_id == "w-odd"
    for summary in rows.values():
        assert summary.created_at.tzinfo is not None and summary.updated_at >= summary.created_at


def test_a_session_created_meanwhile_never_shifts_a_later_page(store: Store) -> None:
    fill(store)
    first = store.sessions.page(limit=5)
    store.sessions.save(SessionRecord(id="s-new", project_id="p"))
    rest = every_page_after(store, first)
    assert "s-new" not in order(rest)
    assert sorted(order(first.sessions) + order(rest)) == [f"s-{n:02d}" for n in range(12)]
    assert store.sessions.page(limit=1).sessions[0].session.id == "s-new"


def every_page_after(store: Store, page: SessionPage) -> list[SessionSummary]:
    found: list[SessionSummary] = []
    while page.next_before is not None:
        page = store.sessions.page(before=page.next_before, limit=5)
        found.extend(page.sessions)
    return found


@pytest.mark.sync_api
def test_a_page_is_one_statement_whatever_its_size(store: Store) -> None:
    fill(store)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    engine = store._database.reader
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        assert len(store.sessions.page(limit=12).sessions) == 12
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len([text for text in statements if "FROM sessions" in text]) == 1, statements


def test_the_fakes_page_the_same_sessions() -> None:
    fake = FakeServices()
    fill(fake)
    pages = every_page(fake, 5, workspace_id="w-odd")
    assert order(pages) == [f"s-{n:02d}" for n in (11, 9, 7, 5, 3, 1)]
    assert every_page(fake, 3, state=SessionState.CHECKPOINTING)[0].checkpoint_operation


def cursor(*parts: str) -> str:
    """A cursor of the page's form (base64url JSON, no padding) holding `parts`."""
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"before": "not a cursor"}, "before is not a cursor that sessions.page gave"),
        ({"before": "W1s="}, "before is not a cursor"),  # [[ (valid base64, not a keyset)
        ({"before": "x" * 5000}, "before is not a cursor"),
        ({"before": cursor("2026-12-03 10:00:00", "\ud800")}, "before is not a cursor"),
        ({"before": cursor("2026-12-03 10:00:00", "s\x00")}, "before is not a cursor"),
        ({"before": cursor("", "s-01")}, "before is not a cursor"),
        ({"before": 5}, "before must be a string"),
        ({"state": "running"}, "state"),
        ({"workspace_id": "../w"}, "workspace_id"),
        ({"limit": "5"}, "limit must be an integer"),
    ],
)
def test_bad_arguments_are_refused(store: Store, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        store.sessions.page(**arguments)


def test_a_cursor_holds_the_databases_own_form_of_the_time(store: Store) -> None:
    """PostgreSQL: an ISO timestamp with its offset (a naive one would be read in the server's
    time zone: refused). SQLite: the stored text, compared as text."""
    fill(store)
    naive = cursor("2026-12-03 15:22:01", "s-01")
    if store.url.startswith("postgresql"):
        with pytest.raises(InvalidRecord, match="before is not a cursor"):
            store.sessions.page(before=naive)
    else:
        assert store.sessions.page(before=cursor("0000-00-00 00:00:00", "s")).sessions == []
        assert len(store.sessions.page(before=cursor("9999-12-31 23:59:59", "s")).sessions) == 12


def test_an_activity_this_code_cannot_decode_is_none_in_a_page(store: Store) -> None:
    fill(store)
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE api_session_activity SET body = :body WHERE session_id = 's-03'"),
                {"body": '{"state":"idle"}'},
            )
    finally:
        engine.dispose()
    rows = {summary.session.id: summary for summary in every_page(store, 50)}
    assert rows["s-03"].activity is None
    assert store.activity.get("s-03") is None
