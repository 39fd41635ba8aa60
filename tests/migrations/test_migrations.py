"""Alembic revisions: one head, no row or frontier lost, every revision downgrades, no drift."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.operations import Operations
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from session_journal import (
    DataLossRefused,
    InvalidRecord,
    MigrationFailed,
    SchemaOutOfDate,
    SessionState,
    Store,
    migrations,
)
from tests.factories import ActivityFactory, RelayChainFactory, SessionFactory
from tests.helpers import table_counts

TABLES = [
    "sessions",
    "session_contexts",
    "session_checkpoints",
    "api_events",
    "event_sequences",
    "api_session_activity",
    "schema_compatibility",
]
FAULT = json.dumps(
    {
        "type": "session_fault",
        "data": {"reason": "startup_failed", "message": "nul \u0000 kept", "command_id": None},
    }
)
ACTIVITY = json.dumps(
    {
        "state": "running",
        "details": None,
        "is_idle": True,
        "waiting_for_input": False,
        "capacity_retry": False,
    }
)


def seed_legacy_rows(url: str) -> None:
    """Rows as the legacy-era code wrote them, through raw SQL."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        run = connection.execute
        for session, workspace in [("s1", "w1"), ("s2", "w2")]:
            run(
                sa.text(
                    "INSERT INTO sessions (session_id, project_id, state) "
                    "VALUES (:s, 'p', 'running')"
                ),
                {"s": session},
            )
            run(
                sa.text("INSERT INTO session_contexts (session_id, workspace_id) VALUES (:s, :w)"),
                {"s": session, "w": workspace},
            )
        run(
            sa.text(
                "INSERT INTO session_checkpoints (session_id, archive_path, sha256, "
                "created_at, event_frontier) VALUES ('s1', '/a', :sha, "
                "'2026-11-29T10:00:00Z', 2)"
            ),
            {"sha": "0" * 64},
        )
        for seq, session in [(1, "s1"), (2, "s2"), (8, "s1")]:
            run(
                sa.text(
                    "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                    "VALUES (:seq, :s, 100, :body)"
                ),
                {"seq": seq, "s": session, "body": FAULT},
            )
        run(sa.text("UPDATE event_sequences SET last_seq = 10 WHERE name = 'api_events'"))
        run(
            sa.text("INSERT INTO api_session_activity (session_id, body) VALUES ('s1', :b)"),
            {"b": ACTIVITY},
        )
    engine.dispose()


def snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = {
            "sessions": connection.execute(
                sa.text("SELECT session_id, project_id, state FROM sessions ORDER BY 1")
            ).all(),
            "api_events": connection.execute(
                sa.text(
                    "SELECT seq, session_id, recorded_at_ms, CAST(body AS TEXT) FROM api_events "
                    "ORDER BY seq"
                )
            ).all(),
            "event_sequences": connection.execute(
                sa.text("SELECT name, last_seq FROM event_sequences ORDER BY name")
            ).all(),
        }
    engine.dispose()
    return rows


def test_there_is_one_head() -> None:
    scripts = ScriptDirectory.from_config(migrations.alembic_config("sqlite://"))
    assert scripts.get_heads() == [migrations.head()]
    revisions = [script.revision for script in scripts.walk_revisions()]
    assert revisions[-2:] == ["0002_startup_cleanup", "0001_initial"]


COUNTER_ROW = ("api_events_deleted", 0)
"""The row 0008 adds to `event_sequences`: its counter of deleted events, from 0."""


def at_head(before: dict[str, Any]) -> dict[str, Any]:
    """A `snapshot` of a legacy database as upgrading it to head must leave it: every row
    kept, and 0008's counter row added."""
    return before | {"event_sequences": sorted([*before["event_sequences"], COUNTER_ROW])}


def counts_at_head(before: dict[str, int]) -> dict[str, int]:
    """`table_counts` of a database below 0008 as upgrading it to head must leave them."""
    return before | {"event_sequences": before["event_sequences"] + 1}


