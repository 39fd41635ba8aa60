"""Scenario: a writer process is killed with SIGKILL at a random moment while it appends, round
after round on one database.

Each round a new child appends its plan (single startup faults through the service and, every
third commit, a unit of work of three events) to a session of its own, acknowledging each
committed event with its seq, until the parent kills it a random moment after its first
acknowledgement: in a commit, between commits, or while it reads back its seqs.

This proves, on SQLite and PostgreSQL, after every kill, in a freshly opened store:
- every acknowledged event is in the log exactly once, with its acknowledged seq;
- the log holds whole commits of the plan, in order (a unit of work is all there or absent),
  and at most the one commit whose acknowledgement the kill cut off besides the acknowledged
  ones; seqs continue from the round's start with no hole;
- on SQLite, `integrity_check` and `foreign_key_check` pass;
- the store keeps working: the next append gets the next seq.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from session_journal import Store
from tests.factories import SessionFactory
from tests.reliability import children
from tests.reliability.harness import (
    Workers,
    assert_sound,
    named_url,
    read_acks,
    rounds,
    wait_disconnected,
    wait_for,
)

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

LONGEST_RUN_S = 0.4  # the kill comes up to this long after the first acknowledgement


def whole_commits(session: str, messages: list[str]) -> int:
    """How many commits of the plan `messages` is; fails unless it is whole commits, in order."""
    commits = 0
    while len(children.planned(session, range(commits))) < len(messages):
        commits += 1
    assert messages == children.planned(session, range(commits)), (
        f"{session}: not whole commits of the plan: {messages}"
    )
    return commits


def test_a_writer_killed_at_any_moment_loses_no_acknowledged_event(
    backend: str,
    migrated_url: str,
    store: Store,
    workers: Workers,
    rng: random.Random,
    tmp_path: Path,
) -> None:
    unacknowledged_commits = []
    for round_ in range(rounds(3)):
        session = f"killed-{round_}"
        store.sessions.save(SessionFactory(id=session))
        start = store.events.latest_seq()
        acks_path = tmp_path / f"{session}.acks"
        child_url, name = named_url(migrated_url, session)

        writer = workers.start(session, child_url)
        writer.send(children.append_until_killed, session, str(acks_path))
        wait_for(lambda path=acks_path: bool(read_acks(path)), "the writer's first commit")
        time.sleep(rng.uniform(0, LONGEST_RUN_S))
        writer.kill()
        wait_disconnected(migrated_url, name)

        acks = read_acks(acks_path)
        with Store.open(migrated_url) as reopened:
            log = children.logged(reopened, after_seq=start)
            assert [seq for seq, _, _ in log] == list(range(start + 1, start + len(log) + 1))
            assert {owner for _, owner, _ in log} == {session}
            assert [(seq, message) for seq, _, message in log[: len(acks)]] == acks
            committed = whole_commits(session, [message for _, _, message in log])
            acknowledged = whole_commits(session, [message for _, message in acks])
            assert committed - acknowledged in (0, 1)
            unacknowledged_commits.append(committed - acknowledged)

            assert reopened.faults.record_startup_fault(session, "after the kill")
            assert children.logged(reopened, after_seq=start + len(log)) == [
                (start + len(log) + 1, session, "after the kill")
            ]
        assert_sound(backend, migrated_url)
    print(f"commits cut off before their acknowledgement, per round: {unacknowledged_commits}")
