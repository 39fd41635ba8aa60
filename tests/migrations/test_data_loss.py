"""Downgrades name what they would lose and refuse unless allowed (the API, and plain `alembic`
with a minimal ini); 0005's downgrade keeps the projection, so a re-delivered chain adds
nothing after upgrading again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from session_journal import (
    DatabaseNotFound,
    DataLossRefused,
    SessionJournalError,
    SessionState,
    Store,
    migrations,
)
from session_journal.journal.search import IndexRow
from tests.docs import page
from tests.factories import RelayChainFactory, SessionFactory, relay_turn
from tests.helpers import all_events, store_raw_body, table_counts

TABLES = ["sessions", "api_events", "checkpoint_operations", "project_events", "consumers"]
INTERRUPTED = json.dumps(
    {
        "type": "turn_ended",
        "data": {
            "turn": {
                "command_id": "prompt-9",
                "accepted_ordinal": 9,
                "outcome": {
                    "kind": "interrupted",
                    "stop_reason": None,
                    "reason": "runtime_stopped",
                    "message": "stopped",
                },
            }
        },
    }
)
ALLOW = (
    "nothing was changed. To downgrade anyway: session-journal db downgrade --allow-data-loss, "
    "migrations.downgrade(..., allow_data_loss=True) or alembic -x allow_data_loss=yes downgrade"
)
LOSSES_TO_0001 = (
    "0014_consumer_stuck_after: the stuck_after_s of 1 durable consumer(s) registered with "
    "another than 300 s",
    "0013_consumer_leases: 1 held lease(s) of durable consumers (a paused holder would ack "
    "unfenced)",
    "0012_consumers: 1 durable consumer(s) and their positions (the consumers table)",
    "0006_project_index: 1 row(s) of the project index (project_events)",
    "0004_outcome_bodies: 1 turn_ended body(ies) would lose outcome.reason or a kind that "
    "stop_reason does not imply",
    "0003_checkpoint_operations: 1 open checkpoint operation(s) and their owners",
    "0002_startup_cleanup: 1 session(s) in startup-cleanup would become error",
)


def hold_what_each_downgrade_loses(url: str) -> None:
    """A database at head holding, for each revision, something its downgrade loses (and a
    projection, which 0005's downgrade keeps)."""
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        store.sessions.save(SessionFactory(id="s2", state=SessionState.STARTUP_CLEANUP))
        store.projection.apply("s1", RelayChainFactory())  # turn_started, turn_ended
        store.checkpoints.begin(SessionFactory(id="s1", state=SessionState.CHECKPOINTING), "op-1")
        store_raw_body(store, "s1", INTERRUPTED)
        store.index.insert([IndexRow("s1", 1, "2026-11-29T12:00:00Z", "x", None, None, "hi", "{}")])
        store.consumers.register("projector", stuck_after_s=60)
        store.consumers.acquire("projector", "replica-1", ttl_s=60)


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        return migrations.status(engine).revision
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_downgrade_that_would_lose_data_names_it_and_changes_nothing(url: str) -> None:
    hold_what_each_downgrade_loses(url)
    counts = table_counts(url, TABLES)
    assert counts == {
        "sessions": 2,
        "api_events": 3,
        "checkpoint_operations": 1,
        "project_events": 1,
        "consumers": 1,
    }

    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0001_initial")
    assert isinstance(refused.value, SessionJournalError)
    assert (refused.value.current, refused.value.target) == (
        "0015_recorded_at_index",
        "0001_initial",
    )
    assert refused.value.losses == LOSSES_TO_0001
    assert str(refused.value) == (
        "downgrading from 0015_recorded_at_index to 0001_initial would lose data: "
        + "; ".join(LOSSES_TO_0001)
        + "; "
        + ALLOW
    )
    assert revision_of(url) == migrations.head()
    assert table_counts(url, TABLES) == counts

    # To base, 0001's downgrade loses everything too; a relative target is resolved the same.
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "base")
    assert refused.value.target == "base"
    assert refused.value.losses[-1] == (
        "0001_initial: every table: 2 session(s) with 3 event(s), their activity, checkpoints "
        "and projection state"
    )
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "-9")
    assert (refused.value.target, refused.value.losses) == (
        "0006_project_index",
        LOSSES_TO_0001[:3],
    )
    assert revision_of(url) == migrations.head()
    assert table_counts(url, TABLES) == counts


