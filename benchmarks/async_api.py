"""The asyncio API against the sync one, in one run, per backend (SQLite file, PostgreSQL schema).

1. 1 task appending single events (`await store.faults.record_startup_fault`) against 1 thread
   doing the same on the sync API; turns alternate so that drift hits both alike.
2. 100 tasks appending concurrently against 16 threads of the sync API (the same events).
3. Catch-up: paging a 20,000-event log 1,000 at a time with `await store.events.load` against
   `store.events.load`.
4. Followers: `FOLLOWERS` tasks, each following its own session (`async for` over
   `events.follow`), while a writer thread appends `RATE` events/s spread over those sessions
   through the same store (one write path). Reported: whether every task received exactly its
   events, the process's thread count while they follow, commit -> delivery p50/p99 (from the
   return of the writer's call to the task's receipt, `time.monotonic`), and the event loop's
   lag p99 (a probe task sleeps 1 ms and records how late it wakes).

Targets: 1 task >= 0.8x 1 thread; 100 tasks >= 0.7x 16 threads; catch-up >= 0.8x; followers:
delivery p50 <= 5 ms, loop lag p99 <= 10 ms, no thread per follower.
Usage: `async_api.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from _databases import POSTGRES
from _harness import Backend, Scale, backends_to_run, bench_arguments
from bench import MESSAGE, open_store, session_ids

from session_journal import ApiEventFilter, SessionFault, SessionRecord, Store
from session_journal.aio import AsyncStore

ROUNDS = 4
TARGETS = {
    "1 task / 1 thread": 0.8,
    "100 tasks / 16 threads": 0.7,
    "catch-up async / sync": 0.8,
}


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def sync_appends(store: Store, sessions: Sequence[str], threads: int, per_thread: int) -> float:
    start = threading.Barrier(threads + 1)

    def work(index: int) -> None:
        start.wait()
        for n in range(per_thread):
            store.faults.record_startup_fault(sessions[(index + n) % len(sessions)], MESSAGE)

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    return threads * per_thread / (time.perf_counter() - began)


async def async_appends(
    store: AsyncStore, sessions: Sequence[str], tasks: int, per_task: int
) -> float:
    async def work(index: int) -> None:
        for n in range(per_task):
            await store.faults.record_startup_fault(sessions[(index + n) % len(sessions)], MESSAGE)

    began = time.perf_counter()
    await asyncio.gather(*(work(index) for index in range(tasks)))
    return tasks * per_task / (time.perf_counter() - began)


def sync_catch_up(store: Store) -> float:
    began, cursor, events = time.perf_counter(), 0, 0
    while True:
        page = store.events.load(after_seq=cursor, limit=1000)
        if not page.events:
            return events / (time.perf_counter() - began)
        events += len(page.events)
        cursor = page.next_after_seq


async def async_catch_up(store: AsyncStore) -> float:
    began, cursor, events = time.perf_counter(), 0, 0
    while True:
        page = await store.events.load(after_seq=cursor, limit=1000)
        if not page.events:
            return events / (time.perf_counter() - began)
        events += len(page.events)
        cursor = page.next_after_seq


async def compare_appends(
    store: AsyncStore, sessions: Sequence[str], events: int
) -> list[tuple[str, float, float]]:
    """(name, async ev/s, sync ev/s) of rows 1 and 2, turns alternating."""
    sync_store = store.sync
    rows = []
    for name, tasks, threads in (("1 task / 1 thread", 1, 1), ("100 tasks / 16 threads", 100, 16)):
        a_total = s_total = 0.0
        await async_appends(store, sessions, tasks, max(1, 200 // tasks))  # warm-up
        sync_appends(sync_store, sessions, threads, max(1, 200 // threads))
        for _ in range(ROUNDS):
            per = max(1, events // ROUNDS)
            a_total += per / await async_appends(store, sessions, tasks, max(1, per // tasks))
            s_total += per / await asyncio.to_thread(
                sync_appends, sync_store, sessions, threads, max(1, per // threads)
            )
        rows.append((name, events / a_total, events / s_total))
    return rows


async def compare_catch_up(store: AsyncStore, rounds: int) -> tuple[float, float]:
    """Median events/s of whole-log catch-ups, async and sync (on a thread, as a sync server
    would page), alternating turns."""
    a_rates, s_rates = [], []
    for _ in range(rounds):
        a_rates.append(await async_catch_up(store))
        s_rates.append(await asyncio.to_thread(sync_catch_up, store.sync))
    return sorted(a_rates)[rounds // 2], sorted(s_rates)[rounds // 2]


async def followers(
    store: AsyncStore, count: int, rate: float, seconds: float
) -> dict[str, float | bool | int]:
    sessions = [f"follow-{n:04d}" for n in range(count)]
    for session_id in sessions:
        await store.sessions.save(SessionRecord(id=session_id, project_id="bench"))
    start = await store.events.latest_seq()
    total = int(rate * seconds)
    expected: dict[str, list[str]] = {session_id: [] for session_id in sessions}
    for n in range(total):
        expected[sessions[n % count]].append(f"{n}")
    received: dict[str, list[str]] = {session_id: [] for session_id in sessions}
    committed: dict[str, float] = {}
    delivered: dict[str, float] = {}
    lags: list[float] = []
    done = asyncio.Event()

    async def follow(session_id: str) -> None:
        want = len(expected[session_id])
        follower = await store.events.follow(ApiEventFilter(session_id=session_id), start)
        async with follower:
            if want == 0:
                return
            async for page in follower:
                now = time.monotonic()
                for event in page.events:
                    assert isinstance(event.event, SessionFault)
                    received[session_id].append(event.event.message)
                    delivered[event.event.message] = now
                if len(received[session_id]) >= want:
                    return

    def write() -> None:
        sync_store = store.sync
        began = time.monotonic()
        for n in range(total):
            pause = began + n / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sync_store.faults.record_startup_fault(sessions[n % count], f"{n}")
            committed[f"{n}"] = time.monotonic()

    async def probe() -> None:
        while not done.is_set():
            before = time.monotonic()
            await asyncio.sleep(0.001)
            lags.append(time.monotonic() - before - 0.001)

    tasks = [asyncio.create_task(follow(session_id)) for session_id in sessions]
    prober = asyncio.create_task(probe())
    await asyncio.sleep(0.5)  # every follower waits
    threads_following = threading.active_count()
    writer = asyncio.create_task(asyncio.to_thread(write))
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 120)
    await writer
    done.set()
    await prober
    # From the return of the writer's call (the commit is durable by then) to the follower's
    # receipt; a follower may get the event before the call returns (0 then).
    delays = [max(0.0, delivered[name] - at) for name, at in committed.items() if name in delivered]
    exact = all(
        sorted(received[session_id], key=int) == expected[session_id] for session_id in sessions
    )
    return {
        "exact": exact,
        "threads": threads_following,
        "p50_ms": percentile(delays, 0.5) * 1e3,
        "p99_ms": percentile(delays, 0.99) * 1e3,
        "lag_p99_ms": percentile(lags, 0.99) * 1e3,
        "events": total,
    }


def run_backend(backend: Backend, quick: bool) -> list[str]:
    scale = Scale()
    sessions = session_ids(scale)
    lines: list[str] = []
    events = 800 if quick else 8_000
    url = backend.fresh_url("async")
    with open_store(url, scale) as sync_store:
        store = AsyncStore.from_store(sync_store, threads=32)

        async def main() -> None:
            verdicts: list[tuple[str, float, float]] = []
            for name, async_rate, sync_rate in await compare_appends(store, sessions, events):
                lines.append(
                    f"{backend.name:<11}{name:<26} async {async_rate:>9,.0f} ev/s  "
                    f"sync {sync_rate:>9,.0f} ev/s"
                )
                verdicts.append((name, async_rate / sync_rate, TARGETS[name]))
            fill = (2_000 if quick else 20_000) - await store.events.latest_seq()
            if fill > 0:
                await async_appends(store, sessions, 100, fill // 100 + 1)
            async_rate, sync_rate = await compare_catch_up(store, 5 if quick else 21)
            lines.append(
                f"{backend.name:<11}{'catch-up':<26} async {async_rate:>9,.0f} ev/s  "
                f"sync {sync_rate:>9,.0f} ev/s"
            )
            verdicts.append(("catch-up async / sync", async_rate / sync_rate, 0.8))
            count, seconds = (200, 2.0) if quick else (1000, 5.0)
            figures = await followers(store, count, 1000.0, seconds)
            lines.append(
                f"{backend.name:<11}{count} followers, 1000 ev/s: exact {figures['exact']}, "
                f"threads {figures['threads']}, delivery p50 {figures['p50_ms']:.1f} ms "
                f"p99 {figures['p99_ms']:.1f} ms, loop lag p99 {figures['lag_p99_ms']:.1f} ms"
            )
            for name, value, target in verdicts:
                ok = value >= target
                lines.append(
                    f"{backend.name:<11}{name:<30}{value:6.2f}  target >= {target:.2f}  "
                    + ("PASS" if ok else "MISS")
                )
            for name, value, target in (
                ("delivery p50 ms", float(figures["p50_ms"]), 5.0),
                ("loop lag p99 ms", float(figures["lag_p99_ms"]), 10.0),
            ):
                lines.append(
                    f"{backend.name:<11}{name:<30}{value:6.2f}  target <= {target:.2f}  "
                    + ("PASS" if value <= target else "MISS")
                )
            await store.close()

        asyncio.run(main())
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-async-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                lines += run_backend(backend, args.quick)
            finally:
                backend.drop()
    print("\nasyncio API against the sync API")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
