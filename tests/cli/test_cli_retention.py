"""The command line of retention: `events` with an expired cursor, `db prune`, `db stats` and
`db vacuum`, on both backends."""

from __future__ import annotations

import pytest

from session_journal import Store
from session_journal.cli import main
from tests.factories import SessionFactory


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def seed(url: str, count: int = 10) -> None:
    """`count` events of one session, recorded at 1, 2, ... ms apart from the first."""
    with Store.open(url) as store:
        store.sessions.save(SessionFactory(id="s1"))
        for _ in range(count):
            store.faults.record_startup_fault("s1", "m")


def test_events_with_an_expired_cursor_exit_1_with_one_line(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(migrated_url)
    with Store.open(migrated_url) as store:
        store.events.prune(through_seq=4)
    code, out, err = run(capsys, "--url", migrated_url, "events", "--after", "2")
    assert (code, out) == (1, "")
    assert err == (
        "session-journal: after_seq 2 is below the pruned floor 4: the events up to seq 4 were "
        "pruned, so this client missed events; resync it from a snapshot and follow from seq 4 "
        "(or from 0: the oldest retained event)\n"
    )
    code, out, _ = run(capsys, "--url", migrated_url, "events", "--after", "2", "--follow")
    assert code == 1 and out == ""
    code, out, _ = run(capsys, "--url", migrated_url, "events")  # from the oldest retained
    assert code == 0 and len(out.splitlines()) == 6
