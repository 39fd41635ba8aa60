"""Retention: pruning N events while one writer appends, on SQLite and PostgreSQL.

Rows, per backend: the writer's rate and p99.9 append latency alone and while
`store.events.prune(through_seq=N)` deletes a log of N events (the prune runs in its own
thread, in batches of 1,000, on the same store's write path), the events pruned per second,
the process's peak memory (max RSS) before and after the prune, and the database's size before
and after `db vacuum` (`maintenance.vacuum`).

Targets (within the run): writer rate during the prune >= 0.7x alone; writer p99.9 during the
prune <= 2x alone. N is 1,000,000 (20,000 with --quick).
Usage: `retention.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from _databases import database
from _harness import bench_arguments

from session_journal import OutcomeReason, SessionFault, SessionRecord, Store
from session_journal import _maintenance as maintenance

FULL_EVENTS = 1_000_000
QUICK_EVENTS = 20_000
FILL_CHUNK = 5_000
BODY = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="x" * 200).model_dump_json()
TARGETS = {"rate during / alone": 0.7, "p99.9 during / alone": 2.0}


@dataclass
class Writes:
    events: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    def p999(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))] if ordered else 0.0


def fill(store: Store, count: int) -> None:
    """`count` events of the pruned session, in transactions of `FILL_CHUNK`."""
    done = 0
    while done < count:
        with store.unit_of_work() as uow:
            for _ in range(min(FILL_CHUNK, count - done)):
                uow.events.append("old", 1, BODY)
            uow.commit()
        done += min(FILL_CHUNK, count - done)


def write(store: Store, stop: threading.Event, seconds: float | None = None) -> Writes:
    """Single appends of the writer's session until `stop` is set (or `seconds` passed)."""
    latencies: list[float] = []
    start = time.perf_counter()
    while not stop.is_set():
        began = time.perf_counter()
        store.faults.record_startup_fault("writer", "append")
        latencies.append(time.perf_counter() - began)
        if seconds is not None and began - start >= seconds:
            break
    return Writes(len(latencies), time.perf_counter() - start, latencies)


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(backend: str, events: int, alone_s: float) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = []
    with database(backend, "retention") as url, Store.open(url, upgrade=True) as store:
        for session_id in ("old", "writer"):
            store.sessions.save(SessionRecord(id=session_id, project_id="bench"))
        fill(store, events)
        alone = write(store, threading.Event(), alone_s)

        stop = threading.Event()
        during: list[Writes] = []
        writer = threading.Thread(target=lambda: during.append(write(store, stop)))
        rss_before = max_rss_mib()
        writer.start()
        time.sleep(0.2)  # the writer is under way
        began = time.perf_counter()
        pruned = store.events.prune(through_seq=events)
        prune_s = time.perf_counter() - began
        stop.set()
        writer.join()
        assert pruned == events, (pruned, events)
        rss_after = max_rss_mib()
        before = maintenance.stats(url).size_bytes
        vacuumed = maintenance.vacuum(url)

        rows += [
            ("writer alone", "events/s", alone.rate),
            ("writer during prune", "events/s", during[0].rate),
            ("rate during / alone", "ratio", during[0].rate / alone.rate),
            ("writer alone p99.9", "ms", alone.p999() * 1000),
            ("writer during prune p99.9", "ms", during[0].p999() * 1000),
            ("p99.9 during / alone", "ratio", during[0].p999() / alone.p999()),
            ("events pruned", "events/s", pruned / prune_s),
            ("peak memory before prune", "MiB", rss_before),
            ("peak memory after prune", "MiB", rss_after),
            ("size before vacuum", "MiB", before / 2**20),
            ("size after vacuum", "MiB", vacuumed.after_bytes / 2**20),
        ]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    events = QUICK_EVENTS if args.quick else FULL_EVENTS
    alone_s = 0.5 if args.quick else 5.0
    backends = [name for name in ("sqlite", "postgresql") if args.only in (None, name)]
    print(f"retention: pruning {events} events while one writer appends")
    for backend in backends:
        for name, unit, value in run(backend, events, alone_s):
            target = TARGETS.get(name)
            verdict = ""
            if target is not None:
                ok = value >= target if "rate" in name else value <= target
                verdict = f"  (target {'>=' if 'rate' in name else '<='} {target}: " + (
                    "PASS)" if ok else "MISS)"
                )
            print(f"  {backend:<10} {name:<28} {value:>12.2f} {unit}{verdict}")
    return 0  # a miss is reported, as by the other benchmarks; it does not stop `make bench`


if __name__ == "__main__":
    sys.exit(main())
