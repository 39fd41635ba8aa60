"""0012_consumers: the table of durable consumers, created at level 12 with the minimum
compatible level left as it was; downgraded refusing to lose consumers unless allowed, the
minimum put back where the first `register` found it (7 in a pruned log, 2 otherwise); the
round trip leaves no drift. The revisions are named: a later revision may be head."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from session_journal import DataLossRefused, migrations
from tests.migrations.test_pruned_through import LEVELS, columns, read, write

CONSUMER = (
    "INSERT INTO consumers (name, filter_json, position, registered_at_ms, last_ack_at_ms, "
    "max_idle_ms) VALUES ('projector', '{}', 5, 1, 2, 60000)"
)
FIRST_REGISTER = "UPDATE schema_compatibility SET minimum_compatible_level = 12"
PRUNED = "UPDATE event_sequences SET last_seq = 9, pruned_through = 4 WHERE name = 'api_events'"
LOSS = "0012_consumers: 1 durable consumer(s) and their positions (the consumers table)"


def test_the_table_comes_at_level_12_and_the_minimum_stays(url: str) -> None:
    migrations.upgrade(url, "0011_lone_append")
    assert read(url, LEVELS) == [(11, 2)]
    migrations.upgrade(url, "0012_consumers")
    assert read(url, LEVELS) == [(12, 2)]
    assert columns(url, "consumers") == [
        "name",
        "filter_json",
        "position",
        "registered_at_ms",
        "last_ack_at_ms",
        "max_idle_ms",
    ]
    write(url, CONSUMER)
    assert read(url, "SELECT name, position, max_idle_ms FROM consumers") == [
        ("projector", 5, 60000)
    ]


@pytest.mark.parametrize(("pruned", "minimum"), [(False, 2), (True, 7)], ids=["whole", "pruned"])
def test_the_downgrade_refuses_to_lose_consumers_and_puts_the_minimum_back(
    url: str, pruned: bool, minimum: int
) -> None:
    migrations.upgrade(url, "0012_consumers")
    write(url, CONSUMER, FIRST_REGISTER, *([PRUNED] if pruned else []))
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0011_lone_append")
    assert refused.value.losses == (LOSS,)
    assert read(url, "SELECT COUNT(*) FROM consumers") == [(1,)]
    assert read(url, LEVELS) == [(12, 12)]

    assert migrations.downgrade(url, "0011_lone_append", allow_data_loss=True) == (LOSS,)
    assert read(url, LEVELS) == [(11, minimum)]
    engine = sa.create_engine(url)
    try:
        assert "consumers" not in sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()

    migrations.upgrade(url, "0012_consumers")
    assert read(url, LEVELS) == [(12, minimum)]
    assert read(url, "SELECT COUNT(*) FROM consumers") == [(0,)]
    if migrations.head() == "0012_consumers":
        command.check(migrations.alembic_config(url))  # no drift after the round trip


def test_a_minimum_another_revision_raised_is_left_alone(url: str) -> None:
    """The downgrade puts back only the minimum the first `register` set (12)."""
    migrations.upgrade(url, "0012_consumers")
    write(url, "UPDATE schema_compatibility SET minimum_compatible_level = 7", PRUNED)
    migrations.downgrade(url, "0011_lone_append")  # no consumer: nothing lost, not refused
    assert read(url, LEVELS) == [(11, 7)]
