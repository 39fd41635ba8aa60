"""Each page statement walks the log in seq order through an index and never sorts; a type
filter reads one index scan per type, merged, and no more rows than the page returns plus one
page.

White-box: reads the statements the event repository pages with, and the backend's plan for them
on a log of a few thousand events.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import ApiEventFilter, Store, TurnStarted
from session_journal.storage.repositories.event_pages import page_query
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import append_raw

PARAMS = {
    "after_seq": 100,
    "limit": 100,
    "session_id": "s-3",
    "workspace_id": "w-1",
    "type_0": "session_fault",
    "type_1": "turn_started",
    "type_2": "command_ended",
}


def plan(store: Store, by_session: bool, by_workspace: bool, types: int = 0) -> str:
    sqlite = store._database.reader.dialect.name == "sqlite"
    query = page_query(sqlite=sqlite, by_session=by_session, by_workspace=by_workspace, types=types)
    return explain(store, query, PARAMS)


def explain(store: Store, query: sa.Select[Any], asked: dict[str, Any]) -> str:
    """The backend's plan of `query` with the parameters `asked`."""
    engine = store._database.reader
    compiled = query.compile(engine)
    params = compiled.construct_params(asked)
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            assert compiled.positiontup is not None
            rows = connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled}", tuple(params[k] for k in compiled.positiontup)
            )
            return "\n".join(row[3] for row in rows)
        connection.execute(sa.text("ANALYZE"))
        rows = connection.exec_driver_sql(f"EXPLAIN {compiled}", params)
        return "\n".join(row[0] for row in rows)


@pytest.fixture
def big_store(store: Store) -> Store:
    for n in range(10):
        store.sessions.save(SessionFactory(id=f"s-{n}", workspace_id=f"w-{n % 5}"))
    body = SessionFaultFactory(message="x" * 200).model_dump_json()
    for n in range(10):
        append_raw(store, f"s-{n}", body, count=500)
    return store


@pytest.mark.parametrize("by_session", [False, True])
@pytest.mark.parametrize("by_workspace", [False, True])
def test_page_plans_use_an_index_in_seq_order(
    big_store: Store, by_session: bool, by_workspace: bool
) -> None:
    text = plan(big_store, by_session, by_workspace)
    if big_store._database.reader.dialect.name == "sqlite":
        assert "TEMP B-TREE" not in text
        expected = "ix_api_events_session_id_seq" if by_session else "INTEGER PRIMARY KEY"
        assert expected in text
    else:
        assert "Sort" not in text
        assert "Index" in text


@pytest.mark.parametrize("types", [1, 3])
@pytest.mark.parametrize("by_session", [False, True])
@pytest.mark.parametrize("by_workspace", [False, True])
def test_type_filtered_plans_merge_index_scans_in_seq_order(
    big_store: Store, by_session: bool, by_workspace: bool, types: int
) -> None:
    text = plan(big_store, by_session, by_workspace, types)
    expected = "ix_api_events_session_id_type_seq" if by_session else "ix_api_events_type_seq"
    if big_store._database.reader.dialect.name == "sqlite":
        assert "TEMP B-TREE" not in text
        assert "SCAN api_events" not in text
        assert text.count(f"SEARCH api_events USING INDEX {expected} ") == types
        if types > 1:
            assert "MERGE (UNION ALL)" in text
    else:
        # Each type's scan is an index scan under its limit: the type index, or (for a type
        # every row has, as session_fault here, which ANALYZE tells) the primary key.
        assert "Seq Scan on api_events" not in text
        assert "Sort" not in text.replace("Sort Key", "")
        assert len(re.findall(r"Index Scan using \S+ on api_events", text)) == types
        if types > 1:
            assert "Merge Append" in text
        if by_session:
            assert expected in text


