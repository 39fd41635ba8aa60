"""Throughput of session-journal's public API against the bare drivers (sqlite3, psycopg 3).

For SQLite (files in a temporary directory) and PostgreSQL (fresh schemas, dropped at the end, on
`SESSION_JOURNAL_BENCH_POSTGRES_URL`, default `postgresql+psycopg://root@127.0.0.1:5432/test`),
each workload runs through the public API and as the same work with the bare driver; the table
gives events/s of each and the ratio api / bare, against the targets in `TARGETS`.

1. append: `store.faults.record_startup_fault` (one durable transaction per event, 300-byte body,
   round-robin over 50 sessions). Bare: one `INSERT` + commit per event into an equivalent
   `api_events` table (same columns, key, indexes, the type filter's of revision 0010
   included, and foreign key; seq from `MAX(seq)` + 1) in a
   separate file/schema; SQLite with `journal_mode=WAL`, `synchronous=FULL`, `foreign_keys=ON`.
   "append, bare seq row too" (target 0.8, issue 23): the bare loop also takes each seq from an
   `event_sequences` row (`UPDATE ... RETURNING`), as the API must to keep the frontier.
2. catch-up: page a 200,000-event log (50 sessions in 5 workspaces) with
   `store.events.load(filter, after_seq=cursor, limit=1000)` following `next_after_seq` until a page
   is empty: all events, one session, one workspace. Bare: the same `SELECT seq, session_id,
   recorded_at_ms, body ... WHERE seq > ? [AND filter] ORDER BY seq LIMIT ?` loop on the same
   database. The bare loops fetch what each driver returns by default, as the issue's reference
   figures did: sqlite3 returns the body as text, psycopg decodes `json` columns with
   `json.loads`. The API decodes every body with the page. Two more rows,
   without targets: "catch-up all, bare text" (PostgreSQL: psycopg returns the text, as sqlite3
   does) and "catch-up all, bodies read" (every body is read on both sides: the API decodes it
   into the typed model; bare sqlite3 calls `json.loads`, psycopg has decoded it already).
3. tail: `store.events.load(after_seq=latest - 10)` repeated (10 events per call); bare: the
   same SELECT.
2b/3b. typed and JSON rows (issue 23): "catch-up typed / TypeAdapter" and "tail typed /
   TypeAdapter" (the API's pages against fetching the text and decoding each body with the
   API's own `TypeAdapter`); "catch-up load_json / text" and "tail load_json / text"
   (`load_json` against the bare driver fetching the rows as text).
4. 4 processes (PostgreSQL only), each with its own Store, append concurrently with
   `record_startup_fault`. Bare: the same processes with psycopg doing, per event, the real
   path's `UPDATE event_sequences ... RETURNING last_seq` + `INSERT` + commit (so the same row
   lock orders them), not plain inserts.

API and bare alternate (writes every `WRITE_CHUNK` events, all processes starting each turn
together; reads in `ROUNDS` turns after a warm-up pass), so drift in disk latency (fsync times on
a VM vary several-fold within seconds) or CPU contention hits both alike. Each row gives the
medians over its rounds (at least 5: events/s of each side and the rounds' ratios) and the
1-minute load average beside them; a ratio within 5 % of its target is measured once more and,
if it still is, reported "at target" (`_harness.measure`). The log is loaded
untimed with `store.unit_of_work()` in batches of 5,000 events.
Usage: `bench.py [--quick] [--only sqlite|postgresql]`; `--quick` scales every count down ~10x.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from functools import partial
from typing import Any

import psycopg
import sqlalchemy as sa
from _databases import POSTGRES
from _harness import (
    QUICK,
    Backend,
    Connection,
    Row,
    Scale,
    compare,
    measure,
    now_ms,
    pg_conninfo,
    postgres_version,
    print_table,
)

from session_journal import ApiEventFilter, OutcomeReason, SessionFault, SessionRecord, Store
from session_journal.api_events import EVENT_DATA

# 210 characters: the stored SessionFault body is then 300 bytes.
MESSAGE = ("image pull failed: registry timed out after 30s; retrying with backoff. " * 3)[:210]
BODY = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=MESSAGE).model_dump_json()
PAGE = 1000
ROUNDS = 5  # read workloads: api and bare alternate this many turns (the median is reported)
WRITE_CHUNK = 100  # write workloads: api and bare alternate every this many events
# Minimum api / bare ratio by (backend, kind of workload).
TARGETS = {("sqlite", "append"): 0.5, ("postgresql", "append"): 0.5}
TARGETS |= {("sqlite", "seq append"): 0.8, ("postgresql", "seq append"): 0.8}
# The SQLite target of catch-up with bodies not read is retired (issue 23): the typed rows
# (every body decoded, against a bare loop decoding each with the same TypeAdapter) and the
# JSON rows (`load_json`, against the bare driver fetching the text) replace it.
TARGETS |= {("postgresql", "catch-up"): 0.5}
# Typed catch-up against the same bare loop: 0.5 (the immutable-events issue, which set the
# bold target against eventsourcing instead: benchmarks/versus_eventsourcing.py).
TARGETS |= {("sqlite", "typed"): 0.5, ("postgresql", "typed"): 0.5}
TARGETS |= {("sqlite", "json"): 0.5, ("postgresql", "json"): 0.5}
TARGETS |= {("sqlite", "typed tail"): 0.5, ("postgresql", "typed tail"): 0.5}
TARGETS |= {("sqlite", "json tail"): 0.35, ("postgresql", "json tail"): 0.7}


def session_ids(scale: Scale) -> list[str]:
    return [f"bench-session-{index:03d}" for index in range(scale.sessions)]


def open_store(url: str, scale: Scale) -> Store:
    store = Store.open(url, upgrade=True)
    for index, session_id in enumerate(session_ids(scale)):
        workspace = f"bench-ws-{index % scale.workspaces}"
        store.sessions.save(
            SessionRecord(id=session_id, project_id="bench-project", workspace_id=workspace)
        )
    return store


# 1. single-event append


def api_append(store: Store, sessions: Sequence[str], count: int) -> int:
    for index in range(count):
        store.faults.record_startup_fault(sessions[index % len(sessions)], MESSAGE)
    return count


BARE_DDL = (
    "CREATE TABLE sessions (session_id TEXT PRIMARY KEY)",
    "CREATE TABLE api_events (seq {seq} PRIMARY KEY, session_id TEXT NOT NULL"
    " REFERENCES sessions (session_id) ON DELETE CASCADE, recorded_at_ms BIGINT NOT NULL,"
    " body {json} NOT NULL)",
    "CREATE INDEX ix_api_events_session_id_seq ON api_events (session_id, seq)",
    # The type filter's indexes (revision 0010), on the same tag expressions: the same work.
    "CREATE INDEX ix_api_events_type_seq ON api_events ({tag}, seq)",
    "CREATE INDEX ix_api_events_session_id_type_seq ON api_events (session_id, {tag}, seq)",
    "CREATE TABLE event_sequences (name TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
)
TAG = {
    "sqlite": "(CASE WHEN json_valid(body) THEN json_extract(body, '$.type') END)",
    "postgresql": "session_journal_event_type(body)",
}
# PostgreSQL: the function of revision 0010, in the bare schema.
BARE_TAG_FUNCTION = (
    "CREATE FUNCTION session_journal_event_type(body json) RETURNS text LANGUAGE sql IMMUTABLE "
    "PARALLEL SAFE AS $$ SELECT CASE WHEN strpos(body::text, E'\\\\u0000') = 0 "
    "THEN body ->> 'type' "
    "ELSE replace(body::text, E'\\\\u0000', E'\\\\u0001')::json ->> 'type' END $$"
)
INSERT = "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) VALUES (?, ?, ?, ?)"
NEXT_SEQ = (
    "UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = 'api_events'"
    " RETURNING last_seq"
)


def bare_setup(backend: Backend, url: str, sessions: Sequence[str]) -> None:
    seq, json = ("INTEGER", "TEXT") if backend.name == "sqlite" else ("BIGINT", "json")
    with closing(backend.connect(url)) as connection:
        if backend.name == "postgresql":
            connection.execute(BARE_TAG_FUNCTION)
        for statement in BARE_DDL:
            connection.execute(statement.format(seq=seq, json=json, tag=TAG[backend.name]))
        connection.cursor().executemany(
            backend.sql("INSERT INTO sessions VALUES (?)"), [(s,) for s in sessions]
        )
        # 4 processes take seqs from here; single appends count from MAX(seq) below it.
        connection.execute("INSERT INTO event_sequences VALUES ('api_events', 1000000000)")
        connection.commit()


def bare_append(connection: Connection, sql: str, sessions: Sequence[str], count: int) -> int:
    cursor = connection.cursor()
    first = cursor.execute("SELECT COALESCE(MAX(seq), 0) FROM api_events").fetchone()[0]
    connection.commit()
    for index in range(count):
        cursor.execute(sql, (first + 1 + index, sessions[index % len(sessions)], now_ms(), BODY))
        connection.commit()
    return count


# 2. and 3. catch-up paging and tail reads

SELECT = "SELECT seq, session_id, recorded_at_ms, body FROM api_events WHERE seq > ?"
ORDER = " ORDER BY seq LIMIT ?"
BY_SESSION = SELECT + " AND session_id = ?" + ORDER
IN_WORKSPACE = (
    SELECT
    + " AND session_id IN (SELECT session_id FROM session_contexts WHERE workspace_id = ?)"
    + ORDER
)


def load_log(store: Store, scale: Scale) -> None:
    sessions, at = session_ids(scale), now_ms()
    for first in range(0, scale.log_events, scale.batch):
        with store.unit_of_work() as uow:
            for index in range(first, min(first + scale.batch, scale.log_events)):
                uow.events.append(sessions[index % len(sessions)], at + index, BODY)
            uow.commit()


def api_catch_up(store: Store, event_filter: ApiEventFilter | None, read_bodies: bool) -> int:
    cursor = count = 0
    while True:
        page = store.events.load(event_filter, after_seq=cursor, limit=PAGE)
        if not page.events:
            return count
        if read_bodies:
            for event in page.events:
                event.event  # noqa: B018 (decodes the body)
        count += len(page.events)
        cursor = page.next_after_seq


def bare_catch_up(
    connection: Connection, sql: str, params: tuple[Any, ...], read_bodies: bool
) -> int:
    cursor, after, count = connection.cursor(), 0, 0
    while True:
        cursor.execute(sql, (after, *params, PAGE))
        rows = cursor.fetchall()
        if not rows:
            return count
        if read_bodies:
            for row in rows:
                json.loads(row[3])
        count += len(rows)
        after = rows[-1][0]


def api_json_catch_up(store: Store) -> int:
    cursor = count = 0
    while True:
        page = store.events.load_json(after_seq=cursor, limit=PAGE)
        at = page.rfind(b'"next_after_seq":') + len(b'"next_after_seq":')
        after = int(page[at : page.index(b",", at)])
        if after == cursor:
            return count
        count += after - cursor  # a log without holes: one event per seq
        cursor = after


def bare_typed_catch_up(connection: Connection, sql: str) -> int:
    """Fetch the rows as text and decode each body with the API's own TypeAdapter."""
    cursor, after, count = connection.cursor(), 0, 0
    validate = EVENT_DATA.validate_json
    while True:
        cursor.execute(sql, (after, PAGE))
        rows = cursor.fetchall()
        if not rows:
            return count
        for row in rows:
            validate(row[3])
        count += len(rows)
        after = rows[-1][0]


