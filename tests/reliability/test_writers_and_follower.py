"""Scenario: writer processes append to their own sessions while a follower process pages the
log by cursor, round after round on one database.

Each round, WRITERS processes start together (a barrier) and each commits COMMITS steps of its
plan for a new session of its own: single startup faults through the service and, every third
commit, a unit of work of three events. Each acknowledges every committed event with its seq.
Meanwhile a follower process pages from the frontier at which the round started, with page
sizes drawn at random, until it has every event of the round.

This proves, on SQLite and PostgreSQL, round after round:
- the follower receives every event exactly once, seqs strictly increasing with no hole: its
  list is the final log of the round, seq for seq, and one more page after it is empty;
- every acknowledged event is in the final log exactly once, with the seq it was acknowledged
  with, and the log holds nothing that was not acknowledged;
- each writer's events are in its commit order.

(`tests/integration/test_concurrency.py` covers threads inside each writer and activity
snapshots; this one repeats the run and checks the writers' acknowledgements.)
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from session_journal import Store
from tests.factories import SessionFactory
from tests.reliability import children
from tests.reliability.harness import Workers, read_acks, rounds

pytestmark = pytest.mark.reliability

WRITERS = 3
COMMITS = range(30)  # 50 events per writer: 20 single faults and 10 units of work of 3


def test_a_follower_sees_every_acknowledged_event_of_concurrent_writers_once_in_order(
    store: Store, migrated_url: str, workers: Workers, rng: random.Random, tmp_path: Path
) -> None:
    barrier = workers.barrier(WRITERS)
    writers = [workers.start(f"writer-{n}", migrated_url, barrier) for n in range(WRITERS)]
    follower = workers.start("follower", migrated_url)

    for round_ in range(rounds(2)):
        sessions = [f"round-{round_}-writer-{n}" for n in range(WRITERS)]
        for session in sessions:
            store.sessions.save(SessionFactory(id=session))
        start = store.events.latest_seq()
        expected = WRITERS * len(children.planned("x", COMMITS))
        limits = [rng.randint(1, 9) for _ in range(16)]

        follower.send(children.follow, start, expected, limits)
        for writer, session in zip(writers, sessions, strict=True):
            writer.send(children.append_commits, session, COMMITS, str(tmp_path / session), True)
        assert [writer.receive() for writer in writers] == [len(COMMITS)] * WRITERS
        seen, one_more_page = follower.receive()

        log = children.logged(store, after_seq=start)
        assert [seq for seq, _, _ in log] == list(range(start + 1, start + expected + 1))
        assert seen == log
        assert one_more_page == 0
        for session in sessions:
            acks = read_acks(tmp_path / session)
            assert acks == [(seq, message) for seq, owner, message in log if owner == session]
            assert [message for _, message in acks] == children.planned(session, COMMITS)

    for worker in [*writers, follower]:
        worker.stop()
