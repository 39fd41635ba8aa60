"""Operators' maintenance of a database: its statistics (`db stats`) and giving back the space
that pruning freed (`db vacuum`). See the docs, "Retention"."""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass

import sqlalchemy as sa

from .config import StoreOptions
from .errors import InvalidRecord
from .migrations import verify
from .storage.engines import (
    create_engine,
    require_database,
    sqlite_migration_lock,
    translate_errors,
)
from .storage.models import ApiEventRow, Base, EventSequenceRow, SessionRow
from .storage.repositories.event_pages import API_EVENTS

_DURATION = re.compile(r"(?P<amount>[0-9]{1,12})(?P<unit>ms|s|m|h|d|w)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """Milliseconds of a duration written as a whole number and a unit: `500ms`, `30s`,
    `15m`, `12h`, `30d`, `2w`. `InvalidRecord` otherwise."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise InvalidRecord(
            f"duration must be a whole number with a unit (ms, s, m, h, d or w), such as 30d or "
            f"12h; got {text!r}"
        )
    return int(found["amount"]) * _UNIT_MS[found["unit"]]


@dataclass(frozen=True)
class DatabaseStats:
    """What `db stats` prints."""

    sessions: int
    events: int
    """Events stored (pruned ones and those of removed sessions are gone)."""
    pruned_through: int
    latest_seq: int
    """The frontier."""
    size_bytes: int
    """SQLite: the database's pages (page_count * page_size); PostgreSQL: the package's tables
    with their indexes and TOAST (`pg_total_relation_size`)."""
    free_bytes: int | None
    """SQLite: the pages on the free list, which `db vacuum` gives back; PostgreSQL: `None`."""


@dataclass(frozen=True)
class VacuumResult:
    """What `db vacuum` did: the size before and after (see `DatabaseStats.size_bytes`)."""

    before_bytes: int
    after_bytes: int

    @property
    def freed_bytes(self) -> int:
        """The space given back."""
        return max(0, self.before_bytes - self.after_bytes)


def _engine(url: str, options: StoreOptions | None) -> sa.Engine:
    require_database(url)  # never create one
    engine = create_engine(url, options or StoreOptions.from_env(), role="inspector")
    try:
        verify(engine)  # a database this code may use
    except BaseException:
        engine.dispose()
        raise
    return engine


def _size(connection: sa.Connection) -> tuple[int, int | None]:
    if connection.dialect.name == "sqlite":
        page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
        free = connection.exec_driver_sql("PRAGMA freelist_count").scalar_one()
        return int(pages) * int(page_size), int(free) * int(page_size)
    total = 0
    for table in Base.metadata.tables:
        size = connection.execute(
            sa.text("SELECT pg_total_relation_size(to_regclass(:table))"), {"table": table}
        ).scalar()
        total += int(size or 0)
    return total, None


def stats(url: str, options: StoreOptions | None = None) -> DatabaseStats:
    """The counts, the floor, the frontier and the size of the database at `url`."""
    engine = _engine(url, options)
    try:
        with translate_errors("read the database's statistics"), engine.connect() as connection:
            sessions = connection.execute(sa.select(sa.func.count()).select_from(SessionRow))
            events = connection.execute(sa.select(sa.func.count()).select_from(ApiEventRow))
            sequences = connection.execute(
                sa.select(EventSequenceRow.last_seq, EventSequenceRow.pruned_through).where(
                    EventSequenceRow.name == API_EVENTS
                )
            ).one()
            size, free = _size(connection)
            return DatabaseStats(
                sessions=int(sessions.scalar_one()),
                events=int(events.scalar_one()),
                pruned_through=int(sequences.pruned_through),
                latest_seq=int(sequences.last_seq),
                size_bytes=size,
                free_bytes=free,
            )
    finally:
        engine.dispose()


def vacuum(url: str, options: StoreOptions | None = None) -> VacuumResult:
    """Give back the space of deleted rows. SQLite: `VACUUM` (it rewrites the file; readers
    and writers of other processes wait up to their busy timeout meanwhile), outside any
    transaction, holding the migration lock so that no upgrade runs at the same time.
    PostgreSQL: `VACUUM (ANALYZE)` of each of the package's tables, which makes the space
    reusable (autovacuum does the same on its own; only `VACUUM FULL`, which locks the table
    out, shrinks the files: run it yourself in a maintenance window)."""
    engine = _engine(url, options)
    sqlite = engine.dialect.name == "sqlite"
    try:
        with (
            translate_errors("vacuum the database"),
            sqlite_migration_lock(url) if sqlite else nullcontext(),
        ):
            with engine.connect() as connection:
                before, _ = _size(connection)
            # On the driver's connection, outside any transaction: VACUUM refuses to run in one,
            # and SQLAlchemy's AUTOCOMMIT on this SQLite engine would still get its `BEGIN`.
            pooled = engine.raw_connection()
            try:
                driver = pooled.driver_connection
                assert driver is not None
                if sqlite:
                    driver.execute("VACUUM")
                    driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                else:
                    driver.rollback()
                    driver.autocommit = True
                    try:
                        for table in Base.metadata.tables:
                            exists = driver.execute(
                                "SELECT to_regclass(%s) IS NOT NULL", (table,)
                            ).fetchone()
                            if exists and exists[0]:
                                driver.execute(f'VACUUM (ANALYZE) "{table}"')
                    finally:
                        driver.autocommit = False
            finally:
                pooled.close()
            with engine.connect() as connection:
                after, _ = _size(connection)
        return VacuumResult(before, after)
    finally:
        engine.dispose()
