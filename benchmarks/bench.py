"""Throughput of session-journal's public API against the bare drivers (sqlite3, psycopg 3).

For SQLite (a file in a temporary directory) and PostgreSQL (a fresh schema per run, from
`SESSION_JOURNAL_BENCH_POSTGRES_URL`, default `postgresql+psycopg://root@127.0.0.1:5432/test`),
each workload runs once through the public API and once as the same work with the bare driver,
and the table reports events/s and the ratio api / bare:

1. append: `store.faults.record_startup_fault` (one durable transaction per event, ~300-byte
   body, round-robin over 50 sessions). Bare: one `INSERT` + commit per event into an equivalent
   `api_events` table (same columns, key, index and foreign key; seq counted in Python) in a
   separate file/schema; SQLite with `journal_mode=WAL`, `synchronous=FULL`, `foreign_keys=ON`.
2. catch-up: page a 200,000-event log (50 sessions in 5 workspaces) with
   `store.events.load(filter, after_seq=cursor, limit=1000)` following `next_after_seq` until a page
   is empty: all events, one session, one workspace. Bare: the same `SELECT seq, session_id,
   recorded_at_ms, body ... WHERE seq > ? [AND filter] ORDER BY seq LIMIT 1000` loop on the same
   database, fetching rows without decoding JSON. Each variant repeats until `MIN_SECONDS` pass.
3. tail: `store.events.load(after_seq=latest - 10)` repeated (10 events per call); bare: the
   same SELECT.
4. 4 writers (PostgreSQL only): 4 processes, each with its own Store, append concurrently with
   `record_startup_fault`; total events/s from the first start to the last finish. Bare: 4
   processes with psycopg doing, per event, the real path's `UPDATE event_sequences ... RETURNING
   last_seq` + `INSERT` + commit (the same row lock that orders appenders).

The log is loaded with `store.unit_of_work()` in batches of 5,000 events (not timed).
Usage: `bench.py [--quick] [--only sqlite|postgresql]`; `--quick` scales every count down ~10x.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.types.string import TextLoader

from session_journal import ApiEventFilter, OutcomeReason, SessionFault, SessionRecord, Store

POSTGRES_ENV = "SESSION_JOURNAL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES = "postgresql+psycopg://root@127.0.0.1:5432/test"
# 210 characters: the stored SessionFault body is then 300 bytes.
MESSAGE = ("image pull failed: registry timed out after 30s; retrying with backoff. " * 3)[:210]
BODY = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=MESSAGE).model_dump_json()
PAGE = 1000
TARGETS = {
    ("sqlite", "append"): 0.5,
    ("postgresql", "append"): 0.5,
    ("sqlite", "catch-up"): 0.25,
    ("postgresql", "catch-up"): 0.5,
}

Connection = Any  # a DB-API connection: sqlite3.Connection or psycopg.Connection


@dataclass(frozen=True)
class Scale:
    appends: int = 20_000
    sessions: int = 50
    workspaces: int = 5
    log_events: int = 200_000
    batch: int = 5_000
    tail_reads: int = 2_000
    processes: int = 4
    per_process: int = 5_000
    min_seconds: float = 2.0


QUICK = Scale(appends=2_000, log_events=20_000, tail_reads=200, per_process=500, min_seconds=0.3)


@dataclass
class Row:
    backend: str
    workload: str
    api: float
    bare: float
    kind: str = ""  # the key of TARGETS, if any

    @property
    def ratio(self) -> float:
        return self.api / self.bare if self.bare else 0.0


@dataclass
class Backend:
    """Where the databases of one backend live and how the bare driver connects to them."""

    name: str
    base: str  # a temporary directory (SQLite) or a server URL (PostgreSQL)
    schemas: list[str] = field(default_factory=list)

    def fresh_url(self, tag: str) -> str:
        if self.name == "sqlite":
            return f"sqlite:///{self.base}/{tag}.db"
        schema = f"sj_bench_{uuid.uuid4().hex[:10]}_{tag}"
        with closing(psycopg.connect(pg_conninfo(self.base), autocommit=True)) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        url = sa.make_url(self.base).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    def connect(self, url: str) -> Connection:
        if self.name == "sqlite":
            connection = sqlite3.connect(str(sa.make_url(url).database))
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
                connection.execute(f"PRAGMA {pragma}")
            return connection
        pg = psycopg.connect(pg_conninfo(url))
        pg.adapters.register_loader("json", TextLoader)  # rows as text, no JSON decoding
        return pg

    def sql(self, text: str) -> str:
        return text if self.name == "sqlite" else text.replace("?", "%s")

    def drop(self) -> None:
        if not self.schemas:
            return
        with closing(psycopg.connect(pg_conninfo(self.base), autocommit=True)) as admin:
            for schema in self.schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_conninfo(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


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


def rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


def repeat(work: Callable[[], int], min_seconds: float) -> float:
    """Events/s of `work` (which returns the events it handled), repeated for `min_seconds`."""
    work()  # warm-up: caches, prepared statements, pages in memory
    count, started = 0, time.perf_counter()
    while True:
        count += work()
        if time.perf_counter() - started >= min_seconds:
            return rate(count, started)


# 1. single-event append


def api_append(store: Store, sessions: Sequence[str], count: int) -> float:
    record = store.faults.record_startup_fault
    for session_id in sessions:  # warm-up
        record(session_id, MESSAGE)
    started = time.perf_counter()
    for index in range(count):
        record(sessions[index % len(sessions)], MESSAGE)
    return rate(count, started)


BARE_DDL = (
    "CREATE TABLE sessions (session_id TEXT PRIMARY KEY)",
    "CREATE TABLE api_events (seq {seq} PRIMARY KEY, session_id TEXT NOT NULL"
    " REFERENCES sessions (session_id) ON DELETE CASCADE, recorded_at_ms BIGINT NOT NULL,"
    " body {json} NOT NULL)",
    "CREATE INDEX ix_api_events_session_id_seq ON api_events (session_id, seq)",
    "CREATE TABLE event_sequences (name TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
)
INSERT = "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) VALUES (?, ?, ?, ?)"
NEXT_SEQ = (
    "UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = 'api_events'"
    " RETURNING last_seq"
)


def bare_setup(backend: Backend, url: str, sessions: Sequence[str]) -> None:
    seq, json = ("INTEGER", "TEXT") if backend.name == "sqlite" else ("BIGINT", "json")
    with closing(backend.connect(url)) as connection:
        for statement in BARE_DDL:
            connection.execute(statement.format(seq=seq, json=json))
        connection.cursor().executemany(
            backend.sql("INSERT INTO sessions VALUES (?)"), [(s,) for s in sessions]
        )
        connection.commit()


def bare_append(backend: Backend, url: str, sessions: Sequence[str], count: int) -> float:
    with closing(backend.connect(url)) as connection:
        cursor, insert = connection.cursor(), backend.sql(INSERT)
        seq = 0
        for session_id in sessions:  # warm-up
            seq += 1
            cursor.execute(insert, (seq, session_id, now_ms(), BODY))
            connection.commit()
        started = time.perf_counter()
        for index in range(count):
            cursor.execute(
                insert, (seq + 1 + index, sessions[index % len(sessions)], now_ms(), BODY)
            )
            connection.commit()
        result = rate(count, started)
        cursor.execute("INSERT INTO event_sequences SELECT 'api_events', MAX(seq) FROM api_events")
        connection.commit()
        return result


# 2. and 3. catch-up paging and tail reads

SELECT = "SELECT seq, session_id, recorded_at_ms, body FROM api_events WHERE seq > ?"
IN_WORKSPACE = " AND session_id IN (SELECT session_id FROM session_contexts WHERE workspace_id = ?)"
ORDER = " ORDER BY seq LIMIT ?"


def load_log(store: Store, scale: Scale) -> None:
    sessions, at = session_ids(scale), now_ms()
    for first in range(0, scale.log_events, scale.batch):
        with store.unit_of_work() as uow:
            for index in range(first, min(first + scale.batch, scale.log_events)):
                uow.events.append(sessions[index % len(sessions)], at + index, BODY)
            uow.commit()


def api_catch_up(store: Store, event_filter: ApiEventFilter | None) -> int:
    cursor = count = 0
    while True:
        page = store.events.load(event_filter, after_seq=cursor, limit=PAGE)
        if not page.events:
            return count
        count += len(page.events)
        cursor = page.next_after_seq


def bare_catch_up(connection: Connection, sql: str, params: tuple[Any, ...]) -> int:
    cursor, after, count = connection.cursor(), 0, 0
    while True:
        cursor.execute(sql, (after, *params, PAGE))
        rows = cursor.fetchall()
        if not rows:
            return count
        count += len(rows)
        after = rows[-1][0]


def api_tail(store: Store, calls: int) -> int:
    after = store.events.latest_seq() - 10
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
    with open_store(url, scale) as store, closing(backend.connect(url)) as connection:
        started = time.perf_counter()
        load_log(store, scale)
        print(
            f"  {backend.name}: loaded {scale.log_events:,} events in "
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )
        if backend.name == "postgresql":
            connection.autocommit = True
            connection.execute("ANALYZE")
        else:
            connection.execute("ANALYZE")
            connection.commit()
        session = session_ids(scale)[0]
        variants: list[tuple[str, ApiEventFilter | None, str, tuple[Any, ...]]] = [
            ("catch-up all", None, SELECT + ORDER, ()),
            (
                "catch-up 1 session",
                ApiEventFilter(session_id=session),
                SELECT + " AND session_id = ?" + ORDER,
                (session,),
            ),
            (
                "catch-up 1 workspace",
                ApiEventFilter(workspace_id="bench-ws-0"),
                SELECT + IN_WORKSPACE + ORDER,
                ("bench-ws-0",),
            ),
        ]
        for name, event_filter, sql, params in variants:
            api = repeat(partial(api_catch_up, store, event_filter), scale.min_seconds)
            bare_work = partial(bare_catch_up, connection, backend.sql(sql), params)
            bare = repeat(bare_work, scale.min_seconds)
            rows.append(Row(backend.name, name, api, bare, "catch-up"))
        latest = store.events.latest_seq()
        tail = partial(bare_tail, connection, backend.sql(SELECT + ORDER), scale.tail_reads)
        api = repeat(partial(api_tail, store, scale.tail_reads), scale.min_seconds)
        bare = repeat(partial(tail, latest - 10), scale.min_seconds)
        rows.append(Row(backend.name, "tail reads (10 ev/call)", api, bare))
    return rows


# 4. concurrent writers (separate processes)


def api_writer(url: str, sessions: list[str], count: int, barrier: Any, out: Any) -> None:
    with Store.open(url) as store:
        store.faults.record_startup_fault(sessions[0], MESSAGE)
        barrier.wait()
        started = time.monotonic()
        for index in range(count):
            store.faults.record_startup_fault(sessions[index % len(sessions)], MESSAGE)
        out.put((started, time.monotonic()))


def bare_writer(url: str, sessions: list[str], count: int, barrier: Any, out: Any) -> None:
    with closing(psycopg.connect(pg_conninfo(url))) as connection:
        cursor, insert = connection.cursor(), INSERT.replace("?", "%s")
        barrier.wait()
        started = time.monotonic()
        for index in range(count):
            seq = cursor.execute(NEXT_SEQ).fetchone()[0]  # type: ignore[index]
            cursor.execute(insert, (seq, sessions[index % len(sessions)], now_ms(), BODY))
            connection.commit()
        out.put((started, time.monotonic()))


def concurrent(writer: Callable[..., None], url: str, scale: Scale) -> float:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(scale.processes), context.Queue()
    args = (url, session_ids(scale), scale.per_process, barrier, out)
    processes = [context.Process(target=writer, args=args) for _ in range(scale.processes)]
    for process in processes:
        process.start()
    spans: list[tuple[float, float]] = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"{writer.__name__} exited with {process.exitcode}")
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    return scale.processes * scale.per_process / elapsed


# driver


def writes(backend: Backend, scale: Scale) -> list[Row]:
    sessions = session_ids(scale)
    api_url, bare_url = backend.fresh_url("api"), backend.fresh_url("bare")
    bare_setup(backend, bare_url, sessions)
    with open_store(api_url, scale) as store:
        api = api_append(store, sessions, scale.appends)
    bare = bare_append(backend, bare_url, sessions, scale.appends)
    rows = [Row(backend.name, "append (1 event/tx)", api, bare, "append")]
    if backend.name == "postgresql":
        api = concurrent(api_writer, api_url, scale)
        bare = concurrent(bare_writer, bare_url, scale)
        rows.append(Row(backend.name, f"append, {scale.processes} processes", api, bare))
    return rows


def postgres_version(url: str) -> str | None:
    try:
        with closing(psycopg.connect(pg_conninfo(url), connect_timeout=3)) as connection:
            row = connection.execute(
                "SELECT current_setting('server_version'), current_setting('fsync'),"
                " current_setting('synchronous_commit')"
            ).fetchone()
    except psycopg.Error as error:
        print(
            f"PostgreSQL at {url} does not answer ({str(error).strip().splitlines()[0]}): skipped"
        )
        return None
    assert row is not None
    return f"{row[0]} (fsync={row[1]}, synchronous_commit={row[2]})"


def print_table(rows: list[Row]) -> None:
    header = f"{'backend':<11}{'workload':<26}{'api ev/s':>11}{'bare ev/s':>11}{'ratio':>8}  target"
    print("\n" + header + "\n" + "-" * (len(header) + 6))
    for row in rows:
        target = TARGETS.get((row.backend, row.kind))
        verdict = (
            "-"
            if target is None
            else (f">= {target:.2f} {'PASS' if row.ratio >= target else 'MISS'}")
        )
        print(
            f"{row.backend:<11}{row.workload:<26}{row.api:>11,.0f}{row.bare:>11,.0f}"
            f"{row.ratio:>7.2f}x  {verdict}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="scale counts down ~10x")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else Scale()
    pg_url = os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    print(
        f"sqlite {sqlite3.sqlite_version}, psycopg {psycopg.__version__},"
        f" sqlalchemy {sa.__version__}"
    )
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
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
