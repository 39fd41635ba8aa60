"""A type-filtered catch-up of a rare type over a long log (issue 23): what it reads and how fast.

A log of 1,000,000 events (`--quick`: 100,000) of one session, one in 1,000 a `turn_started`
and the rest `session_fault`s, written with one SQL statement into a migrated database (the
database fills the type indexes of revision 0010 as it would for any writer). Then
`store.events.load(ApiEventFilter(types=["turn_started"]), after_seq=cursor, limit=1000)` pages
it from 0 until a page is empty.

The bare loop is that index scan by the driver (the tag expression of revision 0010), each
body decoded with the API's TypeAdapter. Rows read: PostgreSQL counts them (`EXPLAIN
ANALYZE` of each page's statement: the rows its scans of `api_events` returned or filtered
out). SQLite has no such count; the virtual machine's steps of each page's statement (a
progress handler), divided by the steps an unfiltered page takes per event, give the rows'
worth it read. Target: no more than the events returned plus one page (1,000). Beside it,
events/s of the API's catch-up against the bare loop.
Usage: `type_filter.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from typing import Any

import psycopg
import sqlalchemy as sa
from _databases import POSTGRES, database
from _harness import bench_arguments, pg_conninfo, postgres_version

from session_journal import ApiEventFilter, SessionFault, SessionRecord, Store, TurnStarted
from session_journal.api_events import EVENT_DATA
from session_journal.storage.repositories.event_pages import page_query

PAGE = 1000
RARE = TurnStarted(turn_id=1, command_id="c-1", started_at_ms=None).model_dump_json()
COMMON = SessionFault(reason="startup_failed", message="x" * 200).model_dump_json()
FILTER = ApiEventFilter(types=["turn_started"])


def fill(store: Store, events: int) -> None:
    """`events` events of session `s`, one in 1,000 `turn_started`, in one statement."""
    store.sessions.save(SessionRecord(id="s", project_id="p", workspace_id="w"))
    engine = sa.create_engine(store.url)
    numbers = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :events) "
        "SELECT i FROM n"
        if engine.dialect.name == "sqlite"
        else "SELECT generate_series(1, :events) AS i"
    )
    body = "CAST(:common AS JSON)" if engine.dialect.name == "postgresql" else ":common"
    rare = "CAST(:rare AS JSON)" if engine.dialect.name == "postgresql" else ":rare"
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO api_events (seq, session_id, recorded_at_ms, body, body_canonical) "
                f"SELECT i, 's', 1, CASE WHEN i % 1000 = 0 THEN {rare} ELSE {body} END, true "
                f"FROM ({numbers}) AS numbers"
            ),
            {"events": events, "common": COMMON, "rare": RARE},
        )
        connection.execute(
            sa.text("UPDATE event_sequences SET last_seq = :events WHERE name = 'api_events'"),
            {"events": events},
        )
        connection.execute(sa.text("ANALYZE"))
    engine.dispose()


def api_catch_up(store: Store) -> int:
    cursor, read = 0, 0
    while page := store.events.load(FILTER, after_seq=cursor, limit=PAGE).events:
        read += len(page)
        cursor = page[-1].seq
    return read


def statement(engine: sa.Engine, after_seq: int, types: int = 1) -> tuple[str, Any]:
    """The page statement the API runs and its parameters (white-box: the repository's)."""
    sqlite = engine.dialect.name == "sqlite"
    query = page_query(sqlite=sqlite, by_session=False, by_workspace=False, types=types)
    compiled = query.compile(engine)
    params = compiled.construct_params(
        {"after_seq": after_seq, "limit": PAGE, "type_0": "turn_started"}
    )
    if sqlite:
        return str(compiled), tuple(params[name] for name in compiled.positiontup or [])
    return str(compiled), params


TAG = {
    "sqlite": "CASE WHEN json_valid(body) THEN json_extract(body, '$.type') END",
    "postgresql": "session_journal_event_type(body)",
}


def bare_catch_up(connection: Any, backend: str) -> int:
    """The index scan of the type with the driver, by pages, each body decoded with the API's
    TypeAdapter."""
    mark = "?" if backend == "sqlite" else "%s"
    sql = (
        f"SELECT seq, session_id, recorded_at_ms, body FROM api_events WHERE {TAG[backend]} = "
        f"{mark} AND seq > {mark} ORDER BY seq LIMIT {mark}"
    )
    cursor_at, read = 0, 0
    while rows := connection.execute(sql, ("turn_started", cursor_at, PAGE)).fetchall():
        for row in rows:
            EVENT_DATA.validate_json(row[3])
        read += len(rows)
        cursor_at = rows[-1][0]
    return read


def rows_read_postgresql(url: str, engine: sa.Engine, cursors: list[int]) -> int:
    total = 0
    with closing(psycopg.connect(pg_conninfo(url))) as connection:
        for cursor_at in cursors:
            sql, params = statement(engine, cursor_at)
            [[plan]] = connection.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            total += scanned(plan[0]["Plan"] if isinstance(plan, list) else json.loads(plan))
    return total


def scanned(node: dict[str, Any]) -> int:
    total = 0
    if node.get("Relation Name") == "api_events":
        total += node["Actual Rows"] * node.get("Actual Loops", 1)
        total += node.get("Rows Removed by Filter", 0)
    return total + sum(scanned(child) for child in node.get("Plans", []))


def steps(connection: Any, sql: str, params: Any) -> int:
    count = 0

    def step() -> int:
        nonlocal count
        count += 1
        return 0

    connection.set_progress_handler(step, 1)
    try:
        connection.execute(sql, params).fetchall()
    finally:
        connection.set_progress_handler(None, 1)
    return count


def rows_read_sqlite(path: str, engine: sa.Engine, cursors: list[int]) -> float:
    import sqlite3

    with closing(sqlite3.connect(path)) as connection:
        everything, params = statement(engine, 0, types=0)
        per_event = steps(connection, everything, params) / PAGE
        total = 0
        for cursor_at in cursors:
            sql, params = statement(engine, cursor_at)
            total += steps(connection, sql, params)
    return total / per_event


def run(backend: str, events: int) -> None:
    with database(backend, "types") as url, Store.open(url, upgrade=True) as store:
        started = time.perf_counter()
        fill(store, events)
        print(f"  {backend}: {events:,} events written in {time.perf_counter() - started:.1f}s")
        cursors, cursor = [], 0
        while True:
            cursors.append(cursor)
            page = store.events.load(FILTER, after_seq=cursor, limit=PAGE)
            if not page.events:
                break
            cursor = page.events[-1].seq
        returned = events // 1000
        engine = sa.create_engine(url)
        if backend == "sqlite":
            read = rows_read_sqlite(str(engine.url.database), engine, cursors)
        else:
            read = rows_read_postgresql(url, engine, cursors)
        budget = returned + PAGE
        verdict = "PASS" if read <= budget else "MISS"
        print(
            f"  {backend}: {len(cursors)} pages returned {returned:,} events and read "
            f"{read:,.0f} rows' worth (target <= {budget:,}: {verdict})"
        )
        api_rates, bare_rates = [], []
        sqlite = backend == "sqlite"
        connect = (
            (lambda: __import__("sqlite3").connect(str(engine.url.database)))
            if sqlite
            else (lambda: psycopg.connect(pg_conninfo(url)))
        )
        with closing(connect()) as connection:
            if not sqlite:
                connection.adapters.register_loader("json", psycopg.types.string.TextLoader)
                connection.autocommit = True
            for _ in range(5):
                for rates, work in (
                    (api_rates, lambda: api_catch_up(store)),
                    (bare_rates, lambda: bare_catch_up(connection, backend)),
                ):
                    began = time.perf_counter()
                    handled = work()
                    rates.append(handled / (time.perf_counter() - began))
        engine.dispose()
        ratio = sorted(a / b for a, b in zip(api_rates, bare_rates, strict=True))[2]
        print(
            f"  {backend}: rare-type catch-up {sorted(api_rates)[2]:,.0f} events/s, bare "
            f"{sorted(bare_rates)[2]:,.0f}: {ratio:.2f}x (median of 5)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    events = 100_000 if args.quick else 1_000_000
    print("type-filtered catch-up of a rare type (1 in 1,000)")
    for backend in ("sqlite", "postgresql"):
        if args.only not in (None, backend):
            continue
        if backend == "postgresql" and not postgres_version(POSTGRES):
            continue
        run(backend, events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
