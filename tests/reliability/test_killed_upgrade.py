"""Scenario: `migrations.upgrade(url, "head")` of a populated legacy database is killed with
SIGKILL at a random moment, round after round, each on a new database.

Each round seeds a database at `0001_initial` the way legacy code wrote it (sessions with
workspaces, checkpoints and activity, and EVENTS events whose bodies are legacy `turn_ended` and
`error` bodies that `0004_outcome_bodies` rewrites, and current ones it leaves alone, with the
frontier above the last seq). A child process starts the upgrade to head; the parent picks a
revision at random, waits until the database reaches it, waits a random moment more and kills
the child: in the next revision, between two, or after the end.

A reference database seeded the same way and upgraded one revision at a time gives, for every
revision, what the database must hold there: its tables, columns, indexes and constraints, and
every row (legacy bodies before `0004_outcome_bodies`, rewritten ones after).

This proves, on SQLite and PostgreSQL, after every kill:
- the database is at a revision of the chain and equals the reference at that revision, schema
  and rows (each revision is its own transaction: nothing of the killed one remains, no event is
  lost, no body half rewritten, the frontier unchanged); on SQLite `integrity_check` and
  `foreign_key_check` pass;
- upgrading again reaches head and equals the reference at head; the store opens, reads every
  event and appends the next seq.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from session_journal import Store, migrations
from session_journal.storage.backfill import TO_MARK
from tests.helpers import all_events
from tests.reliability import children
from tests.reliability.harness import (
    CALL_TIMEOUT_S,
    Workers,
    assert_sound,
    fresh_database,
    named_url,
    rounds,
    wait_disconnected,
)

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

OLD = "0001_initial"
SESSIONS = 40
EVENTS = 4000
FRONTIER = EVENTS + 7
# How long after the chosen revision the kill may come.
LONGEST_DELAY_S = 0.05


def revisions() -> list[str]:
    """The chain from OLD to head, in order."""
    scripts = ScriptDirectory.from_config(migrations.alembic_config("sqlite://"))
    chain = [script.revision for script in scripts.walk_revisions()][::-1]
    return chain[chain.index(OLD) :]


def legacy_body(seq: int) -> dict[str, Any]:
    """Bodies as legacy code wrote them: two shapes 0004 rewrites, one it keeps."""
    if seq % 3 == 0:
        turn = {"command_id": f"prompt-{seq}", "accepted_ordinal": seq, "stop_reason": "end_turn"}
        return {"type": "turn_ended", "data": {"turn": turn}}
    if seq % 3 == 1:
        return {"type": "error", "data": {"command_id": f"c-{seq}", "message": f"old {seq}"}}
    message = f"kept \u0000 {seq}"
    return {
        "type": "session_fault",
        "data": {"reason": "startup_failed", "message": message, "command_id": None},
    }


def seed(url: str) -> None:
    """A database at OLD holding rows as legacy code wrote them, through plain SQL."""
    migrations.upgrade(url, OLD)
    sessions = [f"s{n}" for n in range(SESSIONS)]
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "INSERT INTO sessions (session_id, project_id, state, created_at, updated_at)"
                    " VALUES (:s, 'p', 'running', :t, :t)"
                ),
                [{"s": session, "t": "2026-01-01 00:00:00"} for session in sessions],
            )
            connection.execute(
                sa.text("INSERT INTO session_contexts (session_id, workspace_id) VALUES (:s, :w)"),
                [{"s": session, "w": f"w{n % 3}"} for n, session in enumerate(sessions)],
            )
            connection.execute(
                sa.text(
                    "INSERT INTO session_checkpoints (session_id, archive_path, sha256, "
                    "created_at, event_frontier) VALUES (:s, :a, :sha, '2026-01-01T00:00:00Z', 5)"
                ),
                [{"s": s, "a": f"/a/{s}.tar", "sha": "0" * 64} for s in sessions[::4]],
            )
            activity = {
                "state": "running",
                "details": None,
                "is_idle": True,
                "waiting_for_input": False,
                "capacity_retry": False,
            }
            connection.execute(
                sa.text("INSERT INTO api_session_activity (session_id, body) VALUES (:s, :b)"),
                [{"s": s, "b": json.dumps(activity)} for s in sessions[::2]],
            )
            connection.execute(
                sa.text(
                    "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                    "VALUES (:seq, :s, :at, :body)"
                ),
                [
                    {
                        "seq": seq,
                        "s": sessions[seq % SESSIONS],
                        "at": 1000 + seq,
                        "body": json.dumps(legacy_body(seq)),
                    }
                    for seq in range(1, EVENTS + 1)
                ],
            )
            connection.execute(
                sa.text("UPDATE event_sequences SET last_seq = :f WHERE name = 'api_events'"),
                {"f": FRONTIER},
            )
    finally:
        engine.dispose()


def snapshot(url: str) -> dict[str, Any]:
    """The revision, every table's columns, keys, indexes and constraints, and every row (as
    text, in primary-key order). The full-text tables' rows are left out: they are empty here
    and SQLite's shadow tables hold binary pages."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            inspector = sa.inspect(connection)
            found: dict[str, Any] = {}
            for table in sorted(inspector.get_table_names()):
                columns = inspector.get_columns(table)
                key = inspector.get_pk_constraint(table)["constrained_columns"]
                found[table] = {
                    "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in columns],
                    "key": key,
                    "indexes": indexes(connection, inspector, table),
                    "foreign_keys": sorted(
                        (fk["name"], tuple(fk["constrained_columns"]), fk["referred_table"])
                        for fk in inspector.get_foreign_keys(table)
                    ),
                    "checks": sorted(
                        (check["name"], check["sqltext"])
                        for check in inspector.get_check_constraints(table)
                    ),
                }
                if not table.startswith("project_events_fts"):
                    names = ", ".join(f"CAST({c['name']} AS TEXT)" for c in columns)
                    order = ", ".join(key) or "1"
                    rows = connection.exec_driver_sql(
                        f"SELECT {names} FROM {table} ORDER BY {order}"
                    ).all()
                    found[table]["rows"] = [tuple(row) for row in rows]
            return found
    finally:
        engine.dispose()


