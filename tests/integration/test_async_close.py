"""Closing an `AsyncStore` ends its threads: `close()` returns once every worker thread has
ended, without blocking the event loop meanwhile; the calls running then finish, those still
waiting for a worker raise `StoreClosed`; called from one of its own workers it refuses
(`UsageError`). On both backends."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from session_journal import Store, StoreClosed, UsageError
from session_journal.aio import AsyncStore
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import SessionFactory
from tests.integration.test_async_api import LONG_S, hold_the_write_path, until

WORKER = "session-journal async"
"""The name prefix of an async store's threads."""


def workers(before: set[threading.Thread]) -> list[str]:
    """The names of the async stores' threads alive now that were not alive at `before` (the
    suite's other tests may hold stores of their own)."""
    alive = threading.enumerate()
    return sorted(t.name for t in alive if t.name.startswith(WORKER) and t not in before)


def new_threads(before: set[threading.Thread]) -> list[str]:
    """The names of the threads alive now that were not alive at `before`."""
    return sorted(t.name for t in threading.enumerate() if t not in before)


def outcome(task: asyncio.Task[Any]) -> object:
    """What a call gave: its result, or its error's type and message ("running": none yet)."""
    if not task.done():
        return "running"
    error = task.exception()
    return task.result() if error is None else (type(error), str(error))


async def held_writes(store: AsyncStore, count: int) -> tuple[list[asyncio.Task[Any]], Any]:
    """`count` writes, each on a worker of its own, all queued behind a sync `unit_of_work()`
    block that holds the write path until the returned event is set (and its thread)."""
    release, holder = hold_the_write_path(store)
    writes = [
        asyncio.create_task(store.faults.record_startup_fault("s-1", f"write {n}"))
        for n in range(count)
    ]
    write_path = store.sync._database.write_path
    await until(lambda: write_path.queued() == count)
    return writes, (release, holder)


@pytest.mark.parametrize("kind", ["open", "from_store"])
def test_close_returns_once_every_worker_thread_has_ended(migrated_url: str, kind: str) -> None:
    before = set(threading.enumerate())
    sync = Store.open(migrated_url) if kind == "from_store" else None

    async def main() -> tuple[bool, list[str], list[object]]:
        store = await AsyncStore.open(migrated_url) if sync is None else AsyncStore.from_store(sync)
        await store.sessions.save(SessionFactory.build(id="s-1"))
        writes, (release, holder) = await held_writes(store, 25)
        # 25 calls at once: 25 workers (26 when the first call's was not yet idle again)
        running = len(workers(before)) >= 25
        closing = asyncio.create_task(store.close())
        await asyncio.sleep(0.1)
        release.set()  # the 25 writes finish; close() returns after them
        await closing
        left = workers(before)
        await asyncio.to_thread(holder.join)
        return running, left, [outcome(write) for write in writes]

    assert asyncio.run(main()) == (True, [], [True] * 25)
    if sync is not None:
        sync.close()  # the view left it open
    with Store.open(migrated_url) as reader:
        page = reader.events.load(after_seq=0, limit=100)
    messages = sorted(e.event.message for e in page.events)  # type: ignore[union-attr]
    assert messages == sorted(f"write {n}" for n in range(25))
    assert new_threads(before) == []


def test_a_call_still_waiting_for_a_worker_at_close_raises_store_closed(
    migrated_url: str,
) -> None:
    before = set(threading.enumerate())

    async def main() -> tuple[list[object], list[str]]:
        store = await AsyncStore.open(migrated_url, threads=2)
        await store.sessions.save(SessionFactory.build(id="s-1"))
        writes, (release, holder) = await held_writes(store, 2)  # both workers taken
        waiting = [asyncio.create_task(store.sessions.get("s-1")) for _ in range(3)]
        await asyncio.sleep(0.05)  # handed over, queued for a worker
        closing = asyncio.create_task(store.close())
        await asyncio.sleep(0.05)
        release.set()
        await closing
        left = workers(before)
        await asyncio.to_thread(holder.join)
        return [outcome(task) for task in writes + waiting], left

    assert asyncio.run(main()) == (
        [True, True] + [(StoreClosed, "get: the store is closed")] * 3,
        [],
    )


@pytest.mark.parametrize("kind", ["open", "from_store"])
def test_close_from_one_of_its_own_workers_is_refused(migrated_url: str, kind: str) -> None:
    before = set(threading.enumerate())
    sync = Store.open(migrated_url) if kind == "from_store" else None

    async def main() -> tuple[str, str, list[str]]:
        store = await AsyncStore.open(migrated_url) if sync is None else AsyncStore.from_store(sync)
        await store.sessions.save(SessionFactory.build(id="s-1"))

        def close_here(uow: UnitOfWork) -> None:  # runs on a worker of `store`
            asyncio.run(asyncio.wait_for(store.close(), LONG_S))

        with pytest.raises(UsageError) as refused:
            await store.run_in_unit_of_work(close_here)
        # Nothing closed: the store answers, then closes from the loop.
        record = await store.sessions.get("s-1")
        await store.close()
        return str(refused.value), record.id if record else "", workers(before)

    result = asyncio.run(main())
    if sync is not None:
        sync.close()
    assert result == (
        "AsyncStore.close() was called in one of its own worker threads (by a function the "
        "store runs, such as run_in_unit_of_work's), which close() waits for: it would wait "
        "for itself. Close the store from the event loop once the call has returned",
        "s-1",
        [],
    )


def test_the_loop_runs_on_while_close_waits_for_a_long_call(migrated_url: str) -> None:
    before = set(threading.enumerate())

    async def main() -> tuple[bool, bool, object, list[str]]:
        store = await AsyncStore.open(migrated_url)
        await store.sessions.save(SessionFactory.build(id="s-1"))
        writes, (release, holder) = await held_writes(store, 1)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        closing = asyncio.create_task(store.close())
        await asyncio.sleep(0.3)  # the write still waits for the write path
        closed_early = closing.done()
        ticked = ticks >= 10  # the loop ran on: about 30 ticks
        release.set()
        async with asyncio.timeout(LONG_S):
            await closing
        left = workers(before)
        ticker.cancel()
        await asyncio.to_thread(holder.join)
        return closed_early, ticked, outcome(writes[0]), left

    assert asyncio.run(main()) == (False, True, True, [])
