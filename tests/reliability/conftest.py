"""Fixtures of the reliability scenarios: child processes that never outlive a test, and a
seeded random source."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.reliability.harness import Workers, seeded_random


@pytest.fixture
def workers() -> Iterator[Workers]:
    """Starts children; every one still alive at the end of the test is killed and joined."""
    group = Workers()
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """The test's random choices (kill moments, page sizes, delays), replayable by seed."""
    return seeded_random(request.node.nodeid)
