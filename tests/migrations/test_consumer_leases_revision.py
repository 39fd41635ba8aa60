"""0013_consumer_leases: the lease columns of `consumers`, added at level 13 with the minimum
compatible level left as it was and the consumers kept (no lease, generation 0); downgraded
refusing to drop a held lease unless allowed, a minimum of 13 put back to 12; the round trip
leaves no drift. The revisions are named: a later revision may be head."""

from __future__ import annotations

import pytest
from alembic import command

from session_journal import DataLossRefused, migrations
from tests.migrations.test_consumers_revision import CONSUMER
from tests.migrations.test_pruned_through import LEVELS, columns, read, write

LEASE = (
    "UPDATE consumers SET holder = 'host-a:41', generation = 3, lease_expires_at_ms = 9"
    " WHERE name = 'projector'"
)
FIRST_ACQUIRE = "UPDATE schema_compatibility SET minimum_compatible_level = 13"
LOSS = (
    "0013_consumer_leases: 1 held lease(s) of durable consumers (a paused holder would ack "
    "unfenced)"
)
LEASE_COLUMNS = ["holder", "generation", "lease_expires_at_ms"]
CONSUMER_COLUMNS = [
    "name",
    "filter_json",
    "position",
    "registered_at_ms",
    "last_ack_at_ms",
    "max_idle_ms",
]


def test_the_lease_columns_come_at_level_13_and_the_consumers_stay(url: str) -> None:
    migrations.upgrade(url, "0012_consumers")
    write(url, CONSUMER, "UPDATE schema_compatibility SET minimum_compatible_level = 12")
    migrations.upgrade(url, "0013_consumer_leases")
    assert read(url, LEVELS) == [(13, 12)]
    assert columns(url, "consumers") == CONSUMER_COLUMNS + LEASE_COLUMNS
    assert read(
        url, "SELECT name, position, holder, generation, lease_expires_at_ms FROM consumers"
    ) == [("projector", 5, None, 0, None)]


def test_the_downgrade_refuses_to_drop_a_held_lease_and_puts_the_minimum_back(url: str) -> None:
    migrations.upgrade(url, "0013_consumer_leases")
    write(url, CONSUMER, LEASE, FIRST_ACQUIRE)
    with pytest.raises(DataLossRefused) as refused:
        migrations.downgrade(url, "0012_consumers")
    assert refused.value.losses == (LOSS,)
    assert read(url, LEVELS) == [(13, 13)]
    assert read(url, "SELECT holder, generation FROM consumers") == [("host-a:41", 3)]

    assert migrations.downgrade(url, "0012_consumers", allow_data_loss=True) == (LOSS,)
    assert read(url, LEVELS) == [(12, 12)]
    assert columns(url, "consumers") == CONSUMER_COLUMNS
    assert read(url, "SELECT name, position, max_idle_ms FROM consumers") == [
        ("projector", 5, 60000)
    ]

    migrations.upgrade(url, "0013_consumer_leases")
    assert read(url, LEVELS) == [(13, 12)]
    assert read(url, "SELECT holder, generation FROM consumers") == [(None, 0)]
    if migrations.head() == "0013_consumer_leases":  # else checked by the later revision
        command.check(migrations.alembic_config(url))  # no drift after the round trip


def test_a_released_lease_is_not_a_loss(url: str) -> None:
    """A lease released (no holder) loses nothing; the minimum the first acquire set goes back
    to 12, and one no lease raised is left alone."""
    migrations.upgrade(url, "0013_consumer_leases")
    write(url, CONSUMER, "UPDATE consumers SET generation = 2", FIRST_ACQUIRE)
    assert migrations.downgrade(url, "0012_consumers") == ()
    assert read(url, LEVELS) == [(12, 12)]

    migrations.upgrade(url, "0013_consumer_leases")
    write(url, "UPDATE schema_compatibility SET minimum_compatible_level = 7")
    migrations.downgrade(url, "0012_consumers")
    assert read(url, LEVELS) == [(12, 7)]
