"""Where a typed page's time goes: `store.events.load` of 1,000 events against the same page as
JSON (`load_json`: the fetch and each event's text, nothing decoded), the objects the garbage
collector tracks per event, and the collections a typed catch-up of 50,000 events runs.

Per backend, on a log of `session_fault` events (the bodies of `bench.py`): each page read both
ways, alternating, the best of the rounds (microseconds an event); decode is the difference.
Then one catch-up of the whole log typed, holding each page while the next is read, as a reader
does, with `gc.callbacks` counting the collections of each generation and the time in them
(read only: the collector is never switched). Usage: `typed_page.py [--quick] [--only ...]`.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from _databases import POSTGRES
from _harness import Scale, backends_to_run, bench_arguments
from bench import BODY, open_store, session_ids

from session_journal import ApiEvent, Store

PAGE = 1000


def tracked_objects(event: ApiEvent) -> int:
    """The objects of one event the collector tracks: the event, its body and what they hold
    (not the classes and enum members every event shares)."""
    seen: set[int] = set()
    pending: list[Any] = [event]
    while pending:
        item = pending.pop()
        if id(item) in seen or not gc.is_tracked(item):
            continue
        seen.add(id(item))
        shared = (type, Enum)
        pending.extend(o for o in gc.get_referents(item) if not isinstance(o, shared))
    return len(seen)


def best_per_event(read: Callable[[int], int], cursors: list[int], rounds: int) -> float:
    """The best round's microseconds an event of `read(cursor)` over the cursors."""
    best = float("inf")
    for _ in range(rounds):
        started, events = time.perf_counter(), 0
        for cursor in cursors:
            events += read(cursor)
        best = min(best, (time.perf_counter() - started) / events * 1e6)
    return best


def catch_up(store: Store) -> int:
    cursor, read = 0, 0
    while page := store.events.load(after_seq=cursor, limit=PAGE).events:
        for event in page:
            assert event.event.type
        read += len(page)
        cursor = page[-1].seq
    return read


def collections(store: Store) -> tuple[list[int], float, float]:
    """The collections of each generation during one typed catch-up, the seconds in them and
    the seconds of the catch-up."""
    counts, spent, started = [0, 0, 0], [0.0], [0.0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            counts[info["generation"]] += 1
            spent[0] += time.perf_counter() - started[0]

    gc.collect()
    gc.callbacks.append(count)
    try:
        begun = time.perf_counter()
        catch_up(store)
        took = time.perf_counter() - begun
    finally:
        gc.callbacks.remove(count)
    return counts, spent[0], took


def run_backend(url: str, name: str, events: int, rounds: int) -> list[str]:
    scale = Scale(appends=0)
    with open_store(url, scale) as store:
        sessions = session_ids(scale)
        with store.unit_of_work() as uow:
            for index in range(events):
                uow.events.append(sessions[index % len(sessions)], 1, BODY)
            uow.commit()
        cursors = list(range(0, events, PAGE))

        def typed(cursor: int) -> int:
            return len(store.events.load(after_seq=cursor, limit=PAGE).events)

        def text(cursor: int) -> int:
            store.events.load_json(after_seq=cursor, limit=PAGE)
            return PAGE

        catch_up(store)  # warm: statements, adapters
        typed_us, text_us = float("inf"), float("inf")
        for _ in range(rounds):  # alternating
            typed_us = min(typed_us, best_per_event(typed, cursors, 1))
            text_us = min(text_us, best_per_event(text, cursors, 1))
        counts, in_collections, took = collections(store)
        objects = tracked_objects(store.events.load(after_seq=0, limit=1).events[0])
    return [
        f"{name:<11}page as JSON (fetch, texts)    {text_us:6.2f} us an event",
        f"{name:<11}typed page                     {typed_us:6.2f} us an event "
        f"(decode {typed_us - text_us:.2f})",
        f"{name:<11}objects tracked per event      {objects}",
        f"{name:<11}typed catch-up of {events:,}     {took / events * 1e6:6.2f} us an event; "
        f"collections by generation {counts}, {in_collections * 1e3:.0f} ms in them "
        f"({in_collections / events * 1e6:.2f} us an event)",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv)
    events, rounds = (10_000, 3) if args.quick else (50_000, 7)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sj-bench-typed-") as directory:
        for backend in backends_to_run(directory, args.only, POSTGRES):
            try:
                lines += run_backend(backend.fresh_url("typed"), backend.name, events, rounds)
            finally:
                backend.drop()
    print("\nwhere a typed page's time goes (pages of 1,000 session_fault events)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
