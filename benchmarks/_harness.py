"""What the throughput benchmarks share: scales, the API-vs-bare comparison, the table."""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.types.string import TextLoader

Connection = Any  # a DB-API connection: sqlite3.Connection or psycopg.Connection


@dataclass(frozen=True)
class Scale:
    appends: int = 20_000
    sessions: int = 50
    workspaces: int = 5
    log_events: int = 200_000
    batch: int = 5_000
    tail_reads: int = 2_000
    processes: int = 4
    per_process: int = 5_000
    min_seconds: float = 2.0


QUICK = Scale(appends=2_000, log_events=20_000, tail_reads=200, per_process=500, min_seconds=0.3)


@dataclass
class Row:
    backend: str
    workload: str
    api: float  # events/s: the median of the rounds
    bare: float
    ratio: float = 0.0  # the median of the rounds' api / bare (0: api / bare)
    load: float = -1.0  # the 1-minute load average when it was measured (-1: not read)
    kind: str = ""  # with the backend, the key of its target, if any
    again: float | None = None  # the ratio measured once more, when the first was at target

    def __post_init__(self) -> None:
        if not self.ratio:
            self.ratio = self.api / self.bare
        if self.load < 0:
            self.load = os.getloadavg()[0]


@dataclass
class Backend:
    """Where the databases of one backend live and how the bare driver connects to them."""

    name: str
    base: str  # a temporary directory (SQLite) or a server URL (PostgreSQL)
    schemas: list[str] = field(default_factory=list)

    def fresh_url(self, tag: str) -> str:
        if self.name == "sqlite":
            return f"sqlite:///{self.base}/{tag}.db"
        schema = f"sj_bench_{uuid.uuid4().hex[:10]}_{tag}"
        with closing(psycopg.connect(pg_conninfo(self.base), autocommit=True)) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        url = sa.make_url(self.base).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    def connect(self, url: str, json_as_text: bool = False) -> Connection:
        """A bare connection; psycopg decodes `json` columns unless `json_as_text`."""
        if self.name == "sqlite":
            connection = sqlite3.connect(str(sa.make_url(url).database))
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
                connection.execute(f"PRAGMA {pragma}")
            return connection
        pg = psycopg.connect(pg_conninfo(url))
        if json_as_text:
            pg.adapters.register_loader("json", TextLoader)
        return pg

    def sql(self, text: str) -> str:
        return text if self.name == "sqlite" else text.replace("?", "%s")

    def drop(self) -> None:
        if not self.schemas:
            return
        with closing(psycopg.connect(pg_conninfo(self.base), autocommit=True)) as admin:
            for schema in self.schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_conninfo(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


MIN_ROUNDS = 5
"""Every comparison runs at least this many alternating rounds; its ratio is their median."""
AT_TARGET = 0.05
"""A ratio within this share of its target is measured once more (`measure`)."""


def compare(
    api: Callable[[], int], bare: Callable[[], int], rounds: int, seconds: float = 0.0
) -> tuple[float, float, float, float]:
    """Events/s of `api` and `bare` (each returns the events it handled), run in alternating
    rounds (at least `MIN_ROUNDS`) so that drift in disk latency or CPU contention hits both
    alike; each round repeats each side's work for at least `seconds`. The medians over the
    rounds of each side's rate and of the rounds' ratios, and the 1-minute load average."""
    if seconds:  # reads: one untimed pass each first (caches, prepared statements)
        api(), bare()
    rates: dict[Callable[[], int], list[float]] = {api: [], bare: []}
    for _ in range(max(rounds, MIN_ROUNDS)):
        for work, rate in rates.items():
            handled, started = 0, time.perf_counter()
            now = started
            while now - started <= seconds or not handled:
                handled += work()
                now = time.perf_counter()
            rate.append(handled / (now - started))
    ratios = [ours / theirs for ours, theirs in zip(rates[api], rates[bare], strict=True)]
    load = os.getloadavg()[0]
    return (
        statistics.median(rates[api]),
        statistics.median(rates[bare]),
        statistics.median(ratios),
        load,
    )


def measure(
    backend: str,
    workload: str,
    kind: str,
    targets: dict[tuple[str, str], float],
    comparison: Callable[[], tuple[float, float, float, float]],
) -> Row:
    """A row of `comparison()` (a `compare` call); measured once more when its ratio is within
    `AT_TARGET` of the row's target, so that a verdict at the edge is not one run's noise."""
    row = Row(backend, workload, *comparison(), kind)
    target = targets.get((backend, kind))
    if target is not None and abs(row.ratio / target - 1) <= AT_TARGET:
        row.again = comparison()[2]
    return row


def verdict(row: Row, target: float | None) -> str:
    """PASS or MISS against `target`; "at target" when the ratio was within `AT_TARGET` of it
    and, measured once more (`Row.again`), still was."""
    if target is None:
        return "-"
    ratio = row.ratio if row.again is None else row.again
    if row.again is not None and abs(ratio / target - 1) <= AT_TARGET:
        outcome = "at target"
    else:
        outcome = "PASS" if ratio >= target else "MISS"
    again = "" if row.again is None else f" (again {row.again:.2f}x)"
    return f">= {target:.2f} {outcome}{again}"


def postgres_version(url: str) -> str | None:
    try:
        with closing(psycopg.connect(pg_conninfo(url), connect_timeout=3)) as connection:
            row = connection.execute(
                "SELECT current_setting('server_version'), current_setting('fsync'),"
                " current_setting('synchronous_commit')"
            ).fetchone()
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0]
        print(f"PostgreSQL at {url} does not answer ({reason}): skipped")
        return None
    assert row is not None
    return f"{row[0]} (fsync={row[1]}, synchronous_commit={row[2]})"


def print_table(rows: list[Row], targets: dict[tuple[str, str], float]) -> None:
    """Events/s of each row (medians of its rounds), the median ratio api / bare, the load
    average when it was measured and its verdict against `targets`."""
    header = (
        f"{'backend':<11}{'workload':<30}{'api ev/s':>11}{'bare ev/s':>11}{'ratio':>8}"
        f"{'load':>6}  target"
    )
    print("\n" + header + "\n" + "-" * (len(header) + 16))
    for row in rows:
        numbers = f"{row.api:>11,.0f}{row.bare:>11,.0f}{row.ratio:>7.2f}x{row.load:>6.2f}"
        target = targets.get((row.backend, row.kind))
        print(f"{row.backend:<11}{row.workload:<30}{numbers}  {verdict(row, target)}")


def print_markdown(title: str, lines: Sequence[Sequence[str]]) -> None:
    """`## title`, then `lines` (backend, measure, figure, target and verdict) as a Markdown
    table, as the docs' performance page shows them."""
    print(f"\n## {title}\n")
    print("| backend | measure | figure | target |")
    print("| --- | --- | --- | --- |")
    for line in lines:
        print("| " + " | ".join(line) + " |")


def bench_arguments(doc: str | None, argv: Sequence[str] | None) -> argparse.Namespace:
    """`--quick` and `--only sqlite|postgresql`, which `make bench` passes to every script."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help="scale the counts down")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    return parser.parse_args(argv)


def backends_to_run(directory: str, only: str | None, postgres_url: str) -> list[Backend]:
    """SQLite in `directory` and PostgreSQL at `postgres_url` (when it answers), less `only`'s
    other one."""
    chosen = [] if only == "postgresql" else [Backend("sqlite", directory)]
    if only != "sqlite" and postgres_version(postgres_url):
        chosen.append(Backend("postgresql", postgres_url))
    return chosen
