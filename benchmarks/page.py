"""The operator page in headless Chromium (Debian's, through Selenium), against
`session-journal serve` on a fresh database:

1. the feed view with 100,000 events in the log and 100 events/s arriving for 10 minutes: the
   page's JavaScript heap (`Performance.getMetrics` `JSHeapUsedSize` after
   `HeapProfiler.collectGarbage`, over the DevTools protocol) at the start and at the end, and
   the rows the document holds (targets: <= 100 MB, <= 1,000 rows); SQLite;
2. the sessions list with 10,000 sessions in the database: the time from navigation start to
   the first row drawn (the page's `performance.mark('sessions-drawn')`), median of 5 loads
   (target <= 1 s); on SQLite and PostgreSQL.

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
from session_journal import SessionRecord, Store
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


def feed_row(scale: dict[str, float]) -> list[str]:
    with database("sqlite", "page_feed") as url, Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionRecord(id="s-feed", project_id="p"))
        for _ in range(int(scale["events"]) // 5000):
            append(store, 5000)
        with live_page(url, "/?view=feed") as (driver, _):
            driver.execute_cdp_cmd("Performance.enable", {})
            start = heap_mb(driver)
            stop = threading.Event()

            def write() -> None:
                next_at = time.monotonic()
                while not stop.is_set():
                    append(store, RATE // 10)
                    next_at += 0.1
                    time.sleep(max(0.0, next_at - time.monotonic()))

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(scale["minutes"] * 60)
            stop.set()
            writer.join()
            latest = store.events.load(after_seq=0, limit=1).latest_seq
            newest = (
                "const r = document.querySelector('#feed tbody tr'); return r && +r.dataset.seq;"
            )
            wait_for(lambda: driver.execute_script(newest) == latest, 10, "the newest event")
            end = heap_mb(driver)
            rows = driver.execute_script(
                "return document.querySelectorAll('#feed tbody tr').length;"
            )
    return [
        "sqlite",
        f"feed: {scale['events']:,.0f} events, then {RATE}/s for {scale['minutes']:g} min",
        f"JS heap {start:.1f} MB at the start, {end:.1f} MB at the end; {rows} rows",
        "<= 100 MB, <= 1,000 rows: " + ("PASS" if end <= 100 and rows <= 1000 else "MISS"),
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
    median = statistics.median(drawn)
    return [
        backend,
        f"sessions list drawn after navigation start, {count:,} sessions (median of 5)",
        f"{median:.0f} ms (each: {', '.join(f'{d:.0f}' for d in drawn)})",
        "<= 1,000 ms: " + ("PASS" if median <= 1000 else "MISS"),
    ]


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
    if arguments.only in (None, "sqlite"):
        lines.append(feed_row(scale))
    print_markdown(title, lines)


if __name__ == "__main__":
    main(sys.argv[1:])
