"""session-journal against the `eventsourcing` library's recorders, on the same workloads.

Needs the benchmark extra: `pip install -e '.[postgresql,bench]'` (`make bench` installs it). Rows,
per backend, in one run, alternating turns as `bench.py` does:

1. single append: `store.faults.record_startup_fault` (one durable transaction per event,
   300-byte bodies, 50 sessions) against `ApplicationRecorder.insert_events([stored_event])`
   (one durable transaction per event, the same message in a domain event of 50 aggregates,
   encoded by eventsourcing's `Mapper` and `JSONTranscoder`);
2. typed catch-up: page a 50,000-event log 1,000 at a time reading every event as a typed
   object, `store.events.load(...)` reading each `event.event.type`, against two contenders
   paging eventsourcing's recorder with `select_notifications(...)`: `json.loads` of each
   notification's state, the same body text as ours (the plain alternative: rows of JSON;
   the target), and `Mapper.to_domain_event` (eventsourcing's typed objects). Each on the
   `session_fault` log of the append row's bodies and, beside it, on a log of the bodies of
   every type a session writes, in turn (turns, activity, commands, questions, faults).

eventsourcing's SQLite recorder runs in WAL mode with SQLite's default `synchronous` (FULL, as
ours); its PostgreSQL recorder uses psycopg 3 with its own pool, in a schema of its own.
Usage: `versus_eventsourcing.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import closing
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
from lone_append import bare_append, bare_append_checked_apart, bare_connection

from session_journal import (
    ActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiTurnOutcome,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    InputRequired,
    InputResolved,
    OutcomeReason,
    SessionFault,
    Store,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from session_journal.relay import ElicitationRequest

try:
    from eventsourcing.domain import DomainEvent
    from eventsourcing.persistence import (
        DatetimeAsISO,
        JSONTranscoder,
        Mapper,
        StoredEvent,
        UUIDAsHex,
    )
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
except ImportError:  # the optional extra is not installed
    DomainEvent = None

# The goals: PostgreSQL appends, typed catch-up against `json.loads` on both backends.
GOALS = {("postgresql", "append"): 1.7, ("postgresql", "catch-up"): 1.5}
GOALS |= {("sqlite", "catch-up"): 1.5, ("sqlite", "bare"): 0.9, ("postgresql", "bare"): 0.85}
# SQLite's "bare" row is the loop the lone-append target names (the session `SELECT` apart);
# "own" gives the bare driver the short path's own statements (the check folded into the seq).
PAGE = 1000
CHUNK = 100
TOPIC = "session_journal.api_events:ApiEvent"  # the stored events' topic (json.loads ignores it)


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


def mixed_bodies() -> list[str]:
    """One body of each kind a session writes in a turn, as stored: a log of these in turn."""
    question = ElicitationRequest(
        id="q-1",
        session_id="s-1",
        message="Which directory should the tests run in?",
        requested_schema={
            "type": "object",
            "properties": {"dir": {"type": "string", "enum": ["src", "tests"]}},
            "required": ["dir"],
        },
    )
    details = ApiActivityDetails(
        kind=ApiActivityKind.TURN, turn_started_at_ms=1_700_000_000_000, label="fix the test"
    )
    activity = ApiActivityState(
        state="running",
        details=details,
        is_idle=False,
        waiting_for_input=False,
        capacity_retry=False,
    )
    outcome = TurnOutcome(kind=TurnResultKind.COMPLETED, stop_reason="end_turn")
    result = CommandResult(
        owner=CommandOwner.DAEMON,
        command_id="checkpoint-2",
        command_kind="checkpoint",
        outcome=CommandResultKind.SUCCEEDED,
        related_command_ids=("barrier-2",),
    )
    bodies = [
        TurnStarted(turn_id=3, command_id="prompt-3", started_at_ms=1_700_000_000_000),
        ActivityChanged(activity=activity),
        InputRequired(request=question, turn_id=3),
        InputResolved(elicitation_id="q-1", action="accept", turn_id=3),
        TurnEnded(turn=ApiTurnOutcome(command_id="prompt-3", accepted_ordinal=3, outcome=outcome)),
        CommandEnded(result=result),
        SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=MESSAGE),
    ]
    return [body.model_dump_json() for body in bodies]


def ours_catch_up(store: Store) -> int:
    cursor, read = 0, 0
    while page := store.events.load(after_seq=cursor, limit=PAGE).events:
        for event in page:
            assert event.event.type
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


def theirs_json_catch_up(target: Any) -> int:
    start, read = 1, 0
    while notifications := target.select_notifications(start, PAGE):
        for notification in notifications:
            assert json.loads(notification.state)["type"]
        read += len(notifications)
        start = notifications[-1].id + 1
    return read


def fill(store: Store, sessions: list[str], bodies: list[str], events: int) -> None:
    """Append `bodies` in turn until the store's log holds `events` events (untimed)."""
    with store.unit_of_work() as uow:
        for index in range(events - store.events.latest_seq()):
            uow.events.append(sessions[index % len(sessions)], 1, bodies[index % len(bodies)])
        uow.commit()


