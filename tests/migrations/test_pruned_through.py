"""0007_pruned_through: the floor of a pruned log, upgraded with data, downgraded refusing to
lose the expiry of cursors that a prune recorded (older code would serve the pruned prefix as a
hole), and a floor kept below 0007 by the downgrade that comes back with the upgrade. The
revisions are named: a later revision may be head."""

from __future__ import annotations

import io

import pytest
import sqlalchemy as sa
from alembic import command

from session_journal import CursorExpired, DataLossRefused, Store, migrations
from session_journal.cli import main
from tests.factories import SessionFactory
from tests.migrations.test_offline_sql import run_script

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'
LEVELS = "SELECT schema_level, minimum_compatible_level FROM schema_compatibility"
MINIMUM_LEVEL = "SELECT minimum_compatible_level FROM schema_compatibility"
FLOOR = "SELECT pruned_through FROM event_sequences WHERE name = 'api_events'"
KEPT_FLOOR = "SELECT last_seq FROM event_sequences WHERE name = 'api_events_pruned_through'"
LOSS = (
    "0007_pruned_through: while the database is below 0007_pruned_through, the expiry of "
    "cursors below the pruned_through floor {floor} (events up to seq {floor} were pruned; older "
    "code would serve that prefix as a hole, without CursorExpired); the floor is kept and comes "
    "back with the upgrade"
)


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


def columns(url: str, table: str = "event_sequences") -> list[str]:
    engine = sa.create_engine(url)
    try:
        return [column["name"] for column in sa.inspect(engine).get_columns(table)]
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
    migrations.upgrade(url, "0007_pruned_through")
    assert read(url, "SELECT name, last_seq, pruned_through FROM event_sequences") == [
        ("api_events", 5, 0)
    ]
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(1,), (2,), (3,)]
    assert read(url, LEVELS) == [(7, 2)]  # level-6 code may still use an unpruned log


def test_an_unpruned_log_downgrades_without_being_told_and_upgrades_again(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url, "0007_pruned_through")
    migrations.downgrade(url, "0006_project_index")
    assert "pruned_through" not in columns(url)
    assert read(url, "SELECT name, last_seq FROM event_sequences") == [("api_events", 5)]
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(1,), (2,), (3,)]
    assert read(url, LEVELS) == [(6, 2)]
    migrations.upgrade(url, "0007_pruned_through")
    assert read(url, "SELECT name, last_seq, pruned_through FROM event_sequences") == [
        ("api_events", 5, 0)
    ]
    assert read(url, LEVELS) == [(7, 2)]


def test_a_pruned_log_refuses_the_downgrade_naming_its_floor(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url, "0007_pruned_through")
    # What the first prune through seq 2 leaves (store.events.prune, tested in integration).
    write(
        url,
        "UPDATE event_sequences SET pruned_through = 2",
        "DELETE FROM api_events WHERE seq <= 2",
        "UPDATE schema_compatibility SET minimum_compatible_level = 7",
    )
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0006_project_index")
    assert refused.value.losses == (LOSS.format(floor=2),)
    assert read(url, "SELECT last_seq, pruned_through FROM event_sequences") == [(5, 2)]
    assert read(url, LEVELS) == [(7, 7)]

    migrations.downgrade(url, "0006_project_index", allow_data_loss=True)
    assert "pruned_through" not in columns(url)
    assert read(url, "SELECT seq FROM api_events ORDER BY seq") == [(3,)]
    # The floor waits in a row of its own, beside the frontier that older code reads.
    assert read(url, "SELECT name, last_seq FROM event_sequences ORDER BY name") == [
        ("api_events", 5),
        ("api_events_pruned_through", 2),
    ]
    assert read(url, LEVELS) == [(6, 2)]

    migrations.upgrade(url, "0007_pruned_through")
    assert read(url, "SELECT name, last_seq, pruned_through FROM event_sequences") == [
        ("api_events", 5, 2)
    ]
    assert read(url, LEVELS) == [(7, 7)]


def prune_at_head(url: str, through: int) -> int:
    """A database at head whose log (three events of one session, seqs 1 to 3) was pruned
    through `through` by the store (`through=0`: never pruned); its minimum level."""
    with Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
        for n in range(3):
            store.faults.record_startup_fault("s1", f"fault {n}")
        assert store.events.latest_seq() == 3
        if through:
            assert store.events.prune(through_seq=through) == through
    [(minimum,)] = read(url, MINIMUM_LEVEL)
    return int(minimum)


def test_a_round_trip_below_0007_keeps_the_floor_and_expires_old_cursors(url: str) -> None:
    assert prune_at_head(url, 2) == 7
    assert main(["--url", url, "db", "downgrade", "0006_project_index"]) == 1  # refused
    assert main(["--url", url, "db", "downgrade", "0006_project_index", "--allow-data-loss"]) == 0
    assert read(url, KEPT_FLOOR) == [(2,)]
    assert read(url, LEVELS) == [(6, 2)]
    migrations.upgrade(url)

    assert read(url, FLOOR) == [(2,)]
    assert read(url, MINIMUM_LEVEL) == [(7,)]
    assert read(url, KEPT_FLOOR) == []
    with Store.open(url) as store:
        assert store.events.pruned_through() == 2
        with pytest.raises(CursorExpired) as expired:
            store.events.load(after_seq=1)
        assert (expired.value.cursor, expired.value.pruned_through) == (1, 2)
        assert [event.seq for event in store.events.load(after_seq=2).events] == [3]


def test_a_round_trip_of_a_log_never_pruned_keeps_floor_0_and_the_minimum_level(
    url: str,
) -> None:
    minimum = prune_at_head(url, 0)
    migrations.downgrade(url, "0006_project_index")  # nothing to lose: not refused
    assert read(url, KEPT_FLOOR) == []
    migrations.upgrade(url)

    assert read(url, FLOOR) == [(0,)]
    assert read(url, MINIMUM_LEVEL) == [(minimum,)]
    assert read(url, KEPT_FLOOR) == []
    with Store.open(url) as store:
        assert [event.seq for event in store.events.load(after_seq=1).events] == [2, 3]


def test_the_floor_goes_down_and_comes_back_in_offline_sql(url: str) -> None:
    populate_at_0006(url)
    migrations.upgrade(url, "0007_pruned_through")
    write(
        url,
        "UPDATE event_sequences SET pruned_through = 2",
        "DELETE FROM api_events WHERE seq <= 2",
        "UPDATE schema_compatibility SET minimum_compatible_level = 7",
    )
    # Rendered without reading the database (FROM given), run as a DBA would run it.
    buffer = io.StringIO()
    command.downgrade(
        migrations.alembic_config(url, output_buffer=buffer),
        "0007_pruned_through:0006_project_index",
        sql=True,
    )
    run_script(url, buffer.getvalue())
    assert "pruned_through" not in columns(url)
    assert read(url, KEPT_FLOOR) == [(2,)]
    assert read(url, LEVELS) == [(6, 2)]

    run_script(url, migrations.upgrade_sql(url, "0006_project_index:0007_pruned_through"))
    assert read(url, "SELECT name, last_seq, pruned_through FROM event_sequences") == [
        ("api_events", 5, 2)
    ]
    assert read(url, LEVELS) == [(7, 7)]
