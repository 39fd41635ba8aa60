"""Group commit: single-event appends from 1, 4, 16 and 64 threads of one `Store`.

Each thread calls `store.faults.record_startup_fault` (300-byte bodies, 50 sessions). Rows, per
backend, in one run:

- `T threads`: events/s of all threads together, per-call latency p50/p99, the mean batch size
  the write path formed (calls per transaction), and beside it the bare driver committing the
  same events in transactions of that size, each taking its seqs from `event_sequences` as the
  API does (for 1 thread: one event per transaction, the like-for-like row of `bench.py`); API
  and bare alternate in turns so that drift in fsync times hits both alike;
- `1 thread, durability off`: the API with SQLite `synchronous=OFF` / PostgreSQL
  `synchronous_commit=off`: what the CPU allows once no commit waits for the disk, the ceiling
  that group commit can at best reach;
- PostgreSQL: 4 processes x 1 thread and 4 processes x 8 threads, each process its own Store.

Targets (both backends, ratios within the run): 16 threads >= 0.7x the durability-off 1-thread
rate; p99 at 16 threads <= 3x its p50; 1 thread >= 0.62x (SQLite) / 0.72x (PostgreSQL) of the
bare 1-event/tx row, with 0.8x the goal; PostgreSQL 4x8 >= 2x 4x1.
Usage: `group_commit.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from _databases import POSTGRES
from _harness import Backend, Connection, Scale, backends_to_run, bench_arguments, now_ms
from bench import BODY, INSERT, MESSAGE, NEXT_SEQ, bare_setup, session_ids
from bench import open_store as open_bench_store

from session_journal import Store, StoreOptions

THREADS = (1, 4, 16, 64)
ROUNDS = 4  # API and bare alternate this many turns per row
TARGETS = {"16 threads / durability off": 0.7, "16 threads p99 / p50": 3.0, "4x8 / 4x1": 2.0}
LIKE_FOR_LIKE = {"sqlite": 0.62, "postgresql": 0.72}


@dataclass
class Run:
    events: int
    seconds: float
    latencies: list[float]
    batches: int
    calls: int

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    @property
    def mean_batch(self) -> float:
        return self.calls / self.batches if self.batches else 1.0

    @classmethod
    def combined(cls, parts: list[Run]) -> Run:
        return cls(
            sum(part.events for part in parts),
            sum(part.seconds for part in parts),
            [value for part in parts for value in part.latencies],
            sum(part.batches for part in parts),
            sum(part.calls for part in parts),
        )


def api_threads(store: Store, sessions: Sequence[str], threads: int, per_thread: int) -> Run:
    """`threads` threads, each appending `per_thread` events, started together."""
    write_path = store._database.write_path  # the counters; benchmarks only
    start = threading.Barrier(threads + 1)
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def work(index: int) -> None:
        mine = latencies[index]
        start.wait()
        for n in range(per_thread):
            began = time.perf_counter()
            store.faults.record_startup_fault(
                sessions[(index + n * threads) % len(sessions)], MESSAGE
            )
            mine.append(time.perf_counter() - began)

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    batches, calls = write_path.batches, write_path.calls
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    return Run(
        threads * per_thread,
        seconds,
        [value for values in latencies for value in values],
        write_path.batches - batches,
        write_path.calls - calls,
    )


def bare_batches(
    connection: Connection, backend: Backend, sessions: Sequence[str], count: int, size: int
) -> float:
    """Events/s of the bare driver committing `count` events in transactions of `size`, each
    event's seq from `event_sequences` (one UPDATE per transaction, as the write path does)."""
    cursor = connection.cursor()
    insert, take = (
        backend.sql(INSERT),
        NEXT_SEQ.replace("+ 1", "+ ?" if backend.name == "sqlite" else "+ %s"),
    )
    began = time.perf_counter()
    done = 0
    while done < count:
        n = min(size, count - done)
        last = cursor.execute(take, (n,)).fetchone()[0]
        rows = [
            (last - n + 1 + i, sessions[(done + i) % len(sessions)], now_ms(), BODY)
            for i in range(n)
        ]
        cursor.executemany(insert, rows)
        connection.commit()
        done += n
    return count / (time.perf_counter() - began)


def process_writer(url: str, threads: int, per_thread: int, barrier: Any, out: Any) -> None:
    sessions = session_ids(Scale())
    with Store.open(url) as store:
        store.faults.record_startup_fault(sessions[0], MESSAGE)  # connect before the start
        barrier.wait()
        run = api_threads(store, sessions, threads, per_thread)
        out.put((run.events, time.monotonic() - run.seconds, time.monotonic()))


