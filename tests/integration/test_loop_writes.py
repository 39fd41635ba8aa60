"""Lone writes on the event loop (`storage/loop_writes.py`): on PostgreSQL an async store's lone
append, made when nothing else of the process writes, is its one statement on a connection of
the loop's own; otherwise it goes to a worker as every call. Either way the same rows, seqs,
wake-ups and errors as the write path's short path (`test_lone_writes.py`)."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from typing import Any

import psycopg
import pytest

from session_journal import AsyncStore, StorageError, Store, StoreClosed
from session_journal.storage import driver
from session_journal.storage.loop_writes import LoopWrites
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import bodies
from tests.integration.test_lone_writes import POSTGRESQL_ONLY, raw, rows, write_path

pytestmark = POSTGRESQL_ONLY


def loop_writes(store: AsyncStore) -> LoopWrites:
    made = store.sync._database.loop_writes
    assert made is not None
    return made


async def wait_for_lock(url: str, waiting_for: str) -> None:
    """Until a statement (`waiting_for` in its text) waits for a row lock."""
    with raw(url) as watcher:
        async with asyncio.timeout(10):
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s",
                (f"%{waiting_for}%",),
            ).fetchone()[0]:  # type: ignore[index]
                await asyncio.sleep(0.01)


def test_an_async_lone_append_runs_on_the_loop_and_writes_what_the_short_path_writes(
    migrated_url: str,
) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="s"))
            on_loop, path, signal = (
                loop_writes(store),
                write_path(store.sync),
                store.sync.following.signal,
            )
            alone, batches, generation = on_loop.alone, path.batches, signal.generation

            assert await store.faults.record_startup_fault("s", "boom") is True  # on the loop
            assert (on_loop.alone, path.batches) == (alone + 1, batches)
            assert signal.generation == generation + 1  # the followers were told
            assert store.sync.faults.record_startup_fault("s", "boom") is True  # short path
            assert await store.faults.record_startup_fault("nope", "x") is False
            assert on_loop.alone == alone + 2  # a refusal commits nothing, but ran there
            assert store.sync.faults.record_startup_fault("s", "boom") is True

            loop_row, short, after_refusal = rows(store.sync)
            assert [loop_row[0] + 1, loop_row[0] + 2] == [short[0], after_refusal[0]]  # no seq used
            assert loop_row[1] == short[1] == "s"
            assert loop_row[3:] == short[3:]  # the same body, canonical
            assert bodies(store.sync) == [SessionFaultFactory(message="boom")] * 3

    asyncio.run(scenario())


def test_an_async_lone_append_while_the_process_writes_goes_to_a_worker_and_joins_the_batch(
    migrated_url: str,
) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="s"))
            on_loop, path = loop_writes(store), write_path(store.sync)
            alone = on_loop.alone
            entered, leave = threading.Event(), threading.Event()

            def block() -> None:  # a unit of work of the sync API holds the write path
                with store.sync.unit_of_work() as uow:
                    entered.set()
                    leave.wait(10)
                    uow.commit()

            holder = threading.Thread(target=block)
            holder.start()
            await asyncio.to_thread(entered.wait, 10)
            appending = asyncio.create_task(store.faults.record_startup_fault("s", "queued"))
            async with asyncio.timeout(10):
                while path.queued() == 0:  # it waits on the write path, not on the loop
                    await asyncio.sleep(0.005)
            leave.set()
            assert await appending is True
            holder.join(10)
            assert on_loop.alone == alone
            assert await store.faults.record_startup_fault("s", "free again") is True
            assert on_loop.alone == alone + 1
            assert [event.message for event in bodies(store.sync)] == ["queued", "free again"]

    asyncio.run(scenario())


def test_concurrent_async_lone_appends_share_the_loop_and_the_workers_and_keep_every_seq(
    migrated_url: str,
) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="s"))
            on_loop, path = loop_writes(store), write_path(store.sync)
            alone, calls = on_loop.alone, path.calls
            results = await asyncio.gather(
                *(store.faults.record_startup_fault("s", str(n)) for n in range(200))
            )
            assert results == [True] * 200
            ran_on_loop, ran_on_workers = on_loop.alone - alone, path.calls - calls
            assert ran_on_loop >= 1 and ran_on_workers >= 1
            assert ran_on_loop + ran_on_workers == 200
            assert [row[0] for row in rows(store.sync)] == list(range(1, 201))
            assert sorted(event.message for event in bodies(store.sync)) == sorted(
                str(n) for n in range(200)
            )

    asyncio.run(scenario())


def test_a_closed_store_refuses_an_async_lone_append_and_closes_the_loops_connection(
    migrated_url: str,
) -> None:
    async def scenario() -> None:
        with Store.open(migrated_url) as sync:
            sync.sessions.save(SessionFactory(id="s"))
            store = AsyncStore.from_store(sync)
            assert await store.faults.record_startup_fault("s", "kept")
            connection = loop_writes(store)._connection
            assert connection is not None
            sync.close()  # the sync store under the view: the loop's connection goes with it
            assert connection._connection.closed
            with pytest.raises(StoreClosed, match="record startup fault of 's'"):
                await store.faults.record_startup_fault("s", "refused")
            await store.close()
        with Store.open(migrated_url) as reopened:
            assert [event.message for event in bodies(reopened)] == ["kept"]

    asyncio.run(scenario())


def test_a_session_locked_by_another_writer_holds_up_only_its_own_async_appends(
    migrated_url: str,
) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="S"))
            await store.sessions.save(SessionFactory(id="T"))
            assert await store.faults.record_startup_fault("T", "warm")
            with raw(migrated_url) as holder:
                holder.execute("SELECT 1 FROM sessions WHERE session_id = 'S' FOR UPDATE")
                waiting = asyncio.create_task(store.faults.record_startup_fault("S", "waited"))
                await wait_for_lock(migrated_url, "session_journal_append_event")
                started = time.monotonic()
                # The loop's connection waits for S: T's append goes to a worker meanwhile.
                assert await store.faults.record_startup_fault("T", "not held up")
                assert time.monotonic() - started < 0.1
                assert not waiting.done()
                holder.rollback()
            assert await asyncio.wait_for(waiting, 10) is True
            assert [event.message for event in bodies(store.sync)] == [
                "warm",
                "not held up",
                "waited",
            ]

    asyncio.run(scenario())


def test_a_cancelled_async_lone_append_on_the_loop_returns_at_once_and_its_statement_runs_on(
    migrated_url: str,
) -> None:
    # As a call running on a worker: its caller is cancelled at once, the statement runs to its
    # end (here it waits for a session's lock first), commits and wakes the followers.
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="S"))
            assert await store.faults.record_startup_fault("S", "warm")
            on_loop = loop_writes(store)
            alone = on_loop.alone
            with raw(migrated_url) as holder:
                holder.execute("SELECT 1 FROM sessions WHERE session_id = 'S' FOR UPDATE")
                task = asyncio.create_task(store.faults.record_startup_fault("S", "cancelled"))
                await wait_for_lock(migrated_url, "session_journal_append_event")
                task.cancel()
                started = time.monotonic()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert time.monotonic() - started < 0.1
                holder.rollback()
            await store.faults.on_loop.settled()  # the statement, left to run
            assert on_loop.alone == alone + 1
            assert on_loop._connection is not None  # kept: it ended as it should
            assert await store.faults.record_startup_fault("S", "after") is True
            assert on_loop.alone == alone + 2
            assert [event.message for event in bodies(store.sync)] == [
                "warm",
                "cancelled",
                "after",
            ]
            assert [row[0] for row in rows(store.sync)] == [1, 2, 3]

    asyncio.run(scenario())


def test_closing_an_async_store_waits_for_its_lone_append_on_the_loop_then_refuses_more(
    migrated_url: str,
) -> None:
    async def scenario(owned: bool) -> None:
        sync = Store.open(migrated_url)
        store = await AsyncStore.open(migrated_url) if owned else AsyncStore.from_store(sync)
        await store.sessions.save(SessionFactory(id=f"S{owned}"))
        assert await store.faults.record_startup_fault(f"S{owned}", "warm")
        with raw(migrated_url) as holder:
            holder.execute(f"SELECT 1 FROM sessions WHERE session_id = 'S{owned}' FOR UPDATE")
            task = asyncio.create_task(store.faults.record_startup_fault(f"S{owned}", "in flight"))
            await wait_for_lock(migrated_url, "session_journal_append_event")
            closing = asyncio.create_task(store.close())
            await asyncio.sleep(0.2)
            assert not closing.done()  # it waits for the append, as for a call on a worker
            with pytest.raises(StoreClosed):  # while it closes, every call is refused
                await store.faults.record_startup_fault(f"S{owned}", "refused")
            holder.rollback()
            assert await asyncio.wait_for(task, 10) is True
            await asyncio.wait_for(closing, 10)
        with pytest.raises(StoreClosed):
            await store.faults.record_startup_fault(f"S{owned}", "refused")
        if owned:  # the loop's connection was closed (its server process ends soon after)
            with raw(migrated_url) as watcher:
                async with asyncio.timeout(10):
                    while watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                        "AND query LIKE 'SELECT session_journal_append_event(%'"
                    ).fetchone() != (0,):
                        await asyncio.sleep(0.01)
        mine = [row[0] for row in rows(sync) if row[1] == f"S{owned}"]
        assert len(mine) == 2  # "warm" and "in flight"; nothing refused was written
        sync.close()

    asyncio.run(scenario(owned=True))
    asyncio.run(scenario(owned=False))


def test_a_deadlock_victim_on_the_loop_runs_again(migrated_url: str) -> None:
    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="S"))
            assert await store.faults.record_startup_fault("S", "warm")
            on_loop = loop_writes(store)
            retried = on_loop.retried
            with raw(migrated_url) as other:
                # As in test_lone_writes: the other transaction holds the seq row, then asks for
                # the session the lone append holds while it waits for the seq row.
                other.execute("SET deadlock_timeout = '5s'")
                other.execute(
                    "UPDATE event_sequences SET last_seq = last_seq WHERE name = 'api_events'"
                )
                task = asyncio.create_task(store.faults.record_startup_fault("S", "victim"))
                await wait_for_lock(migrated_url, "session_journal_append_event")
                await asyncio.to_thread(
                    other.execute, "SELECT 1 FROM sessions WHERE session_id = 'S' FOR UPDATE"
                )
                other.commit()
            assert await asyncio.wait_for(task, 30) is True
            assert on_loop.retried == retried + 1
            assert bodies(store.sync)[-1] == SessionFaultFactory(message="victim")

    asyncio.run(scenario())


def test_an_async_lone_append_that_cannot_connect_is_a_storage_error(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(cls: type[driver.LoopConnection], *args: Any) -> driver.LoopConnection:
        raise psycopg.OperationalError("connection refused: the server is not accepting")

    async def scenario() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="s"))
            monkeypatch.setattr(driver.LoopConnection, "connect", classmethod(refused))
            with pytest.raises(StorageError, match="record startup fault of 's' failed: conn"):
                await store.faults.record_startup_fault("s", "no connection")
            monkeypatch.undo()
            assert await store.faults.record_startup_fault("s", "connected") is True
            assert [event.message for event in bodies(store.sync)] == ["connected"]

    asyncio.run(scenario())


def append_on_a_view(store: Store, message: str) -> tuple[bool, int]:
    """An append through a new async view of `store`, in a loop of its own; its result and how
    many lone writes the store made on a loop so far."""

    async def appended() -> tuple[bool, int]:
        view = AsyncStore.from_store(store)
        try:
            result = await view.faults.record_startup_fault("s", message)
            return result, loop_writes(view).alone
        finally:
            await view.close()

    return asyncio.run(appended())


def append_in_a_child(store: Store, out: Any) -> None:
    out.put(append_on_a_view(store, "child"))


def test_a_child_after_fork_never_uses_the_parents_loop_connection(migrated_url: str) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s"))
        assert append_on_a_view(store, "parent") == (True, 1)  # its connection is made
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        child = context.Process(target=append_in_a_child, args=(store, out))
        child.start()
        assert out.get(True, 30) == (True, 1)  # on a worker: the loop's connection is not its
        child.join(30)
        assert child.exitcode == 0
        # The parent's connection is sound, on another loop too.
        assert append_on_a_view(store, "parent again") == (True, 2)
        assert [event.message for event in bodies(store)] == ["parent", "child", "parent again"]


def test_closing_does_not_wait_for_a_loop_write_that_has_not_begun(migrated_url: str) -> None:
    # The write's task is scheduled, its loop's thread blocked waiting for the close: the close
    # does not wait for it (the store refuses it when it runs), so neither waits for the other.
    async def scenario() -> None:
        with Store.open(migrated_url) as sync:
            sync.sessions.save(SessionFactory(id="s"))
            store = AsyncStore.from_store(sync)
            assert await store.faults.record_startup_fault("s", "warm")
            task = asyncio.ensure_future(store.faults.record_startup_fault("s", "scheduled"))
            await asyncio.sleep(0)  # it started its write's task, which has not run yet
            closer = threading.Thread(target=sync.close)
            closer.start()
            closer.join(5)  # the loop's thread waits for the close, as a sync hook might
            assert not closer.is_alive()
            with pytest.raises(StoreClosed):
                await task
            await store.close()
        with Store.open(migrated_url) as reopened:
            assert [event.message for event in bodies(reopened)] == ["warm"]

    asyncio.run(scenario())
