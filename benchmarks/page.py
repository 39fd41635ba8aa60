"""The operator page in headless Chromium (Debian's, through Selenium), against
`session-journal serve` on a fresh database:

1. the feed view (with its rate chart) in one window and, in another, the view of the session
   the events go to (with its timeline), 100,000 events in the log, then 100 events/s arriving
   for 10 minutes (turns starting and ending, faults): each window's JavaScript heap
   (`Performance.getMetrics` `JSHeapUsedSize` after `HeapProfiler.collectGarbage`, over the
   DevTools protocol) at the start and at the end, its main thread's busy share over the
   minutes (`TaskDuration`'s growth over the wall time) and the feed's rows (targets: heap
   <= 5 MB, main thread <= 10 %, <= 1,000 rows); SQLite;
2. the sessions list with 10,000 sessions in the database: the time from navigation start to
   the first row drawn (the page's `performance.mark('sessions-drawn')`), median of 5 loads
   (target <= 150 ms); on SQLite and PostgreSQL;
3. a session with 1,000 turns (2,000 events, and 1,000 faults between them): the time from the
   view's route change (the page's own `popstate`, from the feed) to its timeline drawn
   (`performance.mark('session-timeline-drawn')`), median of 5 (target <= 200 ms); on SQLite and
   PostgreSQL.

The server, the browser and the waits are the browser tests' own (`tests/web`).
Usage: `page.py [--quick] [--only sqlite|postgresql]` (`--quick`: 1 minute, 10,000 events).
Skipped, saying so, where /usr/bin/chromium or /usr/bin/chromedriver is missing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _databases import database
from _harness import bench_arguments, print_markdown
from bench import BODY

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from session_journal import (
    ApiTurnOutcome,
    SessionRecord,
    Store,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from tests.web.browser import browser_problem, open_browser, wait_for
from tests.web.client import LiveServer

TOKEN = "p" * 43
FULL = {"events": 100_000, "minutes": 10.0, "sessions": 10_000}
QUICK = {"events": 10_000, "minutes": 1.0, "sessions": 10_000}
RATE = 100  # events per second while the page is open


def heap_mb(driver: Any) -> float:
    driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    used = next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize")
    return float(used) / 1e6


def append(store: Store, count: int, session: str = "s-feed") -> None:
    with store.unit_of_work() as uow:
        for _ in range(count):
            uow.events.append(session, 1, BODY)
        uow.commit()


def turns(store: Store, session: str, first: int, count: int, at: int) -> int:
    """`count` turns of `session` from turn `first`, each started, a fault, then ended (a second
    apart from `at`, ms): three events a turn, in one transaction; the next turn's number."""
    with store.unit_of_work() as uow:
        for turn in range(first, first + count):
            started = TurnStarted(turn_id=turn, command_id=f"c-{turn}", started_at_ms=at)
            uow.events.append(session, at, started.model_dump_json())
            uow.events.append(session, at + 300, BODY)
            outcome = TurnOutcome(kind=TurnResultKind.COMPLETED, stop_reason="end_turn")
            ended = TurnEnded(
                turn=ApiTurnOutcome(command_id=f"c-{turn}", accepted_ordinal=turn, outcome=outcome)
            )
            uow.events.append(session, at + 600, ended.model_dump_json())
            at += 1000
        uow.commit()
    return first + count


def busy_s(driver: Any) -> float:
    """The seconds the current window's main thread has run tasks."""
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))


@contextmanager
def live_page(url: str, address: str) -> Iterator[tuple[Any, str]]:
    """`serve` on `url`, and a browser signed in to it showing `address` (a path) live; the
    browser and the server's address."""
    with (
        tempfile.TemporaryDirectory() as logs,
        LiveServer(url, Path(logs), token_lines=f"{TOKEN}\n") as served,
    ):
        driver = open_browser()
        try:
            driver.get(f"{served.base}{address}#token={TOKEN}")
            wait_for(lambda: driver.find_element("id", "connection").text == "live", 20, "live")
            yield driver, served.base
        finally:
            driver.quit()


