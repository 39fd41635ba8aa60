"""What the event rate's index (`ix_api_events_recorded_at_ms`, revision 0015) costs an append:
`store.faults.record_startup_fault` (300-byte bodies, 50 sessions, one transaction per event,
durable) on two databases of one backend, one at head and one with that index dropped, in
alternating chunks of 200 calls for at least 7 rounds; each one's median rate and their ratio.
The log starts with 100,000 events (recorded over the last hour), so that the index is not
small. Reported (no target): the issue asks the append rows to report the index's cost.
Usage: `rate_index.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import sqlalchemy as sa
from _databases import POSTGRES, database
from _harness import backends_to_run, bench_arguments
from bench import MESSAGE

from session_journal import SessionRecord, Store

SESSIONS = 50
CHUNK = 200
_FILL = {
    "sqlite": """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
INSERT INTO api_events (seq, session_id, recorded_at_ms, body, body_canonical)
SELECT i, 's-0', :start + i * 36, :body, 0 FROM n
""",
    "postgresql": """
INSERT INTO api_events (seq, session_id, recorded_at_ms, body, body_canonical)
SELECT i, 's-0', :start + i * 36, CAST(:body AS json), false FROM generate_series(1, :count) i
""",
}


def prepared(url: str, backend: str, indexed: bool, events: int) -> None:
    """Migrated, 50 sessions, `events` events over the last hour; the index dropped unless
    `indexed`."""
    with Store.open(url, upgrade=True) as store:
        for n in range(SESSIONS):
            store.sessions.save(SessionRecord(id=f"s-{n}", project_id="p", state="running"))
        with store.unit_of_work() as uow:
            body = '{"type":"session_fault","data":{"reason":"startup_failed","message":"x"}}'
            start = int(time.time() * 1000) - 3_600_000
            uow.connection.execute(
                sa.text(_FILL[backend]), {"count": events, "start": start, "body": body}
            )
            uow.connection.execute(
                sa.text("UPDATE event_sequences SET last_seq = :n WHERE name = 'api_events'"),
                {"n": events},
            )
            if not indexed:
                uow.connection.execute(sa.text("DROP INDEX ix_api_events_recorded_at_ms"))
            uow.commit()


def chunk(store: Store, offset: int) -> float:
    """Appends a second over `CHUNK` lone appends."""
    began = time.perf_counter()
    for n in range(CHUNK):
        store.faults.record_startup_fault(f"s-{(offset + n) % SESSIONS}", MESSAGE)
    return CHUNK / (time.perf_counter() - began)


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    rounds = 3 if args.quick else 7
    events = 10_000 if args.quick else 100_000
    with tempfile.TemporaryDirectory() as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            with (
                database(backend.name, "indexed") as with_url,
                database(backend.name, "unindexed") as without_url,
            ):
                prepared(with_url, backend.name, True, events)
                prepared(without_url, backend.name, False, events)
                rates: dict[bool, list[float]] = {True: [], False: []}
                with Store.open(with_url) as with_index, Store.open(without_url) as without:
                    for round_ in range(rounds):
                        order = [(True, with_index), (False, without)]
                        for indexed, store in order if round_ % 2 else order[::-1]:
                            rates[indexed].append(chunk(store, round_ * CHUNK))
                a, b = statistics.median(rates[True]), statistics.median(rates[False])
                print(
                    f"{backend.name:<11} append (1 event/tx), with the rate's index "
                    f"{a:,.0f}/s, without {b:,.0f}/s: {a / b:.2f}x  (reported)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
