"""An ack without `uow=` is a lone write (`storage/lone.py`, `Ack`): alone on the write path it
is one statement on the short path; with others writing it joins their batch; from an async
store on PostgreSQL, with nothing else of the process writing, it runs on the event loop. Each
way the same position, refusals and wake-ups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from session_journal import AsyncStore, ConsumerNotFound, InvalidRecord, Store
from tests.factories import SessionFactory
from tests.helpers import append_raw
from tests.integration.test_lone_writes import POSTGRESQL_ONLY, run_queued_behind_a_block
from tests.integration.test_loop_writes import loop_writes

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'


def with_consumer(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    append_raw(store, "s1", BODY, 5)
    store.consumers.register("projector")


def test_a_lone_ack_runs_by_itself_on_the_short_path(store: Store) -> None:
    with_consumer(store)
    path, acks = store._database.write_path, store.following.acks
    alone, generation = path.alone, acks.generation
    store.consumers.ack("projector", 3)
    assert path.alone == alone + 1
    assert acks.generation > generation  # `wait_until` reads again
    assert store.consumers.get("projector").position == 3
    store.consumers.ack("projector", 2)  # behind: the position stays
    with pytest.raises(InvalidRecord, match="above the frontier 5"):
        store.consumers.ack("projector", 6)
    with pytest.raises(ConsumerNotFound):
        store.consumers.ack("nobody", 1)
    assert path.alone == alone + 4  # refusals ran there too, and wrote nothing
    assert store.consumers.get("projector").position == 3


def test_lone_acks_queued_together_run_in_their_batch_with_their_own_outcomes(
    store: Store,
) -> None:
    with_consumer(store)
    store.consumers.register("other")
    path = store._database.write_path
    together = path.together
    ack = store.consumers.ack
    outcomes = run_queued_behind_a_block(
        store,
        [
            lambda: ack("projector", 2),
            lambda: ack("nobody", 1),
            lambda: ack("other", 9),
            lambda: ack("other", 4),
            lambda: ack("projector", 1),
        ],
    )
    assert [type(outcome) for outcome in outcomes] == [
        type(None),
        ConsumerNotFound,
        InvalidRecord,
        type(None),
        type(None),
    ]
    assert path.together - together == 5
    assert [(status.name, status.position) for status in store.consumers.list()] == [
        ("other", 4),
        ("projector", 2),
    ]


@POSTGRESQL_ONLY
def test_an_async_lone_ack_runs_on_the_loop(migrated_url: str) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            with_consumer(store.sync)
            on_loop = loop_writes(store)
            alone, generation = on_loop.alone, store.sync.following.acks.generation
            await store.consumers.ack("projector", 4)
            assert on_loop.alone == alone + 1
            assert store.sync.following.acks.generation > generation
            assert (await store.consumers.get("projector")).position == 4
            refusals: list[Any] = []
            for name, seq in (("nobody", 1), ("projector", 6)):
                try:
                    await store.consumers.ack(name, seq)
                except (ConsumerNotFound, InvalidRecord) as error:
                    refusals.append(type(error))
            assert refusals == [ConsumerNotFound, InvalidRecord]
            assert on_loop.alone == alone + 3
            assert (await store.consumers.get("projector")).position == 4

    asyncio.run(scenario())
