"""A follower checks its cursor when it starts, before its first page, so that a server can
answer 410 (`CursorExpired`) or 409 (`CursorAhead`) before its response begins: the sync
`follow()` at the call, the async one at its first `await`, `async with` or `__anext__`. The
async follower is awaitable, an async iterator and an async context manager, and `follow`
itself is a plain call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from session_journal import (
    ApiEventFilter,
    AsyncStore,
    CursorAhead,
    CursorExpired,
    InvalidRecord,
    Store,
)
from session_journal.aio import AsyncFollower
from session_journal.follow.following import Following
from tests.factories import SessionFactory

pytestmark = pytest.mark.filterwarnings("error")  # no "coroutine ... was never awaited"


@pytest.fixture
def pruned(store: Store) -> Iterator[Store]:
    """Seqs 1 to 4 appended, 1 and 2 pruned: the floor is 2, the frontier 4."""
    store.sessions.save(SessionFactory(id="s"))
    for n in range(4):
        store.faults.record_startup_fault("s", f"fault {n}")
    assert store.events.prune(through_seq=2) == 2
    yield store


def seqs(page: Any) -> list[int]:
    return [event.seq for event in page.events]


def test_a_sync_follower_refuses_its_cursor_at_the_call(pruned: Store) -> None:
    with pytest.raises(CursorExpired) as expired:
        pruned.events.follow(after_seq=1)
    assert (expired.value.cursor, expired.value.pruned_through) == (1, 2)
    with pytest.raises(CursorAhead, match="after_seq 9 is above the frontier 4"):
        pruned.events.follow(after_seq=9)
    with pruned.events.follow(after_seq=2) as follower:  # at the floor, and 0: they read on
        assert (follower.cursor, seqs(next(follower))) == (2, [3, 4])
    with pruned.events.follow(after_seq=0) as follower:
        assert seqs(next(follower)) == [3, 4]
    with pruned.events.follow() as follower:
        assert follower.cursor == 4


def in_async(store: Store, scenario: Callable[[AsyncStore], Awaitable[None]]) -> None:
    async def run() -> None:
        view = AsyncStore.from_store(store)
        try:
            await scenario(view)
        finally:
            await view.close()

    asyncio.run(run())


def test_an_async_follower_is_awaited_entered_or_iterated(pruned: Store) -> None:
    async def scenario(store: AsyncStore) -> None:
        async for page in store.events.follow(after_seq=2):
            assert seqs(page) == [3, 4]
            break
        async with store.events.follow(ApiEventFilter(session_id="s"), after_seq=0) as follower:
            assert (follower.cursor, seqs(await follower.__anext__())) == (0, [3, 4])
        assert follower.closed  # by `async with`
        follower = await store.events.follow(after_seq=3)
        async with follower:
            assert seqs(await follower.__anext__()) == [4]

    in_async(pruned, scenario)


def test_an_async_followers_cursor_before_it_starts(pruned: Store) -> None:
    async def scenario(store: AsyncStore) -> None:
        at_frontier = store.events.follow()
        assert at_frontier.cursor is None  # the frontier, read when it starts
        pruned.faults.record_startup_fault("s", "fault 4")  # seq 5, before it starts
        async with at_frontier:
            assert at_frontier.cursor == 5
        given = store.events.follow(after_seq=3)
        assert given.cursor == 3
        given.close()

    in_async(pruned, scenario)


START: dict[str, Callable[[AsyncFollower], Awaitable[Any]]] = {
    "await": lambda follower: _awaited(follower),
    "async with": lambda follower: _entered(follower),
    "__anext__": lambda follower: follower.__anext__(),
    "next_page": lambda follower: follower.next_page(0),
}


async def _awaited(follower: AsyncFollower) -> AsyncFollower:
    return await follower


async def _entered(follower: AsyncFollower) -> None:
    async with follower:
        raise AssertionError("entered")


@pytest.mark.parametrize("start", list(START))
def test_an_async_follower_refuses_its_cursor_when_it_starts(pruned: Store, start: str) -> None:
    async def scenario(store: AsyncStore) -> None:
        expired = store.events.follow(after_seq=1)  # a plain call: nothing read yet
        with pytest.raises(CursorExpired) as refused:
            await START[start](expired)
        assert (refused.value.cursor, refused.value.pruned_through) == (1, 2)
        assert expired.closed
        with pytest.raises(StopAsyncIteration):  # closed: it gives nothing more
            await expired.__anext__()
        ahead = store.events.follow(after_seq=9)
        with pytest.raises(CursorAhead, match="above the frontier 4"):
            await START[start](ahead)

    in_async(pruned, scenario)


def test_a_server_answers_an_expired_cursor_before_its_response_starts(pruned: Store) -> None:
    """The shape of an SSE endpoint: start the follower, then send the status line."""
    sent: list[tuple[int, list[int]]] = []

    async def stream(store: AsyncStore, after_seq: int) -> None:
        try:
            follower = await store.events.follow(after_seq=after_seq)
        except CursorExpired:
            sent.append((410, []))
            return
        async with follower:
            sent.append((200, seqs(await follower.__anext__())))

    async def scenario(store: AsyncStore) -> None:
        await stream(store, 1)
        await stream(store, 2)

    in_async(pruned, scenario)
    assert sent == [(410, []), (200, [3, 4])]


def test_bad_arguments_are_refused_at_the_call(pruned: Store) -> None:
    async def scenario(store: AsyncStore) -> None:
        with pytest.raises(InvalidRecord, match="filter"):
            store.events.follow({"session_id": "s"})  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord, match="after_seq"):
            store.events.follow(after_seq="3")  # type: ignore[arg-type]

    in_async(pruned, scenario)
    with pytest.raises(InvalidRecord, match="limit"):
        pruned.events.follow(after_seq=1, limit="ten")  # type: ignore[arg-type]


def test_a_start_cut_short_by_a_timeout_can_start_again(
    pruned: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_cursor = Following.start_cursor

    def slow(self: Following, after_seq: int | None) -> int:
        time.sleep(0.3)
        return start_cursor(self, after_seq)

    monkeypatch.setattr(Following, "start_cursor", slow)

    async def scenario(store: AsyncStore) -> None:
        follower = store.events.follow(after_seq=2)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await follower
        assert not follower.closed  # not refused: it starts again
        async with follower:
            assert seqs(await follower.__anext__()) == [3, 4]

    in_async(pruned, scenario)


def test_two_tasks_starting_one_follower_start_it_once(
    pruned: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int | None] = []
    start_cursor = Following.start_cursor

    def slow(self: Following, after_seq: int | None) -> int:
        calls.append(after_seq)
        time.sleep(0.2)
        return start_cursor(self, after_seq)

    monkeypatch.setattr(Following, "start_cursor", slow)

    async def scenario(store: AsyncStore) -> None:
        follower = store.events.follow()
        first = asyncio.ensure_future(follower.__anext__())
        await asyncio.sleep(0.05)
        async with follower:  # a second start while the first runs: it waits for it
            pruned.faults.record_startup_fault("s", "fault 4")  # seq 5
            page = await asyncio.wait_for(first, 10)
            assert seqs(page) == [5]
            assert follower.cursor == 5

    in_async(pruned, scenario)
    assert calls == [None]
