"""Following the log: wake-up latency, idle followers, many followers at the tail.

Per backend (SQLite file, PostgreSQL schema; a fresh database per row):
1. commit -> wake latency p50/p99: from the return of the writer's `record_startup_fault` to the
   return of a follower's `store.events.wait` with the event (`time.monotonic`, system-wide on
   Linux): writer and follower on one Store, then the writer in another (spawned) process.
2. idle: `SCALES` follower threads in `follower.next_page(timeout=...)`, nothing appended: the
   process's CPU time, and the wake-ups meanwhile (PostgreSQL: NOTIFYs of other schemas too).
3. tail: follower threads at the tail of one Store while a writer process appends as fast as it
   can: statements this process runs per wake-up of its signal (`driver.run`/`run_many` and
   SQLAlchemy statements on the reader engine; SQLite's `PRAGMA data_version` reads apart),
   whether every follower got every event once, in order, and the writer's rate against its
   rate with no followers.
4. PostgreSQL: eventsourcing's subscription (two threads and one LISTEN connection each) against
   row 3 with as many followers: CPU of the following process per delivered event; at
   `ES_FOLLOWERS`, not 100, as the server allows 100 connections (`max_connections`).
Usage: `follow.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from _databases import POSTGRES
from _harness import Backend, Scale, backends_to_run, bench_arguments
from bench import MESSAGE, open_store, session_ids

from session_journal import Store
from session_journal.follow import wakeups
from session_journal.storage import driver

TARGETS = {"same process": 1.0, "sqlite other process": 20.0, "postgresql other process": 10.0}
IDLE_CPU_S, PER_WAKEUP, WRITER_SHARE, ES_RATIO = 0.01, 2.0, 0.8, 0.2
ES_FOLLOWERS = 30
SCALES = {  # samples, (idle followers, idle s), (tail followers, tail events)
    False: (300, (1000, 10.0), (1000, 2000)),
    True: (60, (200, 2.0), (100, 300)),
}
Line = tuple[str, str, str, str]  # backend, measure, figure, verdict


def verdict(value: float, target: float, at_most: bool = True) -> str:
    ok = value <= target if at_most else value >= target
    return f"{'<=' if at_most else '>='} {target:g}  {'PASS' if ok else 'MISS'}"


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def waiters(store: Store) -> int:
    return store.following.signal.waiting()  # benchmarks only


def until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the followers did not settle"
        time.sleep(0.001)


def latency_writer(url: str, go: Any, out: Any) -> None:
    with Store.open(url) as store:
        session = session_ids(Scale())[0]
        store.faults.record_startup_fault(session, MESSAGE)  # connect before the first sample
        out.put(time.monotonic())
        while go.get() is not None:
            store.faults.record_startup_fault(session, MESSAGE)
            out.put(time.monotonic())


def wake_latency(url: str, samples: int, other_process: bool) -> list[float]:
    """Milliseconds from the writer's return to the waiting follower's return, per sample."""
    woken: list[float] = []
    with open_store(url, Scale()) as store:
        context = multiprocessing.get_context("spawn")
        go, out = context.Queue(), context.Queue()
        writer = context.Process(target=latency_writer, args=(url, go, out))
        if other_process:
            writer.start()
            out.get(timeout=60)
        cursor = store.events.latest_seq()
        done = threading.Event()

        def follow() -> None:
            nonlocal cursor
            while not done.is_set():
                page = store.events.wait(after_seq=cursor, timeout=1)
                if page.events:
                    woken.append(time.monotonic())
                cursor = page.next_after_seq

        thread = threading.Thread(target=follow)
        thread.start()
        returned: list[float] = []
        session = session_ids(Scale())[0]
        for _ in range(samples):
            until(lambda: waiters(store) > 0 and len(woken) == len(returned))
            time.sleep(0.002)  # the watcher / listener runs again before the commit
            if other_process:
                go.put(1)
                returned.append(out.get(timeout=60))
            else:
                store.faults.record_startup_fault(session, MESSAGE)
                returned.append(time.monotonic())
        until(lambda: len(woken) == len(returned))
        done.set()
        thread.join()
        if other_process:
            go.put(None)
            writer.join()
    return [(end - start) * 1e3 for start, end in zip(returned, woken, strict=True)]


def idle_cpu(url: str, followers: int, seconds: float) -> tuple[float, int]:
    """CPU seconds of this process while `followers` threads wait for `seconds`, and the
    wake-ups meanwhile (on PostgreSQL, NOTIFYs of other schemas of the database too)."""
    with open_store(url, Scale()) as store:
        opened = [store.events.follow() for _ in range(followers)]
        threads = [
            threading.Thread(target=one.next_page, args=(seconds * 3 + 60,)) for one in opened
        ]
        for thread in threads:
            thread.start()
        until(lambda: waiters(store) == followers)
        time.sleep(0.5)
        began, generation = time.process_time(), store.following.signal.generation
        time.sleep(seconds)
        spent = time.process_time() - began
        wakes = store.following.signal.generation - generation
        for one in opened:
            one.close()
        for thread in threads:
            thread.join()
    return spent, wakes


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """Counts of the statements this process runs: driver-level, on the reader engine through
    SQLAlchemy, and the SQLite watcher's `data_version` reads."""
    counts = {"driver": 0, "sqlalchemy": 0, "data_version": 0}
    run, run_many, version = driver.run, driver.run_many, wakeups.SqliteWatcher._version

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            counts[name] += 1
            return fn(*args)

        return wrapper

    def on_execute(*_: Any) -> None:
        counts["sqlalchemy"] += 1

    driver.run, driver.run_many = counting("driver", run), counting("driver", run_many)
    wakeups.SqliteWatcher._version = staticmethod(counting("data_version", version))  # type: ignore[method-assign]
    sa.event.listen(store._database.reader, "before_cursor_execute", on_execute)
    try:
        yield counts
    finally:
        driver.run, driver.run_many = run, run_many
        wakeups.SqliteWatcher._version = staticmethod(version)  # type: ignore[method-assign]
        sa.event.remove(store._database.reader, "before_cursor_execute", on_execute)