def processes(url: str, count: int, threads: int, per_thread: int) -> float:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(count), context.Queue()
    workers = [
        context.Process(target=process_writer, args=(url, threads, per_thread, barrier, out))
        for _ in range(count)
    ]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    events = sum(events for events, _, _ in results)
    return events / (max(end for _, _, end in results) - min(start for _, start, _ in results))


def durability_off(backend: Backend, url: str) -> tuple[str, StoreOptions]:
    if backend.name == "sqlite":
        return url, StoreOptions(sqlite_synchronous="OFF")
    parsed = sa.make_url(url)
    options = parsed.query.get("options", "")
    relaxed = parsed.update_query_dict({"options": f"{options} -csynchronous_commit=off".strip()})
    return relaxed.render_as_string(hide_password=False), StoreOptions()


def run_backend(backend: Backend, events: int) -> list[str]:
    sessions = session_ids(Scale())
    lines, verdicts = [], []
    api_url, bare_url = backend.fresh_url("gc_api"), backend.fresh_url("gc_bare")
    bare_setup(backend, bare_url, sessions)
    runs: dict[int, Run] = {}
    with open_bench_store(api_url, Scale()) as store, closing(backend.connect(bare_url)) as bare:
        api_threads(store, sessions, 4, 50)  # warm-up
        bare_batches(bare, backend, sessions, 200, 1)
        bare_one = 0.0
        for threads in THREADS:
            # API and bare alternate in ROUNDS turns, so drift in fsync times hits both alike.
            parts, bare_seconds = [], 0.0
            per_turn = max(1, events // ROUNDS)
            for _ in range(ROUNDS):
                parts.append(api_threads(store, sessions, threads, max(1, per_turn // threads)))
                size = max(1, round(parts[-1].mean_batch))
                bare_seconds += per_turn / bare_batches(bare, backend, sessions, per_turn, size)
            runs[threads] = run = Run.combined(parts)
            batched = per_turn * ROUNDS / bare_seconds
            if threads == 1:
                bare_one = batched  # batches of one: one event per transaction
            lines.append(
                f"{backend.name:<11}{threads:>3} threads  {run.rate:>9,.0f} ev/s  "
                f"p50 {run.percentile(0.5) * 1e3:7.2f} ms  "
                f"p99 {run.percentile(0.99) * 1e3:7.2f} ms  mean batch {run.mean_batch:6.1f}  "
                f"bare in such batches {batched:>9,.0f} ev/s"
            )
    relaxed_url, options = durability_off(backend, api_url)
    with Store.open(relaxed_url, options=options) as relaxed:
        api_threads(relaxed, sessions, 1, 200)
        ceiling = api_threads(relaxed, sessions, 1, events).rate
    lines.append(f"{backend.name:<11}1 thread, durability off {ceiling:>9,.0f} ev/s")
    sixteen, one = runs[16], runs[1]
    like = one.rate / bare_one
    ratios = {
        "16 threads / durability off": sixteen.rate / ceiling,
        "16 threads p99 / p50": sixteen.percentile(0.99) / sixteen.percentile(0.5),
    }
    lines.append(
        f"{backend.name:<11}16/1 {sixteen.rate / one.rate:.2f}x, "
        f"64/1 {runs[64].rate / one.rate:.2f}x (durability on)"
    )
    verdicts.append(("1 thread / bare 1 event/tx", like, LIKE_FOR_LIKE[backend.name], True))
    verdicts.append(
        ("16 threads / durability off", ratios["16 threads / durability off"], 0.7, True)
    )
    verdicts.append(("16 threads p99 / p50", ratios["16 threads p99 / p50"], 3.0, False))
    if backend.name == "postgresql":
        per = max(1, events // 4)
        four_one = processes(api_url, 4, 1, per)
        four_eight = processes(api_url, 4, 8, max(1, per // 8))
        lines.append(
            f"{backend.name:<11}4 processes x 1 thread {four_one:>9,.0f} ev/s; "
            f"x 8 threads {four_eight:>9,.0f} ev/s"
        )
        verdicts.append(("4x8 / 4x1", four_eight / four_one, 2.0, True))
    for name, value, target, at_least in verdicts:
        ok = value >= target if at_least else value <= target
        sign = ">=" if at_least else "<="
        lines.append(
            f"{backend.name:<11}{name:<30}{value:6.2f}  target {sign} {target:.2f}  "
            + ("PASS" if ok else "MISS")
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    events = 1_280 if args.quick else 6_400
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-gc-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                lines += run_backend(backend, events)
            finally:
                backend.drop()
    print(f"\ngroup commit (events per workload: {events})")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