def fill_theirs(target: Any, bodies: list[str], events: int) -> None:
    """The same bodies, as the states of stored events of 50 aggregates (untimed)."""
    ids = [uuid.uuid4() for _ in range(50)]
    index = target.max_notification_id() or 0
    while index < events:
        batch = []
        for _ in range(min(5_000, events - index)):
            state = bodies[index % len(bodies)].encode()
            version = index // len(ids) + 1
            batch.append(StoredEvent(ids[index % len(ids)], version, TOPIC, state))
            index += 1
        target.insert_events(batch)


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
        bare_url = backend.fresh_url("bare")
        with open_store(bare_url, scale), closing(bare_connection(backend, bare_url)) as bare:
            bare_append(backend, bare, sessions, len(sessions))  # warm-up
            own = partial(bare_append, backend, bare, sessions, CHUNK)
            if backend.name == "sqlite":
                apart = partial(bare_append_checked_apart, bare, sessions, CHUNK)
                rates = partial(compare, ours, apart, scale.appends // CHUNK)
                workload = "append / bare statements, session SELECT apart"
                rows.append(measure(backend.name, workload, "bare", GOALS, rates))
                rates = partial(compare, ours, own, scale.appends // CHUNK)
                workload = "append / bare, the short path's own statements"
                rows.append(measure(backend.name, workload, "own", GOALS, rates))
            else:
                rates = partial(compare, ours, own, scale.appends // CHUNK)
                rows.append(measure(backend.name, "append / bare statements", "bare", GOALS, rates))
        fill(store, sessions, [BODY], log_events)  # the logs, untimed
        while target.max_notification_id() < log_events:
            batch = min(5_000, log_events - target.max_notification_id())
            target.insert_events([aggregates.next_event() for _ in range(batch)])
        plain = recorder(backend, backend.fresh_url("theirs_json"))
        fill_theirs(plain, [BODY], log_events)
        ours = partial(ours_catch_up, store)
        rates = partial(compare, ours, partial(theirs_json_catch_up, plain), 5, scale.min_seconds)
        rows.append(measure(backend.name, "typed catch-up / json.loads", "catch-up", GOALS, rates))
        theirs = partial(theirs_catch_up, target, aggregates.mapper)
        rates = partial(compare, ours, theirs, 5, scale.min_seconds)
        rows.append(measure(backend.name, "typed catch-up / Mapper", "mapper", GOALS, rates))
    with open_store(backend.fresh_url("ours_mixed"), scale) as store:
        bodies = mixed_bodies()
        api_append(store, sessions, len(sessions))  # the sessions
        fill(store, sessions, bodies, log_events)
        plain = recorder(backend, backend.fresh_url("theirs_mixed"))
        fill_theirs(plain, bodies, log_events)
        ours = partial(ours_catch_up, store)
        rates = partial(compare, ours, partial(theirs_json_catch_up, plain), 5, scale.min_seconds)
        rows.append(measure(backend.name, "mixed types / json.loads", "mixed", GOALS, rates))
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
