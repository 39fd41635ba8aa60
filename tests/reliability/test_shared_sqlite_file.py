"""Scenario: a writer keeps its store open and appends while other processes open the same
database, with and without `upgrade=True`, read it and exit, and a third process appends.

Defect 1 of issue 9. SQLite's locks are POSIX locks, which belong to the process: closing *any*
descriptor of the database file drops every lock the process holds on it. The migration lock was
a `flock` on the database file itself, taken with `open()` and released by `close()`, so every
`Store.open(url, upgrade=True)` silently dropped the locks of its own connections. The next
process to close its last connection then found the file unlocked, concluded it was the last
user, checkpointed and deleted the `-wal` and `-shm` files under the writer: the writer's later
commits went to an unlinked file and were lost although acknowledged.

Process A opens with `upgrade=True` (creating the schema), saves its session and C's, appends
and keeps its store open for the whole test. Each round: A appends; B opens with
`upgrade=True`, reads, reopens plainly, reads and exits; A appends again; C starts, appends and
exits; A appends once more. A and C acknowledge every event with its seq. Then A exits.

This proves, on SQLite (where the defect was) and PostgreSQL (the same invariant): what B reads
holds every event acknowledged before it started; at the end every acknowledged event of A and C
is in the log exactly once with its acknowledged seq, nothing else is; on SQLite the file passes
`integrity_check`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from session_journal import Store
from tests.factories import SessionFactory
from tests.reliability import children
from tests.reliability.harness import Workers, assert_sound, read_acks, rounds

pytestmark = pytest.mark.reliability

STEP = 4  # commits per burst: 6 events


def test_processes_opening_and_closing_the_database_lose_no_acknowledged_event(
    backend: str, url: str, workers: Workers, tmp_path: Path
) -> None:
    acks = {"A": tmp_path / "A.acks", "C": tmp_path / "C.acks"}
    next_commit = {"A": 0, "C": 0}

    def commits(session: str) -> range:
        first = next_commit[session]
        next_commit[session] = first + STEP
        return range(first, first + STEP)

    a = workers.start("A", url)
    assert a.call(children.open_store, True) == 0  # creates the schema
    a.call(children.save_sessions, [SessionFactory(id="A"), SessionFactory(id="C")])

    for round_ in range(rounds(2)):
        a.call(children.append_commits, "A", commits("A"), str(acks["A"]))

        b = workers.start(f"B-{round_}", url)
        acknowledged = sorted(read_acks(acks["A"]) + read_acks(acks["C"]))
        for upgrade in [True, False]:
            frontier = b.call(children.open_store, upgrade)
            read = [(seq, message) for seq, _, message in b.call(children.read_log)]
            assert (frontier, read) == (acknowledged[-1][0], acknowledged), (
                f"round {round_}: B (upgrade={upgrade}) does not see what A and C acknowledged"
            )
        b.stop()

        a.call(children.append_commits, "A", commits("A"), str(acks["A"]))
        c = workers.start(f"C-{round_}", url)
        c.call(children.append_commits, "C", commits("C"), str(acks["C"]))
        c.stop()
        a.call(children.append_commits, "A", commits("A"), str(acks["A"]))
    a.stop()

    with Store.open(url) as store:
        log = children.logged(store)
    for session, path in acks.items():
        acknowledged = read_acks(path)
        assert [message for _, message in acknowledged] == children.planned(
            session, range(next_commit[session])
        )
        assert [(seq, message) for seq, owner, message in log if owner == session] == acknowledged
    assert len(log) == len(read_acks(acks["A"])) + len(read_acks(acks["C"]))
    assert_sound(backend, url)
