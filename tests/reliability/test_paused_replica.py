"""Scenario: two replicas of one projector — a durable consumer whose read model is a table of
the store's database, written in the transaction that acks each page (`uow=`, with the lease) —
run as two processes. The first takes the lease, handles a page and reads the next; it is then
paused with SIGSTOP (a stopped VM, a long pause of its runtime) past its lease. The second is
refused the lease while the first's is live, waits for it, takes it over and handles every page.
The first is resumed and goes on with the page it had read: its ack and its renewal raise
`LeaseLost`, and its unit of work, effects included, rolls back.

This proves, on SQLite and PostgreSQL, with the database's real clock: each event's effect is
in the read model exactly once, the consumer's position never moves back, and the second
replica took a newer generation.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from session_journal import ApiEventFilter, Store
from tests.factories import SessionFactory
from tests.helpers import append_raw
from tests.reliability import children
from tests.reliability.harness import Workers, assert_sound, wait_for
from tests.reliability.test_killed_projector import ACTIVITY, FAULT, effects_and_position

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

TTL_S = 3.0  # the first replica's lease: it is paused for longer


def test_a_replica_paused_past_its_lease_is_fenced_off(
    backend: str, migrated_url: str, store: Store, workers: Workers, tmp_path: Path
) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    with store.unit_of_work() as uow:
        uow.connection.exec_driver_sql("CREATE TABLE projected_effects (seq BIGINT NOT NULL)")
        uow.commit()
    store.consumers.register("projector", filter=ApiEventFilter(types=["session_fault"]))
    append_raw(store, "s1", FAULT, 5)
    append_raw(store, "s1", ACTIVITY, 2)
    append_raw(store, "s1", FAULT, 7)
    latest = store.events.latest_seq()
    ready, go = tmp_path / "ready", tmp_path / "go"

    first = workers.start("replica-a", migrated_url)
    first.send(children.hold_until_paused, "projector", "replica-a", TTL_S, str(ready), str(go))
    wait_for(ready.exists, "the first replica to read its second page")
    pid = first.process.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        paused_at = time.monotonic()
        handled_by_first = store.consumers.position("projector")
        assert 0 < handled_by_first < latest

        second = workers.start("replica-b", migrated_url)
        refused_by, generation, position = second.call(
            children.take_over, "projector", "replica-b", TTL_S, latest
        )
        assert time.monotonic() - paused_at >= TTL_S * 0.9  # it waited for the expiry
        assert (refused_by, generation, position) == ("replica-a", 2, latest)
        second.stop()
        go.touch()
    finally:
        os.kill(pid, signal.SIGCONT)
    acked, renewed = first.receive()
    assert acked.startswith("LeaseLost: ack of consumer 'projector' refused: the lease held by ")
    assert "taken over by 'replica-b' (generation 2)" in acked
    assert renewed.startswith("LeaseLost: cannot renew it")
    first.stop()

    rows, position, seqs = effects_and_position(migrated_url)
    assert position == latest  # never moved back by the resumed replica
    assert sorted(rows) == seqs and set(rows.values()) == {1}, "an effect applied twice"
    assert Counter(rows).total() == len(seqs)
    status = store.consumers.get("projector")
    assert (status.holder, status.generation) == ("replica-b", 2)  # `stop` left it held
    assert_sound(backend, migrated_url)