def api_json_tail(store: Store, calls: int, after: int) -> int:
    for _ in range(calls):
        page = store.events.load_json(after_seq=after)
    return calls * page.count(b'"seq":')


def bare_typed_tail(connection: Connection, sql: str, calls: int, after: int) -> int:
    cursor, validate = connection.cursor(), EVENT_DATA.validate_json
    for _ in range(calls):
        cursor.execute(sql, (after, 100))
        events = [validate(row[3]) for row in cursor.fetchall()]
    return calls * len(events)


def api_tail(store: Store, calls: int, after: int) -> int:
    for _ in range(calls):
        events = len(store.events.load(after_seq=after).events)
    return calls * events


def bare_tail(connection: Connection, sql: str, calls: int, after: int) -> int:
    cursor = connection.cursor()
    for _ in range(calls):
        cursor.execute(sql, (after, 100))
        events = len(cursor.fetchall())
    return calls * events


def reads(backend: Backend, scale: Scale) -> list[Row]:
    url = backend.fresh_url("log")
    rows = []
    with (
        open_store(url, scale) as store,
        closing(backend.connect(url)) as connection,
        closing(backend.connect(url, json_as_text=True)) as text,
    ):
        started = time.perf_counter()
        load_log(store, scale)
        loaded = f"{scale.log_events:,} events in {time.perf_counter() - started:.1f}s"
        print(f"  {backend.name}: loaded {loaded}", flush=True)
        connection.execute("ANALYZE")
        connection.commit()
        if backend.name == "postgresql":  # bare reads: no transaction left open
            connection.autocommit = text.autocommit = True
        session, workspace = session_ids(scale)[0], "bench-ws-0"
        turns = (ROUNDS, scale.min_seconds / ROUNDS)
        by_session, by_workspace = (
            ApiEventFilter(session_id=session),
            ApiEventFilter(workspace_id=workspace),
        )
        # (workload, filter, bare SQL and its parameters, bodies read, bare connection, kind)
        variants: list[tuple[str, ApiEventFilter | None, str, tuple[str, ...], bool, Any, str]]
        variants = [
            ("catch-up all", None, SELECT + ORDER, (), False, connection, "catch-up"),
            (
                "catch-up 1 session",
                by_session,
                BY_SESSION,
                (session,),
                False,
                connection,
                "catch-up",
            ),
            (
                "catch-up 1 workspace",
                by_workspace,
                IN_WORKSPACE,
                (workspace,),
                False,
                connection,
                "catch-up",
            ),
            ("catch-up all, bodies read", None, SELECT + ORDER, (), True, connection, ""),
        ]
        if backend.name == "postgresql":
            variants.insert(
                3, ("catch-up all, bare text", None, SELECT + ORDER, (), False, text, "")
            )
        for name, event_filter, sql, params, read_bodies, bare_connection, kind in variants:
            api = partial(api_catch_up, store, event_filter, read_bodies)
            # Bodies that psycopg decoded already need no json.loads.
            decode = read_bodies and backend.name == "sqlite"
            bare = partial(bare_catch_up, bare_connection, backend.sql(sql), params, decode)
            rows.append(
                measure(backend.name, name, kind, TARGETS, partial(compare, api, bare, *turns))
            )
        everything = backend.sql(SELECT + ORDER)
        api = partial(api_catch_up, store, None, True)
        bare = partial(bare_typed_catch_up, text, everything)
        rows.append(
            measure(
                backend.name,
                "catch-up typed / TypeAdapter",
                "typed",
                TARGETS,
                partial(compare, api, bare, *turns),
            )
        )
        api = partial(api_json_catch_up, store)
        bare = partial(bare_catch_up, text, everything, (), False)
        rows.append(
            measure(
                backend.name,
                "catch-up load_json / text",
                "json",
                TARGETS,
                partial(compare, api, bare, *turns),
            )
        )
        after, calls = store.events.latest_seq() - 10, scale.tail_reads
        api = partial(api_tail, store, calls, after)
        bare = partial(bare_tail, connection, everything, calls, after)
        rows.append(Row(backend.name, "tail reads (10 ev/call)", *compare(api, bare, *turns)))
        bare = partial(bare_typed_tail, text, everything, calls, after)
        typed = partial(compare, api, bare, *turns)
        rows.append(measure(backend.name, "tail typed / TypeAdapter", "typed tail", TARGETS, typed))
        api = partial(api_json_tail, store, calls, after)
        bare = partial(bare_tail, text, everything, calls, after)
        rows.append(
            measure(
                backend.name,
                "tail load_json / text",
                "json tail",
                TARGETS,
                partial(compare, api, bare, *turns),
            )
        )
    return rows