def feed_row(scale: dict[str, float]) -> list[list[str]]:
    with database("sqlite", "page_feed") as url, Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionRecord(id="s-feed", project_id="p"))
        for _ in range(int(scale["events"]) // 5000):
            append(store, 5000)
        turn = turns(store, "s-feed", 1, 10, int(time.time() * 1000) - 60_000)
        with live_page(url, "/?view=feed") as (driver, base):
            feed = driver.current_window_handle
            driver.switch_to.new_window("window")
            driver.get(f"{base}/?view=session&id=s-feed")
            wait_for(
                lambda: driver.execute_script(
                    "return document.querySelectorAll('#session-timeline g.turn').length;"
                ),
                20,
                "the timeline",
            )
            session = driver.current_window_handle
            windows = {"feed": feed, "session": session}
            start: dict[str, tuple[float, float]] = {}
            for name, handle in windows.items():
                driver.switch_to.window(handle)
                driver.execute_cdp_cmd("Performance.enable", {})
                start[name] = (heap_mb(driver), busy_s(driver))
            began = time.monotonic()
            stop = threading.Event()

            def write() -> None:  # a turn (3 events) every 30 ms: 100 events/s
                nonlocal turn
                next_at = time.monotonic()
                while not stop.is_set():
                    turn = turns(store, "s-feed", turn, 1, int(time.time() * 1000))
                    next_at += 3 / RATE
                    time.sleep(max(0.0, next_at - time.monotonic()))

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(scale["minutes"] * 60)
            stop.set()
            writer.join()
            wall = time.monotonic() - began
            end: dict[str, tuple[float, float]] = {}
            for name, handle in windows.items():
                driver.switch_to.window(handle)
                end[name] = (heap_mb(driver), busy_s(driver))
            driver.switch_to.window(feed)
            latest = store.events.load(after_seq=0, limit=1).latest_seq
            newest = (
                "const r = document.querySelector('#feed tbody tr'); return r && +r.dataset.seq;"
            )
            wait_for(lambda: driver.execute_script(newest) == latest, 10, "the newest event")
            rows = driver.execute_script(
                "return document.querySelectorAll('#feed tbody tr').length;"
            )
    found = []
    for name, what in (("feed", "feed with its rate chart"), ("session", "session's timeline")):
        heap, busy = end[name][0], (end[name][1] - start[name][1]) / wall * 100
        extra = f"; {rows} rows" if name == "feed" else ""
        ok = heap <= 5 and busy <= 10 and (name != "feed" or rows <= 1000)
        found.append(
            [
                "sqlite",
                f"{what}: {scale['events']:,.0f} events, then {RATE}/s for "
                f"{scale['minutes']:g} min",
                f"JS heap {start[name][0]:.1f} MB at the start, {heap:.1f} MB at the end; main "
                f"thread busy {busy:.1f} %{extra}",
                ("<= 5 MB, <= 10 %" + (", <= 1,000 rows: " if name == "feed" else ": "))
                + ("PASS" if ok else "MISS"),
            ]
        )
    return found


def timeline_row(backend: str, count: int) -> list[str]:
    with database(backend, "page_timeline") as url, Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionRecord(id="s-turns", project_id="p"))
        at = int(time.time() * 1000) - count * 1000
        for first in range(1, count + 1, 500):
            turns(store, "s-turns", first, min(500, count + 1 - first), at + (first - 1) * 1000)
        route = (
            "performance.clearMarks(); performance.mark('route');"
            "history.pushState(null, '', '?view=session&id=s-turns');"
            "dispatchEvent(new PopStateEvent('popstate'));"
        )
        mark = (
            "const r = performance.getEntriesByName('route');"
            "const m = performance.getEntriesByName('session-timeline-drawn');"
            "return r.length && m.length ? m[0].startTime - r[0].startTime : 0;"
        )
        drawn = []
        with live_page(url, "/?view=feed") as (driver, base):
            for _ in range(5):
                driver.get(f"{base}/?view=feed")
                wait_for(lambda: driver.find_element("id", "connection").text == "live", 20, "live")
                driver.execute_script(route)
                drawn.append(wait_for(lambda: driver.execute_script(mark), 20, "the timeline"))
    what = f"session timeline drawn after the route change, {count:,} turns"
    return timed_row(backend, what, drawn, 200)


def timed_row(backend: str, what: str, drawn: list[float], target_ms: float) -> list[str]:
    """The row of `drawn` (ms, one per load): their median against `target_ms`."""
    median = statistics.median(drawn)
    return [
        backend,
        f"{what} (median of {len(drawn)})",
        f"{median:.0f} ms (each: {', '.join(f'{d:.0f}' for d in drawn)})",
        f"<= {target_ms:,.0f} ms: " + ("PASS" if median <= target_ms else "MISS"),
    ]


def sessions_row(backend: str, count: int) -> list[str]:
    with database(backend, "page_sessions") as url, Store.open(url, upgrade=True) as store:
        for first in range(0, count, 1000):
            with store.unit_of_work() as uow:
                for number in range(first, first + 1000):
                    record = SessionRecord(id=f"s-{number:05d}", project_id="p")
                    store.sessions.save(record, uow=uow)
                uow.commit()
        mark = (
            "const m = performance.getEntriesByName('sessions-drawn');"
            "return m.length ? m[0].startTime : 0;"
        )
        drawn = []
        with live_page(url, "/") as (driver, base):
            for _ in range(5):
                driver.get(f"{base}/?view=sessions")
                drawn.append(wait_for(lambda: driver.execute_script(mark), 20, "the first row"))
    what = f"sessions list drawn after navigation start, {count:,} sessions"
    return timed_row(backend, what, drawn, 150)


def main(argv: list[str]) -> None:
    arguments = bench_arguments(__doc__, argv)
    scale = QUICK if arguments.quick else FULL
    title = f"page.py ({'quick' if arguments.quick else 'full'})"
    problem = browser_problem()
    if problem is not None:
        print(f"\n## {title}\n\nskipped: {problem}")
        return
    lines = []
    for backend in ("sqlite", "postgresql"):
        if arguments.only in (None, backend):
            lines.append(sessions_row(backend, int(scale["sessions"])))
            lines.append(timeline_row(backend, 1000))
    if arguments.only in (None, "sqlite"):
        lines += feed_row(scale)
    print_markdown(title, lines)


if __name__ == "__main__":
    main(sys.argv[1:])
