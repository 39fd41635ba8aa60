"""Scenario: a prune is killed with SIGKILL half-way (after its first batch committed, while
later batches run), then run again.

This proves, on SQLite and PostgreSQL: the floor (`pruned_through`) was recorded before the first
batch; after the kill no event below it is served (`after_seq=0` starts above it, a cursor
below it expires) although some are still stored; the frontier never moved; running the prune
again deletes exactly the rest, after which the floor and the stored rows agree (no event at or
below it, every event above it); on SQLite the file passes its integrity checks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from session_journal import CursorExpired, Store
from tests.factories import SessionFactory
from tests.reliability.harness import assert_sound, wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

EVENTS = 3000
THROUGH = 2500
BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'
# The child prunes in batches of 10 (250 transactions), so the kill lands among them.
CHILD = """
import sys
from session_journal import Store
from session_journal.services import events
events.PRUNE_BATCH = 10
with Store.open(sys.argv[1]) as store:
    store.events.prune(through_seq=int(sys.argv[2]))
"""


def stored(url: str) -> tuple[int, int, int, int]:
    """(events stored at or below THROUGH, above it, pruned_through, frontier), by plain SQL."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            below, above = connection.execute(
                sa.text(
                    "SELECT SUM(CASE WHEN seq <= :t THEN 1 ELSE 0 END), "
                    "SUM(CASE WHEN seq > :t THEN 1 ELSE 0 END) FROM api_events"
                ),
                {"t": THROUGH},
            ).one()
            floor, latest = connection.execute(
                sa.text(
                    "SELECT pruned_through, last_seq FROM event_sequences WHERE name = 'api_events'"
                )
            ).one()
    finally:
        engine.dispose()
    return int(below or 0), int(above or 0), int(floor), int(latest)


def test_a_prune_killed_half_way_is_finished_by_the_next_one(
    backend: str, migrated_url: str
) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s1"))
        with store.unit_of_work() as uow:
            for _ in range(EVENTS):
                uow.events.append("s1", 1, BODY)
            uow.commit()
    assert stored(migrated_url) == (THROUGH, EVENTS - THROUGH, 0, EVENTS)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, migrated_url, str(THROUGH)], env=env)
    try:
        # Half-way: the floor is recorded and some, not all, of the prefix is gone.
        wait_for(
            lambda: stored(migrated_url)[0] < THROUGH * 2 // 3, "the prune to be under way", 60
        )
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    time.sleep(0.1)

    below, above, floor, latest = stored(migrated_url)
    assert 0 < below < THROUGH, "the kill did not land half-way"
    assert (above, floor, latest) == (EVENTS - THROUGH, THROUGH, EVENTS)
    assert_sound(backend, migrated_url)
    with Store.open(migrated_url) as store:
        assert store.events.load(after_seq=0, limit=1).events[0].seq == THROUGH + 1
        with pytest.raises(CursorExpired):
            store.events.load(after_seq=THROUGH - 1)
        # Again: the rest goes, and only the rest.
        assert store.events.prune(through_seq=THROUGH) == below
        assert store.events.prune(through_seq=THROUGH) == 0
    assert stored(migrated_url) == (0, EVENTS - THROUGH, THROUGH, EVENTS)
    assert_sound(backend, migrated_url)