# 4. concurrent writers (separate processes)


def bare_sequenced_append(
    connection: Connection, insert: str, sessions: Sequence[str], count: int
) -> int:
    """Appends as the API makes them: the seq from `event_sequences`, then the insert."""
    cursor = connection.cursor()
    for index in range(count):
        seq = cursor.execute(NEXT_SEQ).fetchone()[0]
        cursor.execute(insert, (seq, sessions[index % len(sessions)], now_ms(), BODY))
        connection.commit()
    return count


def writer(api_url: str, bare_url: str, scale: Scale, barrier: Any, out: Any) -> None:
    """One of the concurrent processes: API and bare turns of `WRITE_CHUNK` events, each turn
    started by all processes together."""
    sessions = session_ids(scale)
    with Store.open(api_url) as store, closing(psycopg.connect(pg_conninfo(bare_url))) as bare:
        sequenced = partial(bare_sequenced_append, bare, INSERT.replace("?", "%s"))
        works = {"api": partial(api_append, store), "bare": sequenced}
        for work in works.values():
            work(sessions, len(sessions))  # warm-up
        for turn in range(scale.per_process // WRITE_CHUNK):
            for kind, work in works.items():
                barrier.wait()
                started = time.monotonic()
                work(sessions, WRITE_CHUNK)
                out.put((turn, kind, started, time.monotonic()))


def concurrent(api_url: str, bare_url: str, scale: Scale) -> tuple[float, float]:
    """Events/s of all processes together: each turn lasts from its first start to its last end."""
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(scale.processes), context.Queue()
    args = (api_url, bare_url, scale, barrier, out)
    processes = [context.Process(target=writer, args=args) for _ in range(scale.processes)]
    for process in processes:
        process.start()
    turns = scale.per_process // WRITE_CHUNK
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for _ in range(scale.processes * turns * 2):
        turn, kind, started, ended = out.get(timeout=600)
        spans.setdefault((turn, kind), []).append((started, ended))
    for process in processes:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"a writer process exited with {process.exitcode}")
    elapsed = {"api": 0.0, "bare": 0.0}
    for (_, kind), times in spans.items():
        elapsed[kind] += max(end for _, end in times) - min(start for start, _ in times)
    total = scale.processes * turns * WRITE_CHUNK
    return total / elapsed["api"], total / elapsed["bare"]


