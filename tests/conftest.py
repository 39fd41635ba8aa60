"""Fixtures: every integration test runs on SQLite and PostgreSQL through `backend`.

`url` is an empty database (for the tests of migrations and of the schema check); `migrated_url`
and `store` are a copy of a database migrated once per run (`sqlite_template`,
`postgresql_template`). `-m postgresql` selects the tests that run on PostgreSQL, `-m sqlite`
every other test: the SQLite half of each integration test and every test that needs no database
server (unit tests included), see `pytest_collection_modifyitems`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from session_journal import Store
from session_journal.aio import AsyncStore
from session_journal.storage.clock import DATABASE_CLOCK
from tests.asyncapi import LoopThread, SyncOverAsync
from tests.backends import (
    NOTICES,
    database_url,
    migrated_database_url,
    migrated_template,
    postgres_problem,
    postgres_required,
)

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("postgresql", marks=pytest.mark.postgresql),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by what it needs: `postgresql` if it runs on PostgreSQL (through the
    `backend` fixture, also when a module parametrizes it to "postgresql" alone), else `sqlite`:
    `-m sqlite` is every test that runs without a PostgreSQL server."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgresql = callspec is not None and callspec.params.get("backend") == "postgresql"
        if on_postgresql or item.get_closest_marker("postgresql"):
            if not item.get_closest_marker("postgresql"):
                item.add_marker(pytest.mark.postgresql)
        elif not item.get_closest_marker("sqlite"):
            item.add_marker(pytest.mark.sqlite)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Tell what setup the run fell back to (`tests.backends.NOTICES`)."""
    for notice in NOTICES:
        terminalreporter.write_line(notice, yellow=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name; PostgreSQL is skipped only outside CI when no server answers."""
    name: str = request.param
    if name == "postgresql":
        problem = postgres_problem()
        if problem is not None:
            if postgres_required():
                pytest.fail(f"PostgreSQL is required here: {problem}")
            pytest.skip(problem)
    return name


@pytest.fixture
def url(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database (no schema) on the backend."""
    with database_url(backend, tmp_path) as value:
        yield value


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """A SQLite file migrated to head once per run, closed, for `migrated_url` to copy."""
    with migrated_template("sqlite", tmp_path_factory.mktemp("template")) as path:
        yield path


@pytest.fixture(scope="session")
def postgresql_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """The script that makes a copy of a PostgreSQL schema migrated to head once per run, for
    `migrated_url` to run (see `tests.backends.migrated_template`)."""
    with migrated_template("postgresql", tmp_path_factory.mktemp("template")) as script:
        yield script


@pytest.fixture
def migrated_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a database migrated to head: a copy of the run's template on the backend,
    dropped after the test."""
    template: str | None = request.getfixturevalue(f"{backend}_template")
    with migrated_database_url(backend, template, tmp_path) as value:
        yield value


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `both_apis` runs each test that uses `store` twice: on the sync API and
    through the async one (`tests.asyncapi`); a test of it marked `sync_api` (one that
    inspects or patches the sync store's internals) runs on the sync API only."""
    definition = metafunc.definition
    if (
        "store" in metafunc.fixturenames
        and definition.get_closest_marker("both_apis")
        and not definition.get_closest_marker("sync_api")
    ):
        metafunc.parametrize("api", ["sync", "async"], indirect=True)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> str:
    """Which API the `store` fixture serves: "sync", or "async" in a `both_apis` module."""
    return getattr(request, "param", "sync")


@pytest.fixture
def store(migrated_url: str, api: str) -> Iterator[Store]:
    """A store on a database migrated to head; with `api == "async"`, a look-alike whose every
    service call is awaited on an `AsyncStore` (`tests.asyncapi`)."""
    if api == "sync":
        with Store.open(migrated_url) as opened:
            yield opened
        return
    loop = LoopThread()
    try:
        opened_async = loop.run(AsyncStore.open(migrated_url))
        with SyncOverAsync(opened_async, loop) as facade:
            yield facade  # type: ignore[misc]
    finally:
        loop.close()


class PinnedClock:
    """The database's clock of leases, pinned by a test (`storage/clock.py`): every statement
    that reads the clock reads `ms` instead, on both backends."""

    START_MS = 1_800_000_000_000  # 2027-01-15, a time no real clock of the run shows

    def __init__(self) -> None:
        self.set(self.START_MS)

    @property
    def ms(self) -> int:
        assert DATABASE_CLOCK.pinned_ms is not None
        return DATABASE_CLOCK.pinned_ms

    def set(self, ms: int) -> None:
        DATABASE_CLOCK.pinned_ms = ms

    def advance(self, seconds: float) -> None:
        """Move the clock by `seconds` (back, if negative: a clock jump)."""
        self.set(self.ms + round(seconds * 1000))


@pytest.fixture
def pinned_clock() -> Iterator[PinnedClock]:
    """The leases' clock pinned at `PinnedClock.START_MS` for the test, then the database's
    again."""
    try:
        yield PinnedClock()
    finally:
        DATABASE_CLOCK.pinned_ms = None
