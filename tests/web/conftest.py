"""The store the web tests serve: the controller of `scenario.py` on the backend's database,
and the app on it, called in process (a module overrides `served` to serve another store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from session_journal import Store
from tests.web.client import InProcess, serve
from tests.web.scenario import controller


@pytest.fixture
def served(store: Store) -> Store:
    """The scenario, in the backend's store."""
    return controller(store)


@pytest.fixture
def web(served: Store) -> Iterator[InProcess]:
    """The app with `TOKENS` on `served`."""
    with serve(served) as client:
        yield client


@pytest.fixture
def writer(migrated_url: str) -> Iterator[Store]:
    """A store on `migrated_url` holding the scenario (the tests append through it while a
    server reads the same database)."""
    with Store.open(migrated_url) as store:
        controller(store)
        yield store
