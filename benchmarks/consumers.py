"""Durable consumers: what an ack costs, and how soon `wait_until` wakes.

Per backend (durable: SQLite `synchronous=FULL`, PostgreSQL's commit waiting for its WAL flush;
a fresh database per row):
1. ack in the caller's unit of work: a projector's transaction — `store.unit_of_work()` writing
   one read-model row per event of its page and committing — with `store.consumers.ack(...,
   uow=uow)` in it, against the same transaction without it, for a page of 1 event and of 10;
   the two alternate in chunks of 50 for at least 5 rounds, and the ratio is the median of the
   rounds' ratios of time per transaction (target: <= 1.10). Beside it, reported, the bare
   driver's ratio for the same transactions with the ack's own statement (sqlite3 with
   `BEGIN IMMEDIATE`; psycopg): what the statement itself costs such a transaction.
2. lone ack against lone append: `store.consumers.ack(name, seq)` against
   `store.faults.record_startup_fault` (both lone writes, one caller), alternating likewise;
   the ratio of time per call (target: <= 1.0). Every ack of the run moves the position to the
   next seq, as a projector's does.
3. `wait_until` wake latency p50/p99: from the return of an ack to the return of a
   `wait_until` waiting for it (`time.monotonic`, system-wide on Linux), the acker on the same
   Store, then in another (spawned) process; targets: those of `follow.py`'s wake-up rows.
Usage: `consumers.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any

import psycopg
import sqlalchemy as sa
from _databases import POSTGRES
from _harness import Backend, Scale, backends_to_run, bench_arguments, now_ms, pg_conninfo
from bench import BODY, MESSAGE, open_store, session_ids
from follow import TARGETS as WAKE_TARGETS
from follow import percentile, verdict

from session_journal import Store
from session_journal.storage import driver
from session_journal.storage.repositories.consumers import STATEMENTS

ACK_IN_UOW, LONE_ACK = 1.10, 1.0
CHUNK = 50
SCALES = {False: (30, 300), True: (5, 60)}  # rounds; wake-up samples
READ_MODEL = sa.table("bench_read_model", sa.column("seq", sa.BigInteger))
Line = tuple[str, str, str, str]  # backend, measure, figure, verdict


def alternate(
    ours: Callable[[int], None], theirs: Callable[[int], None], rounds: int
) -> tuple[float, float, float]:
    """Microseconds per call of each (medians of the rounds) and the median of the rounds'
    ratios ours / theirs; each round runs `CHUNK` calls of each, alternating."""
    times: dict[Callable[[int], None], list[float]] = {ours: [], theirs: []}
    ours(CHUNK), theirs(CHUNK)  # warm-up
    for _ in range(max(rounds, 5)):
        for work, taken in times.items():
            started = time.perf_counter()
            work(CHUNK)
            taken.append((time.perf_counter() - started) / CHUNK * 1e6)
    ratios = [a / b for a, b in zip(times[ours], times[theirs], strict=True)]
    return (
        statistics.median(times[ours]),
        statistics.median(times[theirs]),
        statistics.median(ratios),
    )


def with_log(store: Store, events: int) -> int:
    """`events` events appended in one transaction, so that every ack of the run moves the
    position to a new seq (an ack that wrote the same values again could cost SQLite no page
    write); the first seq of them."""
    session = session_ids(Scale())[0]
    first = store.events.latest_seq() + 1
    with store.unit_of_work() as uow:
        for _ in range(events):
            uow.events.append(session, 1, BODY)
        uow.commit()
    return first


def acks_needed(rounds: int) -> int:
    """How many acks a comparison of `alternate` makes at most."""
    return (max(rounds, 5) + 1) * CHUNK


def projector_store(url: str, rounds: int) -> tuple[Store, int]:
    """A store with the read model's table, the log `with_log` makes and the consumer
    "projector", and the first seq to ack."""
    store = open_store(url, Scale())
    with store.unit_of_work() as uow:
        uow.connection.execute(sa.text(f"CREATE TABLE {READ_MODEL.name} (seq BIGINT)"))
        uow.commit()
    next_seq = with_log(store, acks_needed(rounds))
    store.consumers.register("projector")
    return store, next_seq


def ack_in_unit_of_work(url: str, rounds: int, page: int) -> tuple[float, float, float]:
    store, next_seq = projector_store(url, rounds)
    with store:

        def projected(count: int, *, ack: bool) -> None:
            nonlocal next_seq
            for _ in range(count):
                with store.unit_of_work() as uow:
                    for _ in range(page):
                        uow.connection.execute(READ_MODEL.insert().values(seq=next_seq))
                    if ack:
                        store.consumers.ack("projector", next_seq, uow=uow)
                        next_seq += 1
                    uow.commit()

        return alternate(
            lambda count: projected(count, ack=True),
            lambda count: projected(count, ack=False),
            rounds,
        )


def bare_ack_in_transaction(
    backend: Backend, url: str, rounds: int, page: int
) -> tuple[float, float, float]:
    """`ack_in_unit_of_work`'s transactions by the bare driver: `page` inserts, the ack's own
    statement (as the store compiles it) or not, and the commit."""
    store, next_seq = projector_store(url, rounds)
    with store:
        dialect = store._database.writer.dialect  # benchmarks only: the store's own SQL
    postgresql = backend.name == "postgresql"
    ack_statement = driver.Prepared(dialect, STATEMENTS[backend.name].ack)
    insert = (
        "INSERT INTO bench_read_model (seq) VALUES (%s)"
        if postgresql
        else ("INSERT INTO bench_read_model (seq) VALUES (?)")
    )
    if postgresql:
        connection: Any = psycopg.connect(pg_conninfo(url))
    else:
        connection = sqlite3.connect(str(sa.make_url(url).database), isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
            connection.execute(f"PRAGMA {pragma}")
    with closing(connection):
        cursor = connection.cursor()

        def transactions(count: int, *, ack: bool) -> None:
            nonlocal next_seq
            for _ in range(count):
                if not postgresql:
                    cursor.execute("BEGIN IMMEDIATE")
                for _ in range(page):
                    cursor.execute(insert, (next_seq,))
                if ack:
                    seq = next_seq
                    values = {"consumer": "projector", "seq": seq, "acked_at_ms": now_ms()}
                    arguments = ack_statement.arguments({**values, "clock_ms": None})
                    cursor.execute(ack_statement.sql, arguments)
                    cursor.fetchone()
                    next_seq += 1
                if postgresql:
                    connection.commit()
                else:
                    cursor.execute("COMMIT")

        return alternate(
            lambda count: transactions(count, ack=True),
            lambda count: transactions(count, ack=False),
            rounds,
        )


def lone_ack_against_append(url: str, rounds: int) -> tuple[float, float, float]:
    with open_store(url, Scale()) as store:
        sessions = session_ids(Scale())
        next_seq = with_log(store, acks_needed(rounds))
        store.consumers.register("projector")

        def ack(count: int) -> None:  # each to the next seq: one UPDATE that moves it
            nonlocal next_seq
            for _ in range(count):
                store.consumers.ack("projector", next_seq)
                next_seq += 1

        def append(count: int) -> None:
            for index in range(count):
                store.faults.record_startup_fault(sessions[index % len(sessions)], MESSAGE)

        return alternate(ack, append, rounds)


def acker(url: str, go: Any, out: Any) -> None:
    with Store.open(url) as store:
        store.consumers.ack("projector", 1)  # connect before the first sample
        out.put(time.monotonic())
        while (seq := go.get()) is not None:
            store.consumers.ack("projector", seq)
            out.put(time.monotonic())


def wake_latency(url: str, samples: int, other_process: bool) -> list[float]:
    """Milliseconds from the ack's return to the waiting `wait_until`'s return, per sample."""
    woken: list[float] = []
    with open_store(url, Scale()) as store:
        session = session_ids(Scale())[0]
        for _ in range(samples + 2):
            store.faults.record_startup_fault(session, MESSAGE)
        store.consumers.register("projector")
        context = multiprocessing.get_context("spawn")
        go, out = context.Queue(), context.Queue()
        process = context.Process(target=acker, args=(url, go, out))
        if other_process:
            process.start()
            out.get(timeout=60)
        waiting = threading.Event()
        targets: list[int] = []
        done = threading.Event()

        def wait() -> None:
            while not done.is_set():
                if not targets:
                    time.sleep(0.0005)
                    continue
                seq = targets.pop()
                waiting.set()
                assert store.consumers.wait_until("projector", seq, timeout=60)
                woken.append(time.monotonic())

        thread = threading.Thread(target=wait)
        thread.start()
        returned: list[float] = []
        for sample in range(samples):
            seq = sample + 2
            waiting.clear()
            targets.append(seq)
            waiting.wait(60)
            time.sleep(0.003)  # the waiter reads, then waits (and the watcher polls)
            if other_process:
                go.put(seq)
                returned.append(out.get(timeout=60))
            else:
                store.consumers.ack("projector", seq)
                returned.append(time.monotonic())
            deadline = time.monotonic() + 60
            while len(woken) < len(returned) and time.monotonic() < deadline:
                time.sleep(0.0002)
        done.set()
        thread.join()
        if other_process:
            go.put(None)
            process.join()
    return [(end - start) * 1e3 for start, end in zip(returned, woken, strict=True)]


def run_backend(backend: Backend, quick: bool) -> list[Line]:
    rounds, samples = SCALES[quick]
    name, lines = backend.name, []
    for page in (1, 10):
        url = backend.fresh_url(f"uow{page}")
        with_ack, without, ratio = ack_in_unit_of_work(url, rounds, page)
        figure = f"{with_ack:.0f} us vs {without:.0f} us a transaction ({ratio:.3f}x)"
        measure = f"ack in the unit of work, page of {page}"
        lines.append((name, measure, figure, verdict(ratio, ACK_IN_UOW)))
        url = backend.fresh_url(f"bare{page}")
        with_ack, without, ratio = bare_ack_in_transaction(backend, url, rounds, page)
        figure = f"{with_ack:.0f} us vs {without:.0f} us a transaction ({ratio:.3f}x)"
        lines.append((name, f"  bare driver, page of {page}", figure, "- (reported)"))
    ack, append, ratio = lone_ack_against_append(backend.fresh_url("lone"), rounds)
    figure = f"{ack:.0f} us vs {append:.0f} us a call ({ratio:.3f}x)"
    lines.append((name, "lone ack vs lone append", figure, verdict(ratio, LONE_ACK)))
    for other, label in ((False, "same process"), (True, "other process")):
        ms = wake_latency(backend.fresh_url(f"wake{int(other)}"), samples, other)
        target = WAKE_TARGETS["same process" if not other else f"{name} {label}"]
        figure = f"p50 {percentile(ms, 0.5):.2f} ms, p99 {percentile(ms, 0.99):.2f} ms"
        lines.append(
            (name, f"wait_until wake, {label}", figure, verdict(percentile(ms, 0.5), target))
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    lines: list[Line] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-consumers-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                lines += run_backend(backend, args.quick)
            finally:
                backend.drop()
    print(f"\ndurable consumers{' (--quick)' if args.quick else ''}")
    header = f"{'backend':<11}{'measure':<36}{'figure':<48}target"
    print(header + "\n" + "-" * (len(header) + 14))
    for name, measure, figure, target in lines:
        print(f"{name:<11}{measure:<36}{figure:<48}{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
