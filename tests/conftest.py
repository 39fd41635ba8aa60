"""Fixtures: every integration test runs on SQLite and PostgreSQL through `backend`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from session_journal import Store
from tests.backends import database_url, postgres_problem, postgres_required

BACKENDS = ["sqlite", "postgresql"]


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


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    """A store migrated to head."""
    with Store.open(url, upgrade=True) as opened:
        yield opened