def test_allowed_the_downgrade_loses_what_it_named(url: str) -> None:
    hold_what_each_downgrade_loses(url)
    migrations.downgrade(url, "0001_initial", allow_data_loss=True)
    assert revision_of(url) == "0001_initial"
    assert table_counts(url, ["sessions", "api_events"]) == {"sessions": 2, "api_events": 3}
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        states = connection.execute(sa.text("SELECT state FROM sessions ORDER BY 1")).all()
    engine.dispose()
    assert states == [("checkpointing",), ("error",)]


def test_a_database_without_such_data_downgrades_without_being_told(url: str) -> None:
    # Sessions in ordinary states, their events and their projection: no revision above 0001
    # loses any of it (0005 keeps the projection), so nothing is refused down to 0001.
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        store.projection.apply("s1", RelayChainFactory())
    migrations.downgrade(url, "0001_initial")
    assert revision_of(url) == "0001_initial"
    migrations.upgrade(url)
    # An empty database goes all the way to base.
    with Store.open(url) as store:
        store.sessions.delete("s1")
    migrations.downgrade(url, "base")
    assert revision_of(url) is None
    assert tables(url) == {"session_journal_version"}


def test_a_missing_database_is_not_created_by_a_downgrade(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(DatabaseNotFound):
        migrations.downgrade(f"sqlite:///{path}", "base")
    assert not path.exists()


def test_a_chain_delivered_again_after_a_projection_downgrade_adds_nothing(url: str) -> None:
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        chain = RelayChainFactory()
        assert store.projection.apply("s1", chain) == 3
        before = [event.model_dump() for event in all_events(store)]
        assert [event["event"]["type"] for event in before] == ["turn_started", "turn_ended"]
        projected = store.projection.load("s1")

    migrations.downgrade(url, "0004_outcome_bodies")  # loses nothing: not refused
    assert {"retired_0005_materialized_sessions", "retired_0005_transcript_items"} <= tables(url)
    assert not {"materialized_sessions", "transcript_items"} & tables(url)
    migrations.upgrade(url)

    with Store.open(url) as store:
        assert store.projection.load("s1") == projected
        assert store.projection.apply("s1", chain) == 0  # the relay delivers it again
        assert [event.model_dump() for event in all_events(store)] == before
        # And the chain goes on from where it was.
        more = RelayChainFactory(
            ordinal=chain[-1].ordinal,
            digest=chain[-1].digest,
            observations=relay_turn("cancelled"),
        )
        assert store.projection.apply("s1", more) == 3
        assert len(all_events(store)) == 4
    assert not any(name.startswith("retired_") for name in tables(url))
    command.check(migrations.alembic_config(url))  # no drift after the round trip


def test_the_kept_projection_goes_with_its_session_and_with_0001(url: str) -> None:
    with Store.open(url, upgrade=True) as store:
        for session in ("s1", "s2"):
            store.sessions.save(SessionFactory(id=session))
            store.projection.apply(session, RelayChainFactory())
    migrations.downgrade(url, "0004_outcome_bodies")
    kept = ["retired_0005_materialized_sessions", "retired_0005_transcript_items"]
    assert table_counts(url, kept) == {kept[0]: 2, kept[1]: 2}
    # Their foreign keys still cascade: deleting a session below 0005 deletes its projection.
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            connection.execute(sa.text("PRAGMA foreign_keys=ON"))
        connection.execute(sa.text("DELETE FROM sessions WHERE session_id = 's2'"))
    engine.dispose()
    assert table_counts(url, kept) == {kept[0]: 1, kept[1]: 1}

    with pytest.raises(DataLossRefused, match="0001_initial: every table: 1 session"):
        migrations.downgrade(url, "base")
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "base")
    assert migrations.downgrade(url, "base", allow_data_loss=True) == refused.value.losses
    assert tables(url) == {"session_journal_version"}
    assert migrations.downgrade(url, "base", allow_data_loss=True) == ()  # nothing left to lose