def tail_writer(url: str, count: int, start: Any, out: Any) -> None:
    sessions = session_ids(Scale())
    with Store.open(url) as store:
        store.faults.record_startup_fault(sessions[0], MESSAGE)  # connect before the start
        start.wait()  # ready: the followers start after this event
        start.wait()  # go
        began = time.perf_counter()
        for index in range(count):
            store.faults.record_startup_fault(sessions[index % len(sessions)], MESSAGE)
        out.put(count / (time.perf_counter() - began))


def tail_run(url: str, followers: int, count: int) -> dict[str, float]:
    """Rates, counts and checks of one writer process appending `count` events while
    `followers` threads of this process follow the tail (none: the writer alone)."""
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(2), context.Queue()
    writer = context.Process(target=tail_writer, args=(url, count, start, out))
    writer.start()
    with Store.open(url) as store, counted(store) as counts:
        start.wait()
        frontier = store.events.latest_seq()  # after the writer's warm-up event
        opened = [store.events.follow(after_seq=frontier) for _ in range(followers)]
        received: list[list[int]] = [[] for _ in opened]

        def follow(index: int) -> None:
            seqs, deadline = received[index], time.monotonic() + 600
            while len(seqs) < count and time.monotonic() < deadline:
                page = opened[index].next_page(timeout=1.0)
                if page is not None:
                    seqs.extend(event.seq for event in page.events)

        threads = [threading.Thread(target=follow, args=(i,)) for i in range(followers)]
        for thread in threads:
            thread.start()
        until(lambda: waiters(store) == followers)
        signal = store.following.signal
        before, generation, cpu = dict(counts), signal.generation, time.process_time()
        start.wait()
        rate = out.get(timeout=900)
        for thread in threads:
            thread.join()
        cpu = time.process_time() - cpu
        wakes = max(1, signal.generation - generation)
        delta = {name: counts[name] - before[name] for name in counts}
    writer.join()
    expected = list(range(frontier + 1, frontier + 1 + count))
    complete = sum(seqs == expected for seqs in received)
    return {
        "rate": rate,
        "wakes": wakes,
        "statements": (delta["driver"] + delta["sqlalchemy"]) / wakes,
        "data_version": delta["data_version"],
        "complete": complete,
        "cpu_per_event": cpu / max(1, followers * count),
    }


def es_recorder(url: str, pool: int) -> Any:
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

    parsed = sa.make_url(url)
    datastore = PostgresDatastore(
        dbname=parsed.database or "",
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username or "",
        password=parsed.password or "",
        schema=str(parsed.query["options"]).split("=", 1)[1],  # -csearch_path=<schema>
        pool_size=pool,
        max_overflow=10,
    )
    made = PostgresApplicationRecorder(datastore)
    made.create_table()
    return made


