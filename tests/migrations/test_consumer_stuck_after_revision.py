"""0014_consumer_stuck_after: `consumers.stuck_after_ms`, added at level 14 with the default
(300 s) for the consumers there; downgraded refusing to lose a setting other than the default
unless allowed; the round trip leaves no drift. The revisions are named: a later revision may
be head."""

from __future__ import annotations

import pytest
from alembic import command

from session_journal import DataLossRefused, migrations
from tests.migrations.test_consumers_revision import CONSUMER
from tests.migrations.test_pruned_through import LEVELS, columns, read, write

LOSS = (
    "0014_consumer_stuck_after: the stuck_after_s of 1 durable consumer(s) registered with "
    "another than 300 s"
)


def test_the_column_comes_at_level_14_with_the_default(url: str) -> None:
    migrations.upgrade(url, "0013_consumer_leases")
    write(url, CONSUMER)
    migrations.upgrade(url, "0014_consumer_stuck_after")
    assert read(url, LEVELS) == [(14, 2)]
    assert columns(url, "consumers")[-1] == "stuck_after_ms"
    assert read(url, "SELECT name, stuck_after_ms FROM consumers") == [("projector", 300000)]


def test_the_downgrade_refuses_to_lose_a_setting_and_keeps_the_consumers(url: str) -> None:
    migrations.upgrade(url, "0014_consumer_stuck_after")
    write(url, CONSUMER)
    assert migrations.downgrade(url, "0013_consumer_leases") == ()  # the default: no loss
    migrations.upgrade(url, "0014_consumer_stuck_after")
    write(url, "UPDATE consumers SET stuck_after_ms = 60000")
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0013_consumer_leases")
    assert refused.value.losses == (LOSS,)
    assert read(url, "SELECT stuck_after_ms FROM consumers") == [(60000,)]

    assert migrations.downgrade(url, "0013_consumer_leases", allow_data_loss=True) == (LOSS,)
    assert read(url, LEVELS) == [(13, 2)]
    assert "stuck_after_ms" not in columns(url, "consumers")
    assert read(url, "SELECT name, position FROM consumers") == [("projector", 5)]
    migrations.upgrade(url, "0014_consumer_stuck_after")
    assert read(url, "SELECT stuck_after_ms FROM consumers") == [(300000,)]
    if migrations.head() == "0014_consumer_stuck_after":
        command.check(migrations.alembic_config(url))  # no drift after the round trip