def minimal_ini(directory: Path) -> Path:
    """An alembic.ini with only what Alembic needs: no logging sections."""
    path = directory / "alembic.ini"
    path.write_text(f"[alembic]\nscript_location = {migrations.script_location()}\n")
    return path


def alembic(ini: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ini), "-x", f"url={url}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plain_alembic_downgrade_refuses_the_same_way(url: str, tmp_path: Path) -> None:
    ini = minimal_ini(tmp_path)
    done = alembic(ini, url, "upgrade", "head")
    assert done.returncode == 0, done.stderr  # the minimal ini works
    hold_what_each_downgrade_loses(url)
    counts = table_counts(url, TABLES)

    done = alembic(ini, url, "downgrade", "0001_initial")
    message = (
        "downgrading from 0015_recorded_at_index to 0001_initial would lose data: "
        + "; ".join(LOSSES_TO_0001)
        + "; "
        + ALLOW
    )
    # Alembic prints a CommandError as one line on stdout and exits 255: no traceback.
    assert (done.returncode, done.stdout, done.stderr) == (255, f"FAILED: {message}\n", "")
    assert table_counts(url, TABLES) == counts

    done = alembic(ini, url, "-x", "allow_data_loss=maybe", "downgrade", "0001_initial")
    assert (done.returncode, done.stdout, done.stderr) == (
        255,
        "FAILED: -x allow_data_loss must be yes or no, got 'maybe'\n",
        "",
    )
    assert revision_of(url) == migrations.head()

    done = alembic(ini, url, "-x", "allow_data_loss=yes", "downgrade", "0001_initial")
    assert done.returncode == 0, done.stderr
    assert revision_of(url) == "0001_initial"


def test_an_ini_with_only_some_logging_sections_is_refused_by_name(
    url: str, tmp_path: Path
) -> None:
    ini = minimal_ini(tmp_path)
    ini.write_text(ini.read_text() + "\n[loggers]\nkeys = root\n")
    done = alembic(ini, url, "upgrade", "head")
    assert (done.returncode, done.stdout, done.stderr) == (
        255,
        f"FAILED: {ini} configures logging but lacks [handlers], [formatters]: give [loggers], "
        "[handlers] and [formatters], or none of them\n",
        "",
    )
    assert revision_of(url) is None


def test_every_revision_declares_its_loss_and_the_docs_show_it() -> None:
    shown = " ".join(page("operations/upgrading.md").split())
    for revision in migrations.revisions():
        assert revision.downgrade_loses, revision.revision
        assert f"| `{revision.revision}` | {revision.downgrade_loses} |" in shown, (
            f"the data-loss table of docs/operations/upgrading.md lacks {revision.revision}: "
            f"{revision.downgrade_loses}"
        )
    assert [r.revision for r in migrations.revisions() if not r.renders_offline] == [
        "0004_outcome_bodies"
    ]


def test_other_alembic_commands_run_their_step_once(migrated_url: str, tmp_path: Path) -> None:
    # env.py asks for the planned steps of upgrades and downgrades only: `current` prints from
    # its step function, which must not be called a second time.
    ini = minimal_ini(tmp_path)
    done = alembic(ini, migrated_url, "current")
    assert (done.returncode, done.stdout) == (0, f"{migrations.head()} (head)\n")
    done = alembic(ini, migrated_url, "check")
    assert (done.returncode, done.stdout) == (0, "No new upgrade operations detected.\n")
    done = alembic(ini, migrated_url, "stamp", "0002_startup_cleanup")
    assert done.returncode == 0, done.stderr
    assert revision_of(migrated_url) == "0002_startup_cleanup"
