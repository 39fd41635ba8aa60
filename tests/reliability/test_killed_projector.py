"""Scenario: a projector — a durable consumer whose read model is a table of the store's
database, written in the transaction that acks each page (`uow=`) — is killed with SIGKILL at a
random moment and restarted, 50 times on one database, while the log grows between rounds with
events of its type and of another.

This proves, on SQLite and PostgreSQL, after every kill, in a freshly opened store:
- the read model holds one row for each event of the consumer's type at or below its stored
  position, and nothing else: no event handled twice, none skipped, none above the position;
- the position only moves forward, never past the frontier;
- on SQLite, `integrity_check` and `foreign_key_check` pass;
and at the end an unkilled projector catches up: every event of its type, exactly once.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import ApiEventFilter, Store
from tests.factories import SessionFactory
from tests.helpers import append_raw
from tests.reliability import children
from tests.reliability.harness import (
    Workers,
    assert_sound,
    named_url,
    wait_disconnected,
    wait_for,
)

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

RESTARTS = 50  # the number: not shortened under `make test`
LONGEST_RUN_S = 0.15  # the kill comes up to this long after the follower started
FAULT = (
    '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'
)
ACTIVITY = (
    '{"type":"activity_changed","data":{"activity":{"state":"s","details":{"kind":"turn",'
    '"turn_started_at_ms":1},"is_idle":false,"waiting_for_input":false,"capacity_retry":false}}}'
)


def effects_and_position(url: str) -> tuple[Counter[int], int, list[int]]:
    """The read model's rows (seq: how many), the consumer's position and the seqs of the events
    of its type, read by a fresh store."""
    with Store.open(url) as store:
        with store.unit_of_work() as uow:
            rows = Counter(uow.connection.execute(sa.select(children.EFFECTS.c.seq)).scalars())
        position = store.consumers.position("projector")
        faults = ApiEventFilter(types=["session_fault"])
        seqs = [event.seq for event in store.events.load(faults, 0, 1000).events]
        while True:
            page = store.events.load(faults, seqs[-1] if seqs else 0, 1000)
            if not page.events:
                break
            seqs.extend(event.seq for event in page.events)
    return rows, position, seqs


def test_a_projector_killed_at_any_moment_handles_each_event_exactly_once(
    backend: str,
    migrated_url: str,
    store: Store,
    workers: Workers,
    rng: random.Random,
    tmp_path: Path,
) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    with store.unit_of_work() as uow:
        uow.connection.execute(sa.text("CREATE TABLE projected_effects (seq BIGINT NOT NULL)"))
        uow.commit()
    store.consumers.register("projector", filter=ApiEventFilter(types=["session_fault"]))
    positions = []
    for round_ in range(RESTARTS):
        append_raw(store, "s1", FAULT, rng.randint(5, 40))
        append_raw(store, "s1", ACTIVITY, rng.randint(0, 10))
        started = tmp_path / f"started-{round_}"
        child_url, name = named_url(migrated_url, f"projector-{round_}")
        projector = workers.start(f"projector-{round_}", child_url)
        limit = rng.choice([1, 3, 7, 50])
        projector.send(children.project_until_killed, "projector", limit, str(started))
        wait_for(started.exists, "the projector's follower")
        time.sleep(rng.uniform(0, LONGEST_RUN_S))
        projector.kill()
        wait_disconnected(migrated_url, name)

        rows, position, seqs = effects_and_position(migrated_url)
        assert [seq for seq, times in rows.items() if times > 1] == [], "handled twice"
        assert sorted(rows) == [seq for seq in seqs if seq <= position], "skipped or ahead"
        assert not positions or position >= positions[-1]
        assert position <= store.events.latest_seq()
        positions.append(position)
        assert_sound(backend, migrated_url)
    print(f"positions after each kill: {positions}")

    latest = store.events.latest_seq()
    finisher = workers.start("finisher", migrated_url)
    assert finisher.call(children.project_through, "projector", 10, latest) == latest
    finisher.stop()
    rows, position, seqs = effects_and_position(migrated_url)
    assert position == latest
    assert sorted(rows) == seqs and set(rows.values()) == {1}
