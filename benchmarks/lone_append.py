"""Where a lone append's time goes: `store.faults.record_startup_fault` (the service: arguments
checked, the body encoded, then the write path), the write path's short path alone
(`WritePath.submit_lone` of an `AppendIfSessionExists` whose body is encoded already) and the bare
driver sending the statements the short path sends (SQLite: `BEGIN IMMEDIATE`, the seq taken if
the session exists, the `INSERT`, `COMMIT`; PostgreSQL: one call of `session_journal_append_event`
in autocommit), each on a database of the store's schema, 50 sessions, 300-byte bodies. On
SQLite a fourth: the bare driver sending the loop the lone-append target names, the session
checked by a `SELECT` of its own before the seq is taken ("bare, check apart").

Per backend, durable (SQLite `synchronous=FULL`, PostgreSQL's commit waiting for its WAL flush),
and on SQLite once more with `synchronous=OFF` (no fsync: what is left is the CPU). They
alternate in chunks of 100 calls for at least 5 rounds; the table gives each one's median per
call: the wall time and this process's user and system CPU time (`getrusage`). The service's
share is the first row less the second, the write path's the second less the third.
Usage: `lone_append.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from functools import partial
from typing import Any

import psycopg
import sqlalchemy as sa
from _databases import POSTGRES
from _harness import (
    QUICK,
    Backend,
    Scale,
    backends_to_run,
    bench_arguments,
    now_ms,
    pg_conninfo,
)
from bench import BODY, MESSAGE, open_store, session_ids

from session_journal import SessionRecord, Store, StoreOptions
from session_journal._validation import EncodedJson
from session_journal.storage.lone import AppendIfSessionExists

CHUNK = 100

# The statements of a lone append, as the bare driver sends them (what the write path's short
# path sends, written by hand).
BARE_SEQ = (
    "UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = 'api_events'"
    " AND EXISTS (SELECT * FROM sessions WHERE session_id = ?) RETURNING last_seq"
)
BARE_INSERT = (
    "INSERT INTO api_events (seq, session_id, recorded_at_ms, body, body_canonical)"
    " VALUES (?, ?, ?, ?, ?)"
)
# The loop the lone-append target names (issue 39): the session checked by a SELECT of its own,
# then the seq taken (the short path folds the check into the seq statement).
BARE_SESSION = "SELECT 1 FROM sessions WHERE session_id = ?"
BARE_TAKE_SEQ = (
    "UPDATE event_sequences SET last_seq = last_seq + 1 WHERE name = 'api_events'"
    " RETURNING last_seq"
)
BARE_CALL = (  # as SQLAlchemy compiles the short path's call for psycopg
    "SELECT session_journal_append_event(%s::VARCHAR, %s::BIGINT, %s::VARCHAR, %s)"
    " AS session_journal_append_event_1"
)


def bare_connection(backend: Backend, url: str, synchronous: str = "FULL") -> Any:
    """The bare driver on a store's database: sqlite3 with the store's pragmas and its own
    transaction handling off; psycopg in autocommit."""
    if backend.name == "sqlite":
        connection = sqlite3.connect(str(sa.make_url(url).database), isolation_level=None)
        for pragma in ("journal_mode=WAL", f"synchronous={synchronous}", "foreign_keys=ON"):
            connection.execute(f"PRAGMA {pragma}")
        return connection
    return psycopg.connect(pg_conninfo(url), autocommit=True)


def bare_append(backend: Backend, connection: Any, sessions: Sequence[str], count: int) -> int:
    """Lone appends of the bodies `bench.api_append` writes, by the bare driver."""
    cursor = connection.cursor()
    if backend.name == "postgresql":
        for index in range(count):
            session = sessions[index % len(sessions)]
            cursor.execute(BARE_CALL, (session, now_ms(), BODY, True)).fetchone()
        return count
    for index in range(count):
        session = sessions[index % len(sessions)]
        cursor.execute("BEGIN IMMEDIATE")
        seq = cursor.execute(BARE_SEQ, (session,)).fetchone()[0]
        cursor.execute(BARE_INSERT, (seq, session, now_ms(), BODY, True))
        cursor.execute("COMMIT")
    return count


def bare_append_checked_apart(connection: Any, sessions: Sequence[str], count: int) -> int:
    """Lone appends by the bare SQLite driver as the target's loop sends them: `BEGIN
    IMMEDIATE`, the session `SELECT`, the seq `UPDATE ... RETURNING`, the `INSERT`, `COMMIT`."""
    cursor = connection.cursor()
    for index in range(count):
        session = sessions[index % len(sessions)]
        cursor.execute("BEGIN IMMEDIATE")
        if cursor.execute(BARE_SESSION, (session,)).fetchone() is None:
            cursor.execute("ROLLBACK")
            continue
        seq = cursor.execute(BARE_TAKE_SEQ).fetchone()[0]
        cursor.execute(BARE_INSERT, (seq, session, now_ms(), BODY, True))
        cursor.execute("COMMIT")
    return count


def service_append(store: Store, sessions: Sequence[str], count: int) -> int:
    for index in range(count):
        store.faults.record_startup_fault(sessions[index % len(sessions)], MESSAGE)
    return count


def short_path_append(store: Store, sessions: Sequence[str], count: int) -> int:
    write_path, body = store._database.write_path, EncodedJson(BODY)
    for index in range(count):
        write = AppendIfSessionExists(sessions[index % len(sessions)], now_ms(), body)
        write_path.submit_lone(write, "append")
    return count


def per_call(work: Callable[[int], int], samples: list[tuple[float, float, float]]) -> None:
    """Run one chunk; add its wall, user and system microseconds per call to `samples`."""
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    calls = work(CHUNK)
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    scale = 1e6 / calls
    samples.append(
        (
            wall * scale,
            (after.ru_utime - before.ru_utime) * scale,
            (after.ru_stime - before.ru_stime) * scale,
        )
    )


def measure(backend: Backend, scale: Scale, rounds: int, synchronous: str) -> list[tuple[str, ...]]:
    """The three paths on `backend` with SQLite's `synchronous` (PostgreSQL ignores it)."""
    sessions = session_ids(scale)
    options = StoreOptions(sqlite_synchronous=synchronous.lower())
    ours, theirs = backend.fresh_url("lone"), backend.fresh_url("lone_bare")
    open_store(theirs, scale).close()  # the bare side's database: the store's schema, sessions
    with (
        Store.open(ours, upgrade=True, options=options) as store,
        closing(bare_connection(backend, theirs, synchronous)) as bare,
    ):
        for session_id in sessions:
            store.sessions.save(SessionRecord(id=session_id, project_id="p", workspace_id="w"))
        works: dict[str, Callable[[int], int]] = {
            "record_startup_fault": partial(service_append, store, sessions),
            "the short path alone": partial(short_path_append, store, sessions),
            "bare statements": partial(bare_append, backend, bare, sessions),
        }
        if backend.name == "sqlite":
            works["bare, check apart"] = partial(bare_append_checked_apart, bare, sessions)
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in works}
        for work in works.values():
            work(CHUNK)  # warm-up
        for _ in range(rounds):
            for name, work in works.items():
                per_call(work, samples[name])
    durable = "durable" if synchronous == "FULL" else "synchronous=OFF"
    return [
        (
            backend.name,
            durable,
            name,
            *(f"{statistics.median(s):.1f}" for s in zip(*taken, strict=True)),
        )
        for name, taken in samples.items()
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    scale, rounds = (QUICK, 5) if args.quick else (Scale(), 30)
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-lone-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                rows += measure(backend, scale, rounds, "FULL")
                if backend.name == "sqlite":
                    rows += measure(backend, scale, rounds, "OFF")
            finally:
                backend.drop()
    print("\nwhere a lone append's time goes (microseconds a call, medians of the rounds)")
    header = ("backend", "durability", "path", "wall", "user CPU", "system CPU")
    widths = [10, 16, 22, 8, 9, 10]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
