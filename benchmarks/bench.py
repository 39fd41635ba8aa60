"""Throughput of session-journal's public API against the bare drivers (sqlite3, psycopg 3).

For SQLite (files in a temporary directory) and PostgreSQL (fresh schemas, dropped at the end, on
`SESSION_JOURNAL_BENCH_POSTGRES_URL`, default `postgresql+psycopg://root@127.0.0.1:5432/test`),
each workload runs through the public API and as the same work with the bare driver; the table
gives events/s of each and the ratio api / bare, against the targets in `TARGETS`.

1. append: `store.faults.record_startup_fault` (one durable transaction per event, 300-byte body,
   round-robin over 50 sessions). Bare: one `INSERT` + commit per event into an equivalent
   `api_events` table (same columns, key, index and foreign key; seq from `MAX(seq)` + 1) in a
   separate file/schema; SQLite with `journal_mode=WAL`, `synchronous=FULL`, `foreign_keys=ON`.
2. catch-up: page a 200,000-event log (50 sessions in 5 workspaces) with
   `store.events.load(filter, after_seq=cursor, limit=1000)` following `next_after_seq` until a page
   is empty: all events, one session, one workspace. Bare: the same `SELECT seq, session_id,
   recorded_at_ms, body ... WHERE seq > ? [AND filter] ORDER BY seq LIMIT ?` loop on the same
   database. The bare loops fetch what each driver returns by default, as the issue's reference
   figures did: sqlite3 returns the body as text (no decoding: a floor the API, which decodes
   every body into typed models, cannot approach), psycopg decodes `json` columns with
   `json.loads`. `--bare-text` makes psycopg return the text too (about 2.5x faster).
3. tail: `store.events.load(after_seq=latest - 10)` repeated (10 events per call); bare: the
   same SELECT.
4. 4 processes (PostgreSQL only), each with its own Store, append concurrently with
   `record_startup_fault`. Bare: the same processes with psycopg doing, per event, the real
   path's `UPDATE event_sequences ... RETURNING last_seq` + `INSERT` + commit (so the same row
   lock orders them), not plain inserts.

API and bare alternate (writes every `WRITE_CHUNK` events, all processes starting each turn
together; reads in `ROUNDS` turns after a warm-up pass), so drift in disk latency (fsync times on
a VM vary several-fold within seconds) or CPU contention hits both alike. The log is loaded
untimed with `store.unit_of_work()` in batches of 5,000 events.
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
BARE_TEXT = False  # --bare-text
ROUNDS = 4  # read workloads: api and bare alternate this many turns
WRITE_CHUNK = 100  # write workloads: api and bare alternate every this many events
# Minimum api / bare ratio by (backend, kind of workload).
TARGETS = {("sqlite", "append"): 0.5, ("postgresql", "append"): 0.5}
TARGETS |= {("sqlite", "catch-up"): 0.25, ("postgresql", "catch-up"): 0.5}

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
        if BARE_TEXT:
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


def compare(
    api: Callable[[], int], bare: Callable[[], int], rounds: int, seconds: float = 0.0
) -> tuple[float, float]:
    """Events/s of `api` and `bare` (each returns the events it handled), run in alternating
    turns so that drift in disk latency or CPU contention hits both alike; each turn repeats its
    work for at least `seconds`."""
    if seconds:  # reads: one untimed pass each first (caches, prepared statements)
        api(), bare()
    totals = {api: [0, 0.0], bare: [0, 0.0]}
    for _ in range(rounds):
        for work, total in totals.items():
            started = now = time.perf_counter()
            while now - started <= seconds:
                total[0] += work()
                now = time.perf_counter()
            total[1] += now - started
    return totals[api][0] / totals[api][1], totals[bare][0] / totals[bare][1]


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
    with open_store(url, scale) as store, closing(backend.connect(url)) as connection:
        started = time.perf_counter()
        load_log(store, scale)
        loaded = f"{scale.log_events:,} events in {time.perf_counter() - started:.1f}s"
        print(f"  {backend.name}: loaded {loaded}", flush=True)
        connection.execute("ANALYZE")
        connection.commit()
        if backend.name == "postgresql":
            connection.autocommit = True  # bare reads: no transaction left open
        session, workspace = session_ids(scale)[0], "bench-ws-0"
        turns = (ROUNDS, scale.min_seconds / ROUNDS)
        variants: list[tuple[str, ApiEventFilter | None, str, tuple[str, ...]]] = [
            ("catch-up all", None, SELECT + ORDER, ()),
            ("catch-up 1 session", ApiEventFilter(session_id=session), BY_SESSION, (session,)),
            (
                "catch-up 1 workspace",
                ApiEventFilter(workspace_id=workspace),
                IN_WORKSPACE,
                (workspace,),
            ),
        ]
        for name, event_filter, sql, params in variants:
            api = partial(api_catch_up, store, event_filter)
            bare = partial(bare_catch_up, connection, backend.sql(sql), params)
            rows.append(Row(backend.name, name, *compare(api, bare, *turns), "catch-up"))
        after = store.events.latest_seq() - 10
        api = partial(api_tail, store, scale.tail_reads, after)
        bare = partial(bare_tail, connection, backend.sql(SELECT + ORDER), scale.tail_reads, after)
        rows.append(Row(backend.name, "tail reads (10 ev/call)", *compare(api, bare, *turns)))
    return rows


# 4. concurrent writers (separate processes)


def bare_sequenced_append(connection: Connection, sessions: Sequence[str], count: int) -> int:
    cursor, insert = connection.cursor(), INSERT.replace("?", "%s")
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
        works = {"api": partial(api_append, store), "bare": partial(bare_sequenced_append, bare)}
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
        rates = compare(api, bare, scale.appends // WRITE_CHUNK)
        rows = [Row(backend.name, "append (1 event/tx)", *rates, "append")]
    if backend.name == "postgresql":
        rates = concurrent(api_url, bare_url, scale)
        rows.append(Row(backend.name, f"append, {scale.processes} processes", *rates))
    return rows


def postgres_version(url: str) -> str | None:
    try:
        with closing(psycopg.connect(pg_conninfo(url), connect_timeout=3)) as connection:
            row = connection.execute(
                "SELECT current_setting('server_version'), current_setting('fsync'),"
                " current_setting('synchronous_commit')"
            ).fetchone()
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0]
        print(f"PostgreSQL at {url} does not answer ({reason}): skipped")
        return None
    assert row is not None
    return f"{row[0]} (fsync={row[1]}, synchronous_commit={row[2]})"


def print_table(rows: list[Row]) -> None:
    header = f"{'backend':<11}{'workload':<26}{'api ev/s':>11}{'bare ev/s':>11}{'ratio':>8}  target"
    print("\n" + header + "\n" + "-" * (len(header) + 6))
    for row in rows:
        target, ratio = TARGETS.get((row.backend, row.kind)), row.api / row.bare
        verdict = "-" if target is None else f">= {target:.2f} "
        verdict += "" if target is None else ("PASS" if ratio >= target else "MISS")
        numbers = f"{row.api:>11,.0f}{row.bare:>11,.0f}{ratio:>7.2f}x"
        print(f"{row.backend:<11}{row.workload:<26}{numbers}  {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="scale counts down ~10x")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    parser.add_argument(
        "--bare-text", action="store_true", help="bare psycopg reads json columns as text"
    )
    args = parser.parse_args(argv)
    global BARE_TEXT
    BARE_TEXT = args.bare_text
    scale = QUICK if args.quick else Scale()
    pg_url = os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES
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
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