def test_upgrading_a_populated_legacy_database_loses_no_row_and_keeps_the_frontier(
    url: str,
) -> None:
    migrations.upgrade(url, "0001_initial")
    seed_legacy_rows(url)
    before_counts, before = table_counts(url, TABLES), snapshot(url)

    migrations.upgrade(url)  # on SQLite: a batch rebuild of `sessions`, the cascade trap

    assert table_counts(url, TABLES) == counts_at_head(before_counts)
    assert snapshot(url) == at_head(before)
    with Store.open(url) as store:
        assert store.events.latest_seq() == 10
        page = store.events.load(after_seq=0)
        assert [event.seq for event in page.events] == [1, 2, 8]
        assert page.events[0].event.model_dump(mode="json") == json.loads(FAULT)
        assert store.activity.get("s1") is not None
        s1 = store.sessions.get("s1")
        assert s1 is not None and s1.workspace_id == "w1" and s1.checkpoint is not None
        store.sessions.save(
            SessionFactory(id="s2", workspace_id="w2", state=SessionState.STARTUP_CLEANUP)
        )


def test_downgrade_and_upgrade_round_trip_with_data(url: str) -> None:
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        store.sessions.save(SessionFactory(id="s2", state=SessionState.STARTUP_CLEANUP))
        store.faults.record_startup_fault("s1", "kept")
        store.faults.record_startup_fault("s2", "kept too")
    counts = table_counts(url, TABLES)

    # 0002's downgrade turns the startup-cleanup session into error: refused unless allowed.
    with pytest.raises(DataLossRefused, match="1 session"):
        migrations.downgrade(url, "0001_initial")
    assert snapshot(url)["sessions"][1] == ("s2", "project-1", "startup-cleanup")
    migrations.downgrade(url, "0001_initial", allow_data_loss=True)
    assert counts_at_head(table_counts(url, TABLES)) == counts
    assert snapshot(url)["sessions"] == [
        ("s1", "project-1", "running"),
        ("s2", "project-1", "error"),
    ]
    migrations.upgrade(url)
    assert table_counts(url, TABLES) == counts
    with Store.open(url) as store:
        assert [event.seq for event in store.events.load(after_seq=0).events] == [1, 2]
        assert store.events.latest_seq() == 2


def populate_every_table(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s1", state=SessionState.RUNNING))
    store.sessions.save(SessionFactory(id="s2", state=SessionState.STARTUP_CLEANUP))
    store.activity.record([("s1", ActivityFactory())], 1)
    store.faults.record_startup_fault("s2", "boom")
    store.checkpoints.begin(SessionFactory(id="s1", state=SessionState.CHECKPOINTING), "op-1")
    store.projection.apply("s1", RelayChainFactory(recorded_at_ms=1))


def test_base_head_base_head_with_data_in_every_table(url: str) -> None:
    with Store.open(url, upgrade=True) as store:
        populate_every_table(store)
    scripts = ScriptDirectory.from_config(migrations.alembic_config(url))
    # Down one revision at a time, each with rows in its tables, then all the way back up.
    for script in scripts.walk_revisions():
        migrations.downgrade(
            url,
            script.down_revision or "base",  # type: ignore[arg-type]
            allow_data_loss=True,
        )
        assert migrations.status_at(url).revision == script.down_revision
    assert table_counts(url, ["session_journal_version"]) == {"session_journal_version": 0}
    migrations.upgrade(url)
    with Store.open(url) as store:
        assert store.schema.revision == migrations.head()
        populate_every_table(store)
        assert store.events.latest_seq() == 4


def test_alembic_check_finds_no_drift(url: str) -> None:
    migrations.upgrade(url)
    command.check(migrations.alembic_config(url))


def test_alembic_check_would_notice_drift(url: str) -> None:
    migrations.upgrade(url)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("DROP INDEX ix_api_events_session_id_seq"))
    engine.dispose()
    with pytest.raises(CommandError, match="New upgrade operations detected"):
        command.check(migrations.alembic_config(url))


