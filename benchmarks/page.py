"""The operator page in headless Chromium (Debian's, through Selenium), against
`session-journal serve` on a fresh database:

1. the feed view with 100,000 events in the log and 100 events/s arriving for 10 minutes: the
   page's JavaScript heap (`Performance.getMetrics` `JSHeapUsedSize` after
   `HeapProfiler.collectGarbage`, over the DevTools protocol) at the start and at the end, and
   the rows the document holds (targets: <= 100 MB, <= 1,000 rows); SQLite;
2. the sessions list with 10,000 sessions in the database: the time from navigation start to
   the first row drawn (the page's `performance.mark('sessions-drawn')`), median of 5 loads
   (target <= 1 s); on SQLite and PostgreSQL.

Usage: `page.py [--quick] [--only sqlite|postgresql]` (`--quick`: 1 minute, 10,000 events).
Skipped, saying so, where /usr/bin/chromium or /usr/bin/chromedriver is missing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _databases import database
from _harness import bench_arguments
from bench import BODY

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from session_journal import SessionRecord, Store
from tests.web.browser import ARGUMENTS, CHROMEDRIVER, CHROMIUM, browser_problem

TOKEN = "p" * 43
FULL = {"events": 100_000, "minutes": 10.0, "sessions": 10_000}
QUICK = {"events": 10_000, "minutes": 1.0, "sessions": 10_000}
RATE = 100  # events per second while the page is open


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Served:
    """`session-journal serve` on `url` in a process of its own."""

    def __init__(self, url: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "SESSION_JOURNAL_WEB_TOKEN": TOKEN}
        command = [sys.executable, "-m", "session_journal", "--url", url, "serve"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if "serving on" in line:
                break

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(20)


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ARGUMENTS:
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def wait_for(condition: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("the page did not get there")


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


def feed_row(scale: dict[str, float]) -> list[str]:
    with database("sqlite", "page_feed") as url, Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionRecord(id="s-feed", project_id="p"))
        for _ in range(int(scale["events"]) // 5000):
            append(store, 5000)
        served, driver = Served(url), browser()
        try:
            driver.execute_cdp_cmd("Performance.enable", {})
            driver.get(f"{served.base}/?view=feed#token={TOKEN}")
            wait_for(lambda: driver.find_element("id", "connection").text == "live", 20)
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
            wait_for(
                lambda: (
                    driver.execute_script(
                        "const r = document.querySelector('#feed tbody tr');"
                        "return r && +r.dataset.seq;"
                    )
                    == latest
                ),
                10,
            )
            end = heap_mb(driver)
            rows = driver.execute_script("return document.querySelectorAll('#feed tr').length;")
        finally:
            driver.quit()
            served.close()
    rows -= 1  # the header's row
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
        served, driver = Served(url), browser()
        try:
            driver.get(f"{served.base}/#token={TOKEN}")
            wait_for(lambda: driver.find_element("id", "connection").text == "live", 20)
            drawn = []
            for _ in range(5):
                driver.get(f"{served.base}/?view=sessions")
                drawn.append(
                    wait_for(
                        lambda: driver.execute_script(
                            "const m = performance.getEntriesByName('sessions-drawn');"
                            "return m.length ? m[0].startTime : 0;"
                        ),
                        20,
                    )
                )
        finally:
            driver.quit()
            served.close()
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
    print(f"\n## page.py ({'quick' if arguments.quick else 'full'})\n")
    problem = browser_problem()
    if problem is not None:
        print(f"skipped: {problem}")
        return
    lines = []
    for backend in ("sqlite", "postgresql"):
        if arguments.only in (None, backend):
            lines.append(sessions_row(backend, int(scale["sessions"])))
    if arguments.only in (None, "sqlite"):
        lines.append(feed_row(scale))
    print("| backend | measure | figure | target |")
    print("| --- | --- | --- | --- |")
    for each in lines:
        print("| " + " | ".join(each) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