def indexes(connection: sa.Connection, inspector: sa.Inspector, table: str) -> list[Any]:
    """The indexes of `table`. On SQLite each as its `CREATE INDEX` statement (`sqlite_master`):
    the inspector cannot read back an index on an expression (the type filter's on
    `api_events`), it leaves them out with a warning."""
    if connection.dialect.name == "sqlite":
        query = sa.text(
            "SELECT name, sql FROM sqlite_master"
            " WHERE type = 'index' AND tbl_name = :table AND sql IS NOT NULL ORDER BY name"
        )
        return [tuple(row) for row in connection.execute(query, {"table": table})]
    return sorted(
        (index["name"], tuple(index["column_names"]), index["unique"])
        for index in inspector.get_indexes(table)
    )


def without_marks(found: dict[str, Any]) -> dict[str, Any]:
    """A snapshot without what the package's backfill after 0009 changes outside any
    revision's transaction (the marks of canonical bodies, and its row of what is left to
    mark): a kill during the backfill leaves it part done, and the next upgrade finishes it."""
    found = copy.deepcopy(found)
    events = found.get("api_events", {})
    names = [column[0] for column in events.get("columns", [])]
    if "body_canonical" in names:
        at = names.index("body_canonical")
        events["rows"] = [row[:at] + row[at + 1 :] for row in events["rows"]]
    sequences = found.get("event_sequences", {})
    sequences["rows"] = [row for row in sequences.get("rows", []) if row[0] != TO_MARK]
    return found


def revision_of(found: dict[str, Any]) -> str | None:
    rows = found.get("session_journal_version", {}).get("rows", [])
    return rows[0][0] if rows else None


@contextmanager
def polling(url: str) -> Iterator[sa.Connection]:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def current_revision(connection: sa.Connection) -> str:
    query = sa.text("SELECT version_num FROM session_journal_version")
    try:
        return str(connection.execute(query).scalar_one())
    except sa.exc.OperationalError:  # SQLite: busy for a moment while a revision commits
        return OLD


@pytest.fixture
def reference(backend: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """What the database holds at each revision: a seeded database upgraded one at a time."""
    found = {}
    with fresh_database(backend, tmp_path / "reference") as url:
        seed(url)
        for revision in revisions():
            migrations.upgrade(url, revision)
            found[revision] = snapshot(url)
            assert revision_of(found[revision]) == revision
    return found


def test_an_upgrade_killed_at_any_moment_leaves_a_consistent_database_at_one_revision(
    backend: str,
    reference: dict[str, dict[str, Any]],
    workers: Workers,
    rng: random.Random,
    tmp_path: Path,
) -> None:
    chain = revisions()
    killed_at = []
    for round_ in range(rounds(2)):
        with fresh_database(backend, tmp_path / f"round-{round_}") as url:
            seed(url)
            assert snapshot(url) == reference[OLD]
            child_url, name = named_url(url, f"upgrade-{round_}")
            after = rng.choice(chain[:-1])
            upgrader = workers.start(f"upgrade-{round_}", child_url)

            with polling(url) as connection:
                upgrader.send(children.upgrade, "head")
                deadline = time.monotonic() + CALL_TIMEOUT_S
                while chain.index(current_revision(connection)) < chain.index(after):
                    if upgrader.answered():  # it ended (kill() reports a failure)
                        break
                    assert time.monotonic() < deadline, "the upgrade does not progress"
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, LONGEST_DELAY_S))
                upgrader.kill()
            wait_disconnected(url, name)

            found = snapshot(url)
            revision = revision_of(found)
            assert revision in chain
            assert without_marks(found) == without_marks(reference[revision]), (
                f"killed after {after}, at {revision}"
            )
            assert_sound(backend, url)
            killed_at.append(revision)

            migrations.upgrade(url)
            assert snapshot(url) == reference[chain[-1]]
            with Store.open(url) as store:
                assert len(all_events(store)) == EVENTS
                assert store.faults.record_startup_fault("s0", "after the upgrade")
                assert store.events.latest_seq() == FRONTIER + 1
            assert_sound(backend, url)
    print(f"revision at each kill: {killed_at}")
