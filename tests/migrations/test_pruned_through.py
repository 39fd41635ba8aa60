"""0007_pruned_through: the floor of a pruned log, upgraded with data, downgraded refusing to
lose a floor that a prune recorded (older code would serve the pruned prefix as a hole)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import DataLossRefused, migrations

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'
LEVELS = "SELECT schema_level, minimum_compatible_level FROM schema_compatibility"


def read(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(sql))]
    finally:
        engine.dispose()


def write(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement), {"body": BODY})
    finally:
        engine.dispose()


def columns(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return [column["name"] for column in sa.inspect(engine).get_columns("event_sequences")]
    finally:
        engine.dispose()


def populate_at_0006(url: str) -> None:
    """A database at 0006 with three events of one session and the frontier at 5."""
    migrations.upgrade(url, "0006_project_index")
    write(
        url,
        "INSERT INTO sessions (session_id, project_id, state) VALUES ('s1', 'p', 'running')",
        *(
            "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
            f"VALUES ({seq}, 's1', {seq}, :body)"
            for seq in (1, 2, 3)
        ),
        "UPDATE event_sequences SET last_seq = 5",
    )


def test_upgrading_a_populated_database_keeps_every_row_and_starts_unpruned(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url)
    assert read(url, "SELECT name, last_seq, pruned_through FROM event_sequences") == [
        ("api_events", 5, 0)
    ]
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(1,), (2,), (3,)]
    assert read(url, LEVELS) == [(7, 2)]  # level-6 code may still use an unpruned log


def test_an_unpruned_log_downgrades_without_being_told_and_upgrades_again(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url)
    migrations.downgrade(url, "0006_project_index")
    assert "pruned_through" not in columns(url)
    assert read(url, "SELECT name, last_seq FROM event_sequences") == [("api_events", 5)]
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(1,), (2,), (3,)]
    assert read(url, LEVELS) == [(6, 2)]
    migrations.upgrade(url)
    assert read(url, "SELECT last_seq, pruned_through FROM event_sequences") == [(5, 0)]


def test_a_pruned_log_refuses_the_downgrade_naming_its_floor(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url)
    # What the first prune through seq 2 leaves (store.events.prune, tested in integration).
    write(
        url,
        "UPDATE event_sequences SET pruned_through = 2",
        "DELETE FROM api_events WHERE seq <= 2",
        "UPDATE schema_compatibility SET minimum_compatible_level = 7",
    )
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0006_project_index")
    assert refused.value.losses == (
        "0007_pruned_through: the pruned_through floor 2 (events up to seq 2 were pruned; older "
        "code would serve that prefix as a hole, without CursorExpired)",
    )
    assert read(url, "SELECT last_seq, pruned_through FROM event_sequences") == [(5, 2)]
    assert read(url, LEVELS) == [(7, 7)]

    migrations.downgrade(url, "0006_project_index", allow_data_loss=True)
    assert "pruned_through" not in columns(url)
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(3,)]
    assert read(url, "SELECT name, last_seq FROM event_sequences") == [("api_events", 5)]
    assert read(url, LEVELS) == [(6, 2)]