def rows_read(node: dict[str, object]) -> int:
    """The rows the scans of `api_events` under a plan node read: returned and filtered out."""
    total = 0
    if node.get("Relation Name") == "api_events":
        total += int(node["Actual Rows"]) * int(node.get("Actual Loops", 1))  # type: ignore[call-overload]
        total += int(node.get("Rows Removed by Filter", 0))  # type: ignore[call-overload]
    for child in node.get("Plans", []):  # type: ignore[attr-defined]
        total += rows_read(child)
    return total


def test_a_rare_type_is_read_without_reading_the_others(store: Store) -> None:
    """2,005 events, 5 of them turn_started: a page of that type (alone, or with two other
    types) reads no more rows than it returns plus one page. PostgreSQL: counted by EXPLAIN
    ANALYZE. SQLite: its virtual machine's steps (a progress handler) stay below those of an
    unfiltered page of the same limit, where a scan of the log would take thousands."""
    store.sessions.save(SessionFactory(id="s"))
    common = SessionFaultFactory().model_dump_json()
    rare = TurnStarted(turn_id=1, command_id="c-1", started_at_ms=None).model_dump_json()
    for _ in range(5):
        append_raw(store, "s", common, count=400)
        append_raw(store, "s", rare)
    engine = store._database.reader
    sqlite = engine.dialect.name == "sqlite"
    tags = {"type_0": "turn_started", "type_1": "command_ended", "type_2": "input_required"}
    for types, limit in ((1, 10), (3, 10), (1, 1000), (3, 2)):
        query = page_query(sqlite=sqlite, by_session=False, by_workspace=False, types=types)
        compiled = query.compile(engine)
        params = compiled.construct_params({**PARAMS, **tags, "after_seq": 0, "limit": limit})
        page = store.events.load(ApiEventFilter(types=list(tags.values())[:types]), 0, limit)
        assert len(page.events) == min(5, limit)
        if sqlite:
            filtered = sqlite_steps(engine, compiled, params)
            unfiltered = page_query(sqlite=True, by_session=False, by_workspace=False, types=0)
            everything = sqlite_steps(
                engine,
                unfiltered.compile(engine),
                {"after_seq": 0, "limit": min(limit, 10), **params},
            )
            assert filtered < 2 * everything, (types, limit, filtered, everything)
            continue
        with engine.connect() as connection:
            connection.execute(sa.text("ANALYZE"))
            [[explained]] = connection.exec_driver_sql(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}", params
            ).fetchall()
        document = explained if isinstance(explained, list) else json.loads(explained)
        assert rows_read(document[0]["Plan"]) <= len(page.events) + limit, (types, limit)


def sqlite_steps(engine: sa.Engine, compiled: sa.Compiled, params: dict[str, object]) -> int:
    """How many virtual machine steps SQLite takes to run the statement."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    with engine.connect() as connection:
        raw = connection.connection.dbapi_connection
        assert raw is not None
        positions = compiled.positiontup or []  # type: ignore[attr-defined]
        raw.set_progress_handler(count, 1)  # type: ignore[attr-defined]
        try:
            raw.execute(str(compiled), tuple(params[name] for name in positions)).fetchall()  # type: ignore[attr-defined]
        finally:
            raw.set_progress_handler(None, 1)  # type: ignore[attr-defined]
    return steps


@pytest.mark.parametrize("by_workspace", [False, True])
def test_the_event_rate_reads_one_range_of_the_index_on_recorded_at(
    big_store: Store, by_workspace: bool
) -> None:
    from session_journal.storage.repositories import events

    query = events._MINUTE_COUNTS_OF_WORKSPACE if by_workspace else events._MINUTE_COUNTS
    # A window of an hour long ago: few of the log's rows, as a window of the last minutes is
    # of a log of days.
    asked = {"since_ms": 1_000, "until_ms": 3_601_000, "through_seq": 5_000, **PARAMS}
    text = explain(big_store, query, asked)
    assert "ix_api_events_recorded_at_ms" in text, text
