"""The store the web tests serve: the controller of `scenario.py` on the backend's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from session_journal import Store
from tests.web.scenario import controller


@pytest.fixture
def writer(migrated_url: str) -> Iterator[Store]:
    """A store on `migrated_url` holding the scenario (the tests append through it while a
    server reads the same database)."""
    with Store.open(migrated_url) as store:
        controller(store)
        yield store