@pytest.mark.parametrize("dialect_url", ["sqlite:///offline.db", "postgresql+psycopg://offline/db"])
def test_offline_sql_mode_renders_the_schema_revisions(
    dialect_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = migrations.alembic_config(dialect_url)
    command.upgrade(config, "0003_checkpoint_operations", sql=True)
    sql = capsys.readouterr().out
    assert "CREATE TABLE api_events" in sql
    assert "startup-cleanup" in sql
    assert "CREATE TABLE checkpoint_operations" in sql
    # The body rewrite reads rows, so a range holding it is refused before anything is printed.
    with pytest.raises(InvalidRecord, match="0004_outcome_bodies reads and rewrites rows"):
        command.upgrade(config, "0003_checkpoint_operations:head", sql=True)
    assert capsys.readouterr().out == ""


def test_a_revision_that_fails_midway_leaves_the_previous_revision(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrations.upgrade(url, "0001_initial")
    seed_legacy_rows(url)
    before = snapshot(url)

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError("injected failure after the sessions rebuild")

    # 0002 rebuilds `sessions`, then sets the levels with op.execute: fail there.
    monkeypatch.setattr(Operations, "execute", fail)
    with pytest.raises(MigrationFailed) as failed:
        migrations.upgrade(url)
    assert str(failed.value) == (
        "migration to head failed and its revision was rolled back: injected failure after the "
        "sessions rebuild "
        "(the database is at 0001_initial)"
    )
    monkeypatch.undo()

    assert snapshot(url) == before
    with pytest.raises(SchemaOutOfDate, match="0001_initial is older"):
        Store.open(url)
    migrations.upgrade(url)  # simply re-run
    assert snapshot(url) == at_head(before)


def test_a_revision_that_breaks_a_foreign_key_is_rolled_back_on_sqlite(tmp_path: Path) -> None:
    # SQLite only: migrations run with its foreign keys off (PostgreSQL checks every statement).
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    migrations.upgrade(url, "0001_initial")
    engine = sa.create_engine(url)  # pysqlite: foreign keys off, so an orphan can be written
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                "VALUES (1, 'ghost', 1, '{}')"
            )
        )
    engine.dispose()
    with pytest.raises(MigrationFailed, match="broke foreign keys"):
        migrations.upgrade(url)
    assert snapshot(url)["api_events"] == [(1, "ghost", 1, "{}")]
    assert migrations.status_at(url).revision == "0001_initial"


@pytest.mark.slow
def test_concurrent_upgrades_serialise(url: str) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        pool.map(migrations.upgrade, [url] * 3)
    counts = table_counts(
        url, ["session_journal_version", "event_sequences", "schema_compatibility"]
    )
    assert counts == {
        "session_journal_version": 1,
        "event_sequences": 2,  # the frontier and 0008's counter of deletions
        "schema_compatibility": 1,
    }
    with Store.open(url) as store:
        assert store.schema.revision == migrations.head()


def test_an_unknown_revision_is_refused_before_anything_runs(url: str) -> None:
    migrations.upgrade(url, "0002_startup_cleanup")
    with pytest.raises(InvalidRecord) as refused:
        migrations.upgrade(url, "nope")
    assert str(refused.value) == (
        "unknown revision 'nope': expected head or a revision of this code "
        "(head 0015_recorded_at_index); nothing was migrated"
    )
    with pytest.raises(InvalidRecord) as refused:
        migrations.downgrade(url, "nope")
    assert str(refused.value) == (
        "cannot migrate to 'nope': Can't locate revision identified by 'nope'; "
        "nothing was changed (the database is at 0002_startup_cleanup)"
    )
    assert migrations.status_at(url).revision == "0002_startup_cleanup"