def es_writer(url: str, count: int, start: Any) -> None:
    from versus_eventsourcing import Aggregates

    target, aggregates = es_recorder(url, 1), Aggregates()
    start.wait()
    for _ in range(count):
        target.insert_events([aggregates.next_event()])


def es_cpu_per_event(url: str, followers: int, count: int) -> float:
    """CPU seconds of this process per event delivered to `followers` subscriptions."""
    target = es_recorder(url, followers + 2)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    writer = context.Process(target=es_writer, args=(url, count, start))
    writer.start()
    subscriptions = [target.subscribe(gt=0) for _ in range(followers)]
    got = [0] * followers

    def consume(index: int) -> None:
        for _ in subscriptions[index]:
            got[index] += 1
            if got[index] == count:
                break

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(followers)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    cpu = time.process_time()
    start.wait()
    for thread in threads:
        thread.join(timeout=600)
    cpu = time.process_time() - cpu
    writer.join()
    for subscription in subscriptions:
        subscription.stop()
    assert got == [count] * followers, "an eventsourcing subscriber missed events"
    target.datastore.close()
    return cpu / (followers * count)


def run_backend(backend: Backend, quick: bool) -> list[Line]:
    samples, (idle_n, idle_s), (tail_n, tail_events) = SCALES[quick]
    name, lines = backend.name, []

    def add(measure: str, figure: str, verdict: str) -> None:
        lines.append((name, measure, figure, verdict))

    for other, label in ((False, "same process"), (True, "other process")):
        ms = wake_latency(backend.fresh_url(f"lat{int(other)}"), samples, other)
        target = TARGETS["same process" if not other else f"{name} {label}"]
        figure = f"p50 {percentile(ms, 0.5):.2f} ms, p99 {percentile(ms, 0.99):.2f} ms"
        add(f"wake latency, {label}", figure, verdict(percentile(ms, 0.5), target))
    spent, wakes = idle_cpu(backend.fresh_url("idle"), idle_n, idle_s)
    share = spent / idle_s
    figure = f"{spent:.3f} s CPU in {idle_s:g} s ({share:.2%} of a core, {wakes} wake-ups)"
    add(f"{idle_n} idle followers", figure, verdict(share, IDLE_CPU_S))
    url = backend.fresh_url("tail")
    open_store(url, Scale()).close()
    alone = tail_run(url, 0, tail_events)["rate"]
    tail = tail_run(url, tail_n, tail_events)
    figure = f"{tail['statements']:.1f} ({tail['wakes']:.0f} wake-ups; "
    figure += f"{tail['data_version']:.0f} data_version reads apart)"
    add(f"{tail_n} followers: statements/wake-up", figure, verdict(tail["statements"], PER_WAKEUP))
    ok = "PASS" if tail["complete"] == tail_n else "MISS"
    figure = f"{tail['complete']:.0f}/{tail_n} got all {tail_events} once, in order"
    add(f"{tail_n} followers: delivery", figure, f"all  {ok}")
    ratio = tail["rate"] / alone
    figure = f"{tail['rate']:,.0f} ev/s vs {alone:,.0f} alone ({ratio:.2f}x)"
    add(f"{tail_n} followers: writer rate", figure, verdict(ratio, WRITER_SHARE, False))
    if name == "postgresql":
        try:
            theirs = es_cpu_per_event(backend.fresh_url("es"), ES_FOLLOWERS, tail_events)
        except ImportError:
            add("eventsourcing subscription", "not installed: skipped", "-")
            return lines
        url = backend.fresh_url("ours")
        open_store(url, Scale()).close()
        ours = tail_run(url, ES_FOLLOWERS, tail_events)["cpu_per_event"]
        figure = f"ours {ours * 1e6:.0f} us, theirs {theirs * 1e6:.0f} us ({ours / theirs:.2f}x)"
        add(
            f"CPU/delivered event, {ES_FOLLOWERS} followers",
            figure,
            verdict(ours / theirs, ES_RATIO),
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    threading.stack_size(512 * 1024)  # a thousand follower threads
    lines: list[Line] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-follow-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                lines += run_backend(backend, args.quick)
            finally:
                backend.drop()
    print(f"\nfollowing the log{' (--quick)' if args.quick else ''}")
    header = f"{'backend':<11}{'measure':<38}{'figure':<62}target"
    print(header + "\n" + "-" * (len(header) + 14))
    for name, measure, figure, target in lines:
        print(f"{name:<11}{measure:<38}{figure:<62}{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
