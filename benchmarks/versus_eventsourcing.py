"""session-journal against the `eventsourcing` library's recorders, on the same workloads.

Needs the benchmark extra: `pip install -e '.[postgresql,bench]'` (`make bench` installs it). Rows,
per backend, in one run, alternating turns as `bench.py` does:

1. single append: `store.faults.record_startup_fault` (one durable transaction per event,
   300-byte bodies, 50 sessions) against `ApplicationRecorder.insert_events([stored_event])`
   (one durable transaction per event, the same message in a domain event of 50 aggregates,
   encoded by eventsourcing's `Mapper` and `JSONTranscoder`);
2. typed catch-up: page a 50,000-event log 1,000 at a time reading every event as a typed
   object: `store.events.load(...)` reading `event.event` (pydantic models) against
   `select_notifications(...)` with `Mapper.to_domain_event` (eventsourcing's dataclasses).

eventsourcing's SQLite recorder runs in WAL mode with SQLite's default `synchronous` (FULL, as
ours); its PostgreSQL recorder uses psycopg 3 with its own pool, in a schema of its own.
Usage: `versus_eventsourcing.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import sqlalchemy as sa
from _databases import POSTGRES
from _harness import (
    Backend,
    Row,
    Scale,
    backends_to_run,
    bench_arguments,
    compare,
    measure,
    print_table,
)
from bench import BODY, MESSAGE, api_append, open_store, session_ids

from session_journal import Store

try:
    from eventsourcing.domain import DomainEvent
    from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
except ImportError:  # the optional extra is not installed
    DomainEvent = None

# The goals: PostgreSQL appends and typed catch-up on both backends.
GOALS = {("postgresql", "append"): 1.5, ("postgresql", "catch-up"): 1.5}
GOALS |= {("sqlite", "catch-up"): 1.5, ("sqlite", "append"): 1.0}
PAGE = 1000
CHUNK = 100


if DomainEvent is not None:

    class StartupFailed(DomainEvent):  # type: ignore[misc, valid-type]
        """The domain event eventsourcing stores: the same message as our fault bodies."""

        reason: str
        message: str


def recorder(backend: Backend, url: str) -> Any:
    """An eventsourcing application recorder on a fresh file or schema."""
    if backend.name == "sqlite":
        datastore = SQLiteDatastore(str(sa.make_url(url).database))
        made = SQLiteApplicationRecorder(datastore)
    else:
        parsed = sa.make_url(url)
        schema = parsed.query["options"].split("=", 1)[1]  # -csearch_path=<schema>
        datastore = PostgresDatastore(
            dbname=parsed.database or "",
            host=parsed.host or "127.0.0.1",
            port=parsed.port or 5432,
            user=parsed.username or "",
            password=parsed.password or "",
            schema=schema,
        )
        made = PostgresApplicationRecorder(datastore)
    made.create_table()
    return made


class Aggregates:
    """50 aggregates whose versions grow as events are appended."""

    def __init__(self) -> None:
        self.ids = [uuid.uuid4() for _ in range(50)]
        self.versions = [0] * 50
        transcoder = JSONTranscoder()  # as an eventsourcing Application sets it up
        transcoder.register(UUIDAsHex())
        transcoder.register(DatetimeAsISO())
        self.mapper = Mapper(transcoder=transcoder)
        self.turn = 0

    def next_event(self) -> Any:
        index = self.turn % len(self.ids)
        self.turn += 1
        self.versions[index] += 1
        event = StartupFailed(
            originator_id=self.ids[index],
            originator_version=self.versions[index],
            timestamp=datetime.now(UTC),
            reason="startup_failed",
            message=MESSAGE,
        )
        return self.mapper.to_stored_event(event)


def theirs_append(target: Any, aggregates: Aggregates, count: int) -> int:
    for _ in range(count):
        target.insert_events([aggregates.next_event()])
    return count


def ours_catch_up(store: Store) -> int:
    cursor, read = 0, 0
    while page := store.events.load(after_seq=cursor, limit=PAGE).events:
        for event in page:
            assert event.event is not None
        read += len(page)
        cursor = page[-1].seq
    return read


def theirs_catch_up(target: Any, mapper: Any) -> int:
    start, read = 1, 0
    while notifications := target.select_notifications(start, PAGE):
        for notification in notifications:
            mapper.to_domain_event(notification)
        read += len(notifications)
        start = notifications[-1].id + 1
    return read


def run_backend(backend: Backend, scale: Scale, log_events: int) -> list[Row]:
    sessions = session_ids(scale)
    ours_url, theirs_url = backend.fresh_url("ours"), backend.fresh_url("theirs")
    aggregates = Aggregates()
    rows = []
    with open_store(ours_url, scale) as store:
        target = recorder(backend, theirs_url)
        api_append(store, sessions, len(sessions))  # warm-up
        theirs_append(target, aggregates, len(sessions))
        ours = partial(api_append, store, sessions, CHUNK)
        theirs = partial(theirs_append, target, aggregates, CHUNK)
        rates = partial(compare, ours, theirs, scale.appends // CHUNK)
        rows.append(measure(backend.name, "append (1 event/tx)", "append", GOALS, rates))
        with store.unit_of_work() as uow:  # the logs, untimed
            for index in range(log_events - store.events.latest_seq()):
                uow.events.append(sessions[index % len(sessions)], 1, BODY)
            uow.commit()
        while target.max_notification_id() < log_events:
            batch = min(5_000, log_events - target.max_notification_id())
            target.insert_events([aggregates.next_event() for _ in range(batch)])
        rates = partial(
            compare,
            partial(ours_catch_up, store),
            partial(theirs_catch_up, target, aggregates.mapper),
            5,
            scale.min_seconds,
        )
        rows.append(measure(backend.name, "typed catch-up", "catch-up", GOALS, rates))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    if DomainEvent is None:
        print("eventsourcing is not installed (pip install -e '.[postgresql,bench]'): skipped")
        return 0
    scale = Scale(appends=1_000, min_seconds=0.3) if args.quick else Scale(appends=4_000)
    log_events = 5_000 if args.quick else 50_000
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-es-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                rows += run_backend(backend, scale, log_events)
            finally:
                backend.drop()
    print("\nsession-journal (api) against eventsourcing 9 recorders (bare column: theirs)")
    print_table(rows, GOALS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
