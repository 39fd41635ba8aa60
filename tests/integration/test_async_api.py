"""The asyncio API beyond what the sync scenarios check through it (`both_apis` modules):
cancellation, many concurrent tasks, followers with tasks appending, closing while tasks wait,
one write path shared with a sync store, and waiting that holds no thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from session_journal import (
    ApiEventFilter,
    InvalidRecord,
    OutcomeReason,
    SessionFault,
    StoreClosed,
)
from session_journal.aio import SWEEP_S, AsyncFollower, AsyncStore
from session_journal.follow.fanout import PER_WAITER_S, SPACING_S
from session_journal.follow.window import Row
from session_journal.journal.writer import JournalWriter
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import JournalEnvelopeFactory, SessionFactory

T = TypeVar("T")
LONG_S = 60.0  # a wait that times out fails its scenario long before this matters


def scenario(url: str, body: Callable[[AsyncStore], Awaitable[T]], **options: Any) -> T:
    """Open an async store on `url`, run `body` with it on a new event loop, close it."""

    async def main() -> T:
        async with await AsyncStore.open(url, **options) as store:
            return await body(store)

    return asyncio.run(main())


async def until(condition: Callable[[], bool]) -> None:
    """Poll `condition` on the loop (the other side is a thread) until it holds."""
    async with asyncio.timeout(LONG_S):
        while not condition():
            await asyncio.sleep(0.001)


async def messages(store: AsyncStore, session_id: str | None = None) -> list[str]:
    page = await store.events.load(ApiEventFilter(session_id=session_id), after_seq=0, limit=1000)
    return [event.event.message for event in page.events if isinstance(event.event, SessionFault)]


async def listening(store: AsyncStore) -> None:
    """Wait until the source of other processes' commits has begun (it pulses once then:
    SQLite's watcher after its first reading, PostgreSQL's listener once LISTEN is in force)."""
    wakeups = store.sync.following.source
    if wakeups is not None:
        assert await asyncio.to_thread(wakeups.listening.wait, LONG_S)
        await asyncio.sleep(0.05)  # its pulse's wake-up has run


def hold_the_write_path(store: AsyncStore) -> tuple[threading.Event, threading.Thread]:
    """A thread in a `unit_of_work()` block until the returned event is set: every other write
    queues behind it."""
    holding, release = threading.Event(), threading.Event()

    def block() -> None:
        with store.sync.unit_of_work():
            holding.set()
            release.wait(LONG_S)

    thread = threading.Thread(target=block)
    thread.start()
    assert holding.wait(LONG_S)
    return release, thread


def test_a_cancelled_call_still_queued_is_withdrawn_and_never_written(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> list[str]:
        await store.sessions.save(SessionFactory.build(id="s-1"))
        release, thread = hold_the_write_path(store)
        try:
            task = asyncio.create_task(store.faults.record_startup_fault("s-1", "withdrawn"))
            write_path = store.sync._database.write_path
            await until(lambda: write_path.queued() == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert write_path.queued() == 0
        finally:
            release.set()
            await asyncio.to_thread(thread.join)
        assert await store.faults.record_startup_fault("s-1", "after")
        return await messages(store)

    assert scenario(migrated_url, body) == ["after"]


def test_a_cancelled_call_already_in_a_batch_may_still_commit(migrated_url: str) -> None:
    running, finish = threading.Event(), threading.Event()

    def slow_append(uow: UnitOfWork) -> None:
        fault = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="kept")
        uow.events.append("s-1", 1, fault.model_dump_json())
        running.set()
        finish.wait(LONG_S)
        uow.commit()

    async def body(store: AsyncStore) -> list[str]:
        await store.sessions.save(SessionFactory.build(id="s-1"))
        task = asyncio.create_task(store.run_in_unit_of_work(slow_append))
        await asyncio.to_thread(running.wait, LONG_S)
        task.cancel()
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(LONG_S):  # the batch goes on without its caller
            while not await messages(store):
                await asyncio.sleep(0.01)
        return await messages(store)

    assert scenario(migrated_url, body) == ["kept"]


def test_cancelling_a_wait_or_a_follow_releases_what_it_held(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> tuple[int, int, int]:
        await store.sessions.save(SessionFactory.build(id="s-1"))
        signal = store.sync.following.watched_signal()
        await listening(store)  # no pulse of its own comes while the waits are cancelled
        listeners = len(signal._listeners)
        follower = await store.events.follow(after_seq=0)
        waits = [
            asyncio.create_task(store.events.wait(after_seq=0, timeout=LONG_S)),
            asyncio.create_task(follower.__anext__()),
        ]
        await until(lambda: signal.waiting() == 2)
        for task in waits:
            task.cancel()
        for task in waits:
            with pytest.raises(asyncio.CancelledError):
                await task
        follower.close()
        # One listener per event loop, whatever the number of waits: cancelled waits leave it.
        return signal.waiting(), len(signal._listeners) - listeners, len(asyncio.all_tasks())

    waiting, more_listeners, tasks = scenario(migrated_url, body)
    assert (waiting, more_listeners, tasks) == (0, 1, 1)


def test_many_tasks_append_at_once_in_group_commits(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> tuple[list[int], dict[str, list[str]], int, int]:
        for n in range(10):
            await store.sessions.save(SessionFactory.build(id=f"s-{n}"))
        write_path = store.sync._database.write_path
        batches = write_path.batches
        start = await store.events.latest_seq()

        async def append(n: int) -> bool:
            return await store.faults.record_startup_fault(f"s-{n % 10}", f"m-{n}")

        assert all(await asyncio.gather(*(append(n) for n in range(300))))
        page = await store.events.load(after_seq=start, limit=1000)
        per_session = {f"s-{n}": await messages(store, f"s-{n}") for n in range(10)}
        return [e.seq - start for e in page.events], per_session, write_path.batches - batches, 300

    seqs, per_session, batches, calls = scenario(migrated_url, body)
    assert seqs == list(range(1, 301))  # gap-free
    for n in range(10):
        assert sorted(per_session[f"s-{n}"]) == sorted(f"m-{k}" for k in range(n, 300, 10))
    assert batches < calls  # concurrent calls shared commits


def test_followers_each_receive_exactly_their_events_while_tasks_append(
    migrated_url: str,
) -> None:
    async def body(store: AsyncStore) -> dict[str, list[str]]:
        sessions = [f"s-{n}" for n in range(20)]
        for session_id in sessions:
            await store.sessions.save(SessionFactory.build(id=session_id))
        start = await store.events.latest_seq()
        received: dict[str, list[str]] = {session_id: [] for session_id in sessions}

        async def follow(session_id: str) -> None:
            follower = await store.events.follow(ApiEventFilter(session_id=session_id), start)
            async with follower:
                async for page in follower:
                    for event in page.events:
                        assert event.session_id == session_id
                        assert isinstance(event.event, SessionFault)
                        received[session_id].append(event.event.message)
                    if len(received[session_id]) == 5:
                        return

        async def append(writer: int) -> None:
            for n in range(25):
                session_id = sessions[(writer * 25 + n) % 20]
                await store.faults.record_startup_fault(session_id, f"{writer}-{n}")

        async with asyncio.timeout(LONG_S):
            await asyncio.gather(
                *(follow(session_id) for session_id in sessions),
                *(append(writer) for writer in range(4)),
            )
        for session_id in sessions:  # in the log's order
            assert received[session_id] == await messages(store, session_id)
        return received

    received = scenario(migrated_url, body)
    expected: dict[str, set[str]] = {f"s-{n}": set() for n in range(20)}
    for writer in range(4):
        for n in range(25):
            expected[f"s-{(writer * 25 + n) % 20}"].add(f"{writer}-{n}")
    assert {session_id: set(got) for session_id, got in received.items()} == expected


def test_closing_the_store_ends_the_tasks_that_wait(migrated_url: str) -> None:
    async def main() -> tuple[type[BaseException], list[Any]]:
        store = await AsyncStore.open(migrated_url)
        signal = store.sync.following.watched_signal()
        waiting = asyncio.create_task(store.events.wait(after_seq=0, timeout=LONG_S))
        follower = await store.events.follow(after_seq=0)
        following = asyncio.create_task(_collect(follower))
        await until(lambda: signal.waiting() == 2)
        await store.close()
        async with asyncio.timeout(LONG_S):
            outcome = await asyncio.gather(waiting, return_exceptions=True)
            pages = await following
        with pytest.raises(StoreClosed):
            await store.events.latest_seq()
        error = outcome[0]
        assert isinstance(error, BaseException)
        return type(error), pages

    assert asyncio.run(main()) == (StoreClosed, [])


async def _collect(follower: AsyncFollower) -> list[Any]:
    return [page async for page in follower]


def test_a_sync_and_an_async_store_share_one_write_path(migrated_url: str) -> None:
    from session_journal import Store

    with Store.open(migrated_url) as sync_store:
        sync_store.sessions.save(SessionFactory.build(id="s-1"))

        async def main() -> list[str]:
            store = AsyncStore.from_store(sync_store)
            assert store.sync is sync_store
            release, thread = hold_the_write_path(store)
            try:
                task = asyncio.create_task(store.faults.record_startup_fault("s-1", "async"))
                write_path = sync_store._database.write_path
                await until(lambda: write_path.queued() == 1)  # queued behind the sync block
            finally:
                release.set()
                await asyncio.to_thread(thread.join)
            assert await task
            await store.close()  # the view only: the sync store stays open
            return await asyncio.to_thread(
                lambda: [e.event.message for e in sync_store.events.load(after_seq=0).events]
            )  # type: ignore[union-attr]

        assert asyncio.run(main()) == ["async"]
        assert sync_store.faults.record_startup_fault("s-1", "sync still open")


def test_waiting_followers_hold_no_thread(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> tuple[int, int]:
        await store.sessions.save(SessionFactory.build(id="s-1"))
        signal = store.sync.following.watched_signal()
        await store.events.wait(timeout=0)  # the wake-up source's thread starts
        before = threading.active_count()
        followers = [await store.events.follow(after_seq=None) for _ in range(200)]
        tasks = [asyncio.create_task(follower.__anext__()) for follower in followers]
        await until(lambda: signal.waiting() == 200)
        during = threading.active_count()
        await store.faults.record_startup_fault("s-1", "to all")
        pages = await asyncio.gather(*tasks)
        assert {page.events[0].event.message for page in pages} == {"to all"}  # type: ignore[union-attr]
        for follower in followers:
            follower.close()
        return before, during

    before, during = scenario(migrated_url, body, threads=4)
    assert during - before <= 4  # at most the four workers started meanwhile


def test_bad_arguments_are_refused_as_by_the_sync_api(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> None:
        with pytest.raises(InvalidRecord, match="after_seq must be an integer, got str"):
            await store.events.wait(after_seq="x", timeout=1)  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match="timeout must be between 0 and 3600"):
            await store.events.wait(after_seq=0, timeout=-1)
        with pytest.raises(InvalidRecord, match="filter must be an ApiEventFilter"):
            await store.events.follow({"session_id": "s"})  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match="session record must be a SessionRecord"):
            await store.sessions.save({"id": "s"})  # type: ignore[arg-type]
        assert await store.events.latest_seq() == 0

    scenario(migrated_url, body)
    with pytest.raises(InvalidRecord, match="threads must be from 1 to 1024, got 0"):
        scenario(migrated_url, lambda store: asyncio.sleep(0), threads=0)


def test_the_journal_writer_flushes_and_closes_from_async_code(tmp_path: Path) -> None:
    async def main() -> tuple[bool, int]:
        writer = JournalWriter(tmp_path / "s-1")
        for n in range(3):
            writer.send(JournalEnvelopeFactory(seq=n + 1))
        flushed = await writer.aflush()
        await writer.aclose()
        return flushed.persisted, len((tmp_path / "s-1" / "events.jsonl").read_text().splitlines())

    assert asyncio.run(main()) == (True, 3)


def test_a_follower_of_one_session_is_woken_by_its_events_only(migrated_url: str) -> None:
    async def body(store: AsyncStore) -> list[tuple[list[str], int] | None]:
        for session_id in ("a", "b"):
            await store.sessions.save(SessionFactory.build(id=session_id))
        start = await store.events.latest_seq()
        follower = await store.events.follow(ApiEventFilter(session_id="a"), after_seq=start)
        seen: list[tuple[list[str], int] | None] = []

        async def next_page(timeout: float) -> None:
            page = await follower.next_page(timeout)
            seen.append(None if page is None else (messages_of(page), page.next_after_seq - start))

        await store.faults.record_startup_fault("b", "b-1")
        await next_page(LONG_S)  # the first page moves the cursor past b's event at once
        await store.faults.record_startup_fault("b", "b-2")
        await next_page(0.2)  # b's events alone do not wake it (until its next sweep)
        task = asyncio.create_task(next_page(LONG_S))
        await asyncio.sleep(0.05)
        await store.faults.record_startup_fault("a", "a-1")  # its own event: at once
        await task
        await asyncio.sleep(SWEEP_S * 1.5 + 0.1)
        await store.faults.record_startup_fault("b", "b-3")
        await next_page(LONG_S)  # by its next sweep, the cursor moves past b-3
        follower.close()
        return seen

    assert scenario(migrated_url, body) == [([], 1), None, (["a-1"], 3), ([], 4)]


def messages_of(page: Any) -> list[str]:
    return [event.event.message for event in page.events]


def test_idle_followers_of_one_session_wait_without_polling(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    polls: list[int] = []
    poll = AsyncFollower._poll

    async def counted(self: AsyncFollower, generation: int, events_only: bool) -> Any:
        polls.append(1)
        return await poll(self, generation, events_only)

    monkeypatch.setattr(AsyncFollower, "_poll", counted)

    async def body(store: AsyncStore) -> int:
        await store.sessions.save(SessionFactory.build(id="a"))
        followers = [await store.events.follow(ApiEventFilter(session_id="a")) for _ in range(20)]
        tasks = [asyncio.create_task(follower.next_page(0.4)) for follower in followers]
        assert await asyncio.gather(*tasks) == [None] * 20  # nothing committed: no page
        return len(polls)

    # A read at the start, and at most one or two more each (the first routing of the loop,
    # which cannot tell whose events are new, wakes every follower once): not one per ms.
    assert scenario(migrated_url, body) <= 3 * 20


def test_a_failed_read_of_the_window_reaches_the_followers_of_a_session(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from session_journal import TransientStorageError
    from session_journal.follow.window import SharedTail

    async def body(store: AsyncStore) -> None:
        await store.sessions.save(SessionFactory.build(id="a"))
        follower = await store.events.follow(ApiEventFilter(session_id="a"))
        task = asyncio.create_task(follower.next_page(LONG_S))
        await until(lambda: follower.waiter is not None)
        # Nothing reads the window now: PostgreSQL's listener pulsed when its LISTEN began (a
        # read of the window that starts before the patch below would succeed).
        await listening(store)
        waiters = store.following.fanout()
        await until(lambda: waiters._routing is None and follower.waiter is not None)

        def unreachable(self: SharedTail, generation: int) -> None:
            raise TransientStorageError("read the followers' window failed: server gone")

        monkeypatch.setattr(SharedTail, "_refresh", unreachable)
        await asyncio.to_thread(store.sync.faults.record_startup_fault, "a", "lost?")
        with pytest.raises(TransientStorageError, match="server gone"):
            async with asyncio.timeout(LONG_S):
                await task

    scenario(migrated_url, body)


def test_closing_an_async_view_ends_its_followers_and_waits(migrated_url: str) -> None:
    from session_journal import Store

    with Store.open(migrated_url) as sync_store:
        sync_store.sessions.save(SessionFactory.build(id="a"))

        async def main() -> tuple[list[Any], type[BaseException]]:
            view = AsyncStore.from_store(sync_store)
            follower = await view.events.follow(ApiEventFilter(session_id="a"))
            following = asyncio.create_task(_collect(follower))
            waiting = asyncio.create_task(
                view.events.wait(ApiEventFilter(session_id="a"), timeout=LONG_S)
            )
            await asyncio.sleep(0.1)
            await view.close()
            async with asyncio.timeout(LONG_S):
                pages = await following
                (error,) = await asyncio.gather(waiting, return_exceptions=True)
            assert isinstance(error, BaseException)
            return pages, type(error)

        assert asyncio.run(main()) == ([], StoreClosed)
        assert sync_store.faults.record_startup_fault("a", "the sync store is still open")


def test_event_loops_that_are_gone_are_forgotten(migrated_url: str) -> None:
    import gc

    from session_journal import Store

    with Store.open(migrated_url) as sync_store:
        sync_store.sessions.save(SessionFactory.build(id="a"))
        store = AsyncStore.from_store(sync_store)

        async def cycle() -> None:
            follower = await store.events.follow(ApiEventFilter(session_id="a"))
            assert await follower.next_page(0.01) is None
            follower.close()

        for _ in range(20):
            asyncio.run(cycle())
        sync_store.faults.record_startup_fault("a", "a commit tells the loops that are gone")
        gc.collect()
        signal = sync_store.following.signal
        assert (len(signal._listeners), len(store.following._fanouts)) == (0, 0)
        asyncio.run(store.close())


def test_a_url_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRecord, match="the database URL must be a string, got int"):
        asyncio.run(AsyncStore.open(5))  # type: ignore[arg-type]


def test_a_follower_of_one_session_moves_past_later_events_of_others_by_its_sweep(
    migrated_url: str,
) -> None:
    # Its own event first, others' after it: the page of its event stops there, and by its
    # next sweep (with nothing committed meanwhile) an empty page moves the cursor to the
    # frontier, as a sync follower's next page does at once.
    async def body(store: AsyncStore) -> list[tuple[list[str], int] | None]:
        for session_id in ("a", "b"):
            await store.sessions.save(SessionFactory.build(id=session_id))
        start = await store.events.latest_seq()
        follower = await store.events.follow(ApiEventFilter(session_id="a"), after_seq=start)
        await store.faults.record_startup_fault("a", "a-1")
        await store.faults.record_startup_fault("b", "b-1")
        await store.faults.record_startup_fault("b", "b-2")
        seen: list[tuple[list[str], int] | None] = []
        for _ in range(2):
            page = await follower.next_page(SWEEP_S * 1.5 + 5)  # well before the 60 s re-read
            seen.append(None if page is None else (messages_of(page), page.next_after_seq - start))
        follower.close()
        return seen

    assert scenario(migrated_url, body) == [(["a-1"], 1), ([], 3)]


def test_the_fanout_wakes_only_the_registrations_with_something_new(migrated_url: str) -> None:
    from session_journal import ApiActivityState

    async def body(store: AsyncStore) -> list[set[str]]:
        for session_id in ("a", "b"):
            await store.sessions.save(SessionFactory.build(id=session_id))
        fanout = store.following.fanout()
        filters = {
            "a": ApiEventFilter(session_id="a"),
            "b": ApiEventFilter(session_id="b"),
            "a's faults": ApiEventFilter(session_id="a", types=("session_fault",)),
            "faults": ApiEventFilter(types=("session_fault",)),
            "activity": ApiEventFilter(types=("activity_changed",)),
            "every event": ApiEventFilter(),
        }
        # A first routing cannot tell what is new (nothing was routed before): let it pass.
        first = fanout.register(ApiEventFilter())
        await store.faults.record_startup_fault("b", "before")
        await asyncio.wait_for(first, LONG_S)
        fanout.unregister(ApiEventFilter(), first)
        await listening(store)
        woken = []
        for commit in (
            store.faults.record_startup_fault("a", "a fault"),
            store.activity.record([("b", activity_state())], 5),
        ):
            waiters = {name: fanout.register(wanted) for name, wanted in filters.items()}
            await commit
            await asyncio.wait_for(waiters["every event"], LONG_S)
            await asyncio.sleep(0.2)  # the other wake-up of the commit (the source's) is over
            woken.append({name for name, waiter in waiters.items() if waiter.done()})
            for name, waiter in waiters.items():
                fanout.unregister(filters[name], waiter)
        return woken

    def activity_state() -> ApiActivityState:
        from session_journal import ApiActivityDetails, ApiActivityKind

        return ApiActivityState(
            state="turn",
            details=ApiActivityDetails(kind=ApiActivityKind.TURN, turn_started_at_ms=5),
            is_idle=False,
            waiting_for_input=False,
            capacity_retry=False,
        )

    assert scenario(migrated_url, body) == [
        {"a", "a's faults", "faults", "every event"},
        {"b", "activity", "every event"},
    ]


def test_the_fanout_spaces_its_reads_by_what_the_last_one_woke(migrated_url: str) -> None:
    # A read that woke one of a thousand registrations (followers of a thousand sessions) lets
    # the next follow at once; one that woke all thousand (streams of the whole log) holds the
    # next off for 10 ms, so that what commits meanwhile joins one wake-up.
    async def body(store: AsyncStore) -> list[float]:
        await store.sessions.save(SessionFactory.build(id="a"))
        fanout = store.following.fanout()
        await listening(store)  # the source's first pulse is behind us
        first = fanout.register(ApiEventFilter())  # a first routing wakes every registration
        await store.faults.record_startup_fault("a", "before")
        await asyncio.wait_for(first, LONG_S)
        fanout.unregister(ApiEventFilter(), first)
        spacings = []
        for filters in (
            [ApiEventFilter(session_id=f"s{n}") for n in range(999)]
            + [ApiEventFilter(session_id="a")],
            [ApiEventFilter()] * 1000,
        ):
            waiters = [fanout.register(wanted) for wanted in filters]
            await store.faults.record_startup_fault("a", "new")
            await asyncio.wait_for(waiters[-1], LONG_S)
            spacings.append(fanout.spacing())  # the next read needs a worker: not yet made
            for wanted, waiter in zip(filters, waiters, strict=True):
                fanout.unregister(wanted, waiter)
        return spacings

    assert scenario(migrated_url, body) == [PER_WAITER_S, SPACING_S]


def test_the_fanout_hears_other_stores_commits_with_no_follower(migrated_url: str) -> None:
    # No follower or wait started the source of other processes' commits: the fan-out does, so
    # that a registration (an HTTP stream's) learns of another store's commit.
    from session_journal import Store

    async def body(store: AsyncStore) -> None:
        await store.sessions.save(SessionFactory.build(id="a"))
        fanout = store.following.fanout()
        await fanout.refresh(fanout.signal.generation)
        before = fanout.window.hi
        wanted = ApiEventFilter(session_id="a")
        waiter = fanout.register(wanted)
        rows: list[Row] = []
        try:
            await listening(store)
            with Store.open(migrated_url) as other:
                await asyncio.to_thread(other.faults.record_startup_fault, "a", "elsewhere")
            async with asyncio.timeout(LONG_S):
                # A wake-up with nothing new is allowed (the first routing wakes every
                # registration, and the listener's first pulse may come late): wait again, as a
                # stream does, until the window holds the other store's event.
                while not rows:
                    await waiter
                    fanout.unregister(wanted, waiter)
                    rows = fanout.window.rows_after(before) or []
                    waiter = fanout.register(wanted)
        finally:
            fanout.unregister(wanted, waiter)
        assert [row[3].event.message for row in rows] == ["elsewhere"]

    scenario(migrated_url, body)


def test_with_no_window_a_follower_of_one_session_is_woken_by_each_commit(
    migrated_url: str,
) -> None:
    from session_journal import StoreOptions

    async def body(store: AsyncStore) -> list[str]:
        await store.sessions.save(SessionFactory.build(id="a"))
        got = []
        async with store.events.follow(ApiEventFilter(session_id="a")) as follower:
            for n in range(3):
                task = asyncio.create_task(follower.next_page(LONG_S, events_only=True))
                await until(lambda: follower.waiter is not None)
                await store.faults.record_startup_fault("a", f"fault {n}")
                page = await task
                assert page is not None
                got += [event.event.message for event in page.events]
        return got

    options = StoreOptions(follow_window_events=0)
    assert scenario(migrated_url, body, options=options) == ["fault 0", "fault 1", "fault 2"]


def test_follow_on_a_closed_async_store_is_refused_at_the_call(migrated_url: str) -> None:
    async def main() -> None:
        store = await AsyncStore.open(migrated_url)
        await store.close()
        with pytest.raises(StoreClosed):
            store.events.follow()

    asyncio.run(main())
