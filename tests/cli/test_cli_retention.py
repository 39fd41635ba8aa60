"""The command line of retention: `events` with an expired cursor, `db prune`, `db stats` and
`db vacuum`, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import OutcomeReason, SessionFault, Store
from session_journal import _maintenance as maintenance
from session_journal.cli import main
from session_journal.services.events import EventService, PrunePlan
from tests.factories import SessionFactory

BODY = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="old").model_dump_json()


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


def many(url: str, count: int) -> None:
    """`count` events of one session with bodies of about 1 KiB, recorded at 1 ms."""
    body = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="x" * 1000)
    with Store.open(url) as store:
        store.sessions.save(SessionFactory(id="s1"))
        with store.unit_of_work() as uow:
            for _ in range(count):
                uow.events.append("s1", 1, body.model_dump_json())
            uow.commit()


def test_db_prune_dry_run_then_prune_then_stats(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(migrated_url)
    url = ("--url", migrated_url)
    change = (
        "minimum_compatible_level 2 -> 7: controllers older than level 7 will refuse this database"
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "4", "--dry-run") == (
        0,
        "would prune 4 event(s) through seq 4 (pruned_through 0, frontier 10); nothing was "
        f"deleted\nwould raise {change}\n",
        "",
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "4") == (
        1,
        "",
        f"session-journal: db prune would raise {change}; give --allow-level-change to prune "
        "anyway (--dry-run shows what would go); nothing was deleted\n",
    )
    assert run(capsys, *url, "db", "check")[1].splitlines()[3] == "minimum_compatible_level: 2"
    assert run(capsys, *url, "db", "prune", "--through-seq", "4", "--allow-level-change") == (
        0,
        f"pruned 4 event(s); pruned_through 4, frontier 10\nraised {change}\n",
        "",
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "5")[1] == (  # raised already
        "pruned 1 event(s); pruned_through 5, frontier 10\n"
    )
    # Every event is older than a millisecond ago: the whole log, the frontier stays.
    assert run(capsys, *url, "db", "prune", "--older-than", "1ms", "--dry-run")[1] == (
        "would prune 5 event(s) through seq 10 (pruned_through 5, frontier 10); nothing was "
        "deleted\nwould delete every retained event (5): the log would be empty\n"
    )
    assert run(capsys, *url, "db", "prune", "--older-than", "1ms") == (
        1,
        "",
        "session-journal: db prune would delete every retained event (5), leaving the log "
        "empty; give --allow-empty-log to prune anyway; nothing was deleted\n",
    )
    assert run(capsys, *url, "db", "prune", "--older-than", "1ms", "--allow-empty-log") == (
        0,
        "pruned 5 event(s); pruned_through 10, frontier 10\n",
        "",
    )
    assert run(capsys, *url, "db", "prune", "--older-than", "1ms")[0] == 0  # nothing left
    code, out, err = run(capsys, *url, "db", "stats")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:4] == ["sessions: 1", "events: 0", "pruned_through: 10", "frontier: 10"]
    assert lines[4].startswith("size_on_disk: ") and lines[4].endswith(" bytes")
    assert int(lines[4].split()[1]) > 0


def test_db_prune_prunes_what_it_judged_not_what_qualifies_later(
    migrated_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between the plan (the level and empty-log checks) and the prune, another process appends
    # an event with an old time: it would qualify for `--older-than` now, but the checks did
    # not see it, so this prune leaves it for the next one.
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s1"))
        with store.unit_of_work() as uow:
            for _ in range(5):
                uow.events.append("s1", 1, BODY)
            uow.commit()
    planned = EventService.plan_prune

    def plan_then_append(self: EventService, **target: int) -> PrunePlan:
        plan = planned(self, **target)
        if target.get("older_than_ms") is not None:
            with Store.open(migrated_url) as other, other.unit_of_work() as uow:
                uow.events.append("s1", 1, BODY)
                uow.commit()
        return plan

    monkeypatch.setattr(EventService, "plan_prune", plan_then_append)
    url = ("--url", migrated_url)
    allow = ("--allow-level-change", "--allow-empty-log")  # as planned: every event goes
    code, out, err = run(capsys, *url, "db", "prune", "--older-than", "1h", *allow)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "pruned 5 event(s); pruned_through 5, frontier 6"
    with Store.open(migrated_url) as store:
        assert [event.seq for event in store.events.load(after_seq=0).events] == [6]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "one of the arguments --through-seq --older-than is required"),
        (["--through-seq", "3", "--older-than", "1d"], "not allowed with argument"),
        (["--through-seq", "-1"], "must be an integer from 0 to"),
        (["--older-than", "5y"], "duration must be a whole number with a unit"),
        (["--older-than", "1.5d"], "duration must be a whole number with a unit"),
    ],
)
def test_db_prune_usage_errors_exit_2(
    migrated_url: str, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--url", migrated_url, "db", "prune", *arguments])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_db_prune_above_the_frontier_exits_1_and_prunes_nothing(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(migrated_url)
    assert run(capsys, "--url", migrated_url, "db", "prune", "--through-seq", "11") == (
        1,
        "",
        "session-journal: through_seq 11 is above the frontier 10: there is nothing to prune "
        "there (a floor above the frontier would hide events not appended yet); nothing was "
        "pruned\n",
    )
    with Store.open(migrated_url) as store:
        assert store.events.pruned_through() == 0
        assert len(store.events.load(after_seq=0).events) == 10


def test_db_vacuum_gives_back_the_space_of_pruned_events(
    migrated_url: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    many(migrated_url, 3000)
    with Store.open(migrated_url) as store:
        assert store.events.prune(through_seq=3000) == 3000
    before = maintenance.stats(migrated_url)
    code, out, err = run(capsys, "--url", migrated_url, "db", "vacuum")
    assert (code, err) == (0, "")
    found = re.fullmatch(r"vacuumed \S+: (\d+) bytes before, (\d+) after, (.*)\n", out)
    assert found is not None, out
    was, now = int(found[1]), int(found[2])
    change = f"{now - was} bytes more" if now > was else f"{was - now} freed"  # what was measured
    if backend == "sqlite":
        assert found[3] == change
    else:  # the files keep (or grow) their size: what it made reusable is not measured
        assert found[3] == (
            f"{change}; PostgreSQL's VACUUM makes the space of deleted rows reusable without "
            "giving it back, so how much it freed cannot be told (VACUUM FULL shrinks the files)"
        )
    freed = max(0, was - now)
    after = maintenance.stats(migrated_url)
    if backend == "sqlite":  # VACUUM rewrites the file without the free pages
        assert before.free_bytes is not None and before.free_bytes > 3_000_000
        assert was == before.size_bytes and now == after.size_bytes
        assert freed >= before.free_bytes - 100_000
        assert after.free_bytes == 0
    else:  # VACUUM makes the space reusable; the files keep their size
        assert after.free_bytes is None and now > 0
    assert (after.events, after.pruned_through, after.latest_seq) == (0, 3000, 3000)


def test_db_stats_and_vacuum_refuse_a_missing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    for command in ("stats", "vacuum"):
        code, out, err = run(capsys, "--url", url, "db", command)
        assert (code, out) == (1, "")
        assert err.startswith("session-journal: ") and len(err.splitlines()) == 1
    assert not (tmp_path / "typo.db").exists()


def test_db_prune_dry_run_counts_what_an_interrupted_prune_left_below_its_floor(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # An interrupted prune: the floor 4 recorded, nothing deleted yet. A dry run of a lower
    # target says what the real prune then deletes: everything left below the floor.
    seed(migrated_url)
    engine = sa.create_engine(migrated_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE event_sequences SET pruned_through = 4 WHERE name = 'api_events'")
            )
    finally:
        engine.dispose()
    url = ("--url", migrated_url)
    assert run(capsys, *url, "db", "prune", "--through-seq", "1", "--dry-run")[1] == (
        "would prune 4 event(s) through seq 4 (pruned_through 4, frontier 10); nothing was "
        "deleted\n"
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "1")[1] == (
        "pruned 4 event(s); pruned_through 4, frontier 10\n"
    )


def test_db_prune_stops_at_a_consumer_unless_allowed_behind(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(migrated_url)
    with Store.open(migrated_url) as store:
        store.consumers.register("billing", start=3)
    url = ("--url", migrated_url)
    held = (
        "consumer 'billing' has not read past it (--allow-consumers-behind prunes past "
        "consumers; they must then be reset)\n"
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "6", "--dry-run") == (
        0,
        "would prune 3 event(s) through seq 3 (pruned_through 0, frontier 10); nothing was "
        f"deleted\nwould stop at seq 3: {held}",
        "",
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "6") == (
        0,
        f"pruned 3 event(s); pruned_through 3, frontier 10\nstopped at seq 3: {held}",
        "",
    )
    passed = "consumer(s) 'billing': their next read raises CursorExpired; reset them\n"
    assert run(
        capsys, *url, "db", "prune", "--through-seq", "6", "--allow-consumers-behind", "--dry-run"
    ) == (
        0,
        "would prune 3 event(s) through seq 6 (pruned_through 3, frontier 10); nothing was "
        f"deleted\nwould pass {passed}",
        "",
    )
    assert run(capsys, *url, "db", "prune", "--through-seq", "6", "--allow-consumers-behind") == (
        0,
        f"pruned 3 event(s); pruned_through 6, frontier 10\npassed {passed}",
        "",
    )
