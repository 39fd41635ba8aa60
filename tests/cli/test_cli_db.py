"""`session-journal db downgrade`, `db history` and `db upgrade --sql`: what an operator with only
the wheel sees, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import SessionState, Store, migrations
from session_journal.cli import main, shown_url
from tests.backends import postgres_problem, postgres_required, postgres_schema
from tests.factories import SessionFactory
from tests.helpers import table_counts

HISTORY = [
    "0001_initial: The legacy-era schema: sessions, contexts, checkpoints, the event log, "
    "activity.",
    "0002_startup_cleanup: Allow the `startup-cleanup` session state.",
    "0003_checkpoint_operations: Checkpoint operations: at most one checkpoint in flight per "
    "session, with its owner.",
    "0004_outcome_bodies: Rewrite legacy event bodies in place: `error` -> `legacy_notice`, "
    "legacy `turn_ended` -> the `outcome` shape.",
    "0005_relay_projection: Relay projection: each session's relay frontier with its "
    "projection state, and its transcript.",
    "0006_project_index: The project index: `project_events` with full-text search over "
    "`text_content`.",
    "0007_pruned_through: Retention: `event_sequences.pruned_through`, the highest seq pruned "
    "from the log.",
    "0008_deletion_counter: Deletions of events are counted and (PostgreSQL) notified, by the "
    "database itself.",
    "0009_canonical_bodies: Mark the event bodies stored in their canonical form, so that JSON "
    "pages splice them.",
    "0010_event_types: Index the stored `type` tag of event bodies, for the type filter "
    "(`ApiEventFilter.types`).",
    "0011_lone_append: PostgreSQL: a function that appends one event in one statement, for the "
    "write path's lone appends (one round trip instead of four).",
    "0012_consumers: Durable consumers: `consumers`, one row per named reader of the log whose "
    "position the store keeps (`store.consumers`).",
    "0013_consumer_leases: Leases of durable consumers: one holder at a time, and acks of older "
    "holders refused (`store.consumers.acquire`).",
    "0014_consumer_stuck_after: When a durable consumer is stuck: `consumers.stuck_after_ms`, how "
    "long it may go without acking while events wait for it "
    "(`store.consumers.register(stuck_after_s=)`, 300 s by default).",
    "0015_recorded_at_index: The event rate on an index: `ix_api_events_recorded_at_ms` on "
    "`api_events.recorded_at_ms`, so that `store.events.rate()` (`GET /api/events/rate`) counts "
    "the events recorded in its window by one range of the index, whatever order they were "
    "stored in, and whatever the log's length.",
]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        return migrations.status(engine).revision
    finally:
        engine.dispose()


def test_db_downgrade_refuses_to_lose_data_unless_allowed(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s1", state=SessionState.STARTUP_CLEANUP))

    assert run(capsys, "--url", migrated_url, "db", "downgrade", "0001_initial") == (
        1,
        "",
        "session-journal: downgrading from 0015_recorded_at_index to 0001_initial would lose "
        "data: "
        "0002_startup_cleanup: 1 session(s) in startup-cleanup would become error; nothing was "
        "changed. To downgrade anyway: session-journal db downgrade --allow-data-loss, "
        "migrations.downgrade(..., allow_data_loss=True) or alembic -x allow_data_loss=yes "
        "downgrade\n",
    )
    assert revision_of(migrated_url) == migrations.head()

    assert run(
        capsys, "--url", migrated_url, "db", "downgrade", "0001_initial", "--allow-data-loss"
    ) == (
        0,
        "lost 0002_startup_cleanup: 1 session(s) in startup-cleanup would become error\n"
        f"database {shown_url(migrated_url)} at 0001_initial\n",
        "",
    )
    assert revision_of(migrated_url) == "0001_initial"


def test_db_downgrade_of_a_database_without_such_data(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = shown_url(migrated_url)
    assert run(capsys, "--url", migrated_url, "db", "downgrade", "0003") == (
        0,
        f"database {shown} at 0003_checkpoint_operations\n",
        "",
    )
    assert run(capsys, "--url", migrated_url, "db", "downgrade", "base") == (
        0,
        f"database {shown} at base (no schema)\n",
        "",
    )
    code, out, err = run(capsys, "--url", migrated_url, "db", "downgrade", "nope")
    assert (code, out) == (1, "")
    assert err == (
        "session-journal: cannot migrate to 'nope': Can't locate revision identified by 'nope'; "
        "nothing was changed (the database has no revision)\n"
    )


def test_db_downgrade_of_a_missing_database_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    code, out, err = run(capsys, "--url", f"sqlite:///{missing}", "db", "downgrade", "base")
    assert (code, out) == (1, "")
    assert err.startswith(f"session-journal: no SQLite database at {missing}")
    assert not missing.exists()


@pytest.mark.postgresql
def test_db_upgrade_and_downgrade_name_the_database_with_its_password_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    problem = postgres_problem()
    if problem is not None:
        if postgres_required():
            pytest.fail(f"PostgreSQL is required here: {problem}")
        pytest.skip(problem)
    with postgres_schema() as url:
        # The test server trusts its clients: the password is sent and ignored.
        secret = sa.make_url(url).set(password="s3cret").render_as_string(hide_password=False)
        masked = sa.make_url(url).set(password="s3cret").render_as_string(hide_password=True)
        assert "root:***@" in masked
        expected = {"0003": "0003_checkpoint_operations", "0001_initial": "0001_initial"}
        for command, revision in [("upgrade", "0003"), ("downgrade", "0001_initial")]:
            code, out, err = run(capsys, "--url", secret, "db", command, revision)
            assert (code, err) == (0, "")
            assert out == f"database {masked} at {expected[revision]}\n"
            assert "s3cret" not in out


def test_db_history_marks_the_current_revision(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--url", url, "db", "history") == (
        0,
        "".join(f"  {line}\n" for line in HISTORY)
        + "  (the database has no revision: no schema)\n",
        "",
    )
    migrations.upgrade(url, "0003_checkpoint_operations")
    code, out, _ = run(capsys, "--url", url, "db", "history")
    assert code == 0
    assert out.splitlines() == [
        f"  {HISTORY[0]}",
        f"  {HISTORY[1]}",
        f"* {HISTORY[2].replace(':', ' (current):', 1)}",
        *[f"  {line}" for line in HISTORY[3:]],
    ]


def test_db_upgrade_sql_prints_the_sql_from_the_database_revision_and_changes_nothing(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(url, "0004_outcome_bodies")
    code, out, err = run(capsys, "--url", url, "db", "upgrade", "--sql")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"-- session-journal db upgrade --sql for {shown_url(url)}"
    ran = [line for line in lines if line.startswith("-- Running upgrade")]
    assert ran == [
        "-- Running upgrade 0004_outcome_bodies -> 0005_relay_projection",
        "-- Running upgrade 0005_relay_projection -> 0006_project_index",
        "-- Running upgrade 0006_project_index -> 0007_pruned_through",
        "-- Running upgrade 0007_pruned_through -> 0008_deletion_counter",
        "-- Running upgrade 0008_deletion_counter -> 0009_canonical_bodies",
        "-- Running upgrade 0009_canonical_bodies -> 0010_event_types",
        "-- Running upgrade 0010_event_types -> 0011_lone_append",
        "-- Running upgrade 0011_lone_append -> 0012_consumers",
        "-- Running upgrade 0012_consumers -> 0013_consumer_leases",
        "-- Running upgrade 0013_consumer_leases -> 0014_consumer_stuck_after",
        "-- Running upgrade 0014_consumer_stuck_after -> 0015_recorded_at_index",
    ]
    assert revision_of(url) == "0004_outcome_bodies"
    assert table_counts(url, ["session_journal_version"]) == {"session_journal_version": 1}

    # FROM:TO renders without reading the database's revision.
    code, out, _ = run(capsys, "--url", url, "db", "upgrade", "--sql", "base:0001_initial")
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("-- Running upgrade")] == [
        "-- Running upgrade  -> 0001_initial"
    ]


def test_db_upgrade_sql_refuses_a_range_it_cannot_render_in_one_line(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.upgrade(url, "0003_checkpoint_operations")
    assert run(capsys, "--url", url, "db", "upgrade", "--sql") == (
        1,
        "",
        "session-journal: cannot render 0003_checkpoint_operations:0015_recorded_at_index as "
        "SQL: "
        "0004_outcome_bodies reads and rewrites rows and runs online only; render up to "
        "0003_checkpoint_operations, run 0004_outcome_bodies online (session-journal db "
        "upgrade 0004_outcome_bodies), then render from 0004_outcome_bodies; nothing was "
        "printed\n",
    )
    assert revision_of(url) == "0003_checkpoint_operations"