# driver


def writes(backend: Backend, scale: Scale) -> list[Row]:
    sessions = session_ids(scale)
    api_url, bare_url = backend.fresh_url("api"), backend.fresh_url("bare")
    bare_setup(backend, bare_url, sessions)
    with open_store(api_url, scale) as store, closing(backend.connect(bare_url)) as connection:
        insert = backend.sql(INSERT)
        api_append(store, sessions, len(sessions))  # warm-up
        bare_append(connection, insert, sessions, len(sessions))
        api = partial(api_append, store, sessions, WRITE_CHUNK)
        bare = partial(bare_append, connection, insert, sessions, WRITE_CHUNK)
        rates = partial(compare, api, bare, scale.appends // WRITE_CHUNK)
        rows = [measure(backend.name, "append (1 event/tx)", "append", TARGETS, rates)]
        bare = partial(bare_sequenced_append, connection, insert, sessions, WRITE_CHUNK)
        rates = partial(compare, api, bare, scale.appends // WRITE_CHUNK)
        rows.append(measure(backend.name, "append, bare seq row too", "seq append", TARGETS, rates))
    if backend.name == "postgresql":
        rates = concurrent(api_url, bare_url, scale)
        rows.append(Row(backend.name, f"append, {scale.processes} processes", *rates))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="scale counts down ~10x")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else Scale()
    pg_url = POSTGRES
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    versions = f"psycopg {psycopg.__version__}, sqlalchemy {sa.__version__}"
    print(f"sqlite {sqlite3.sqlite_version}, {versions}")
    pg = None if args.only == "sqlite" else postgres_version(pg_url)
    if pg:
        print(f"postgresql {pg}")
    print(f"scale: {scale}", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-") as directory:
        backends = [] if args.only == "postgresql" else [Backend("sqlite", directory)]
        if pg:
            backends.append(Backend("postgresql", pg_url))
        for backend in backends:
            try:
                rows += writes(backend, scale)
                rows += reads(backend, scale)
            finally:
                backend.drop()
    print_table(rows, TARGETS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
