"""Following the log on an event loop: `AsyncFollower`, and `AsyncFollowing`, the loop side of
a store's `Following` for one async store (its followers, and the `Fanout` of each loop). Only
reads of the database go to a thread (`fanout.Runner`: the async store's workers)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections.abc import AsyncIterator, Generator
from types import TracebackType
from typing import Any

from ..api_events import ApiEventFilter, ApiEventPage
from ..errors import SessionJournalError, StoreClosed
from .fanout import Fanout, Runner, Waiter
from .follower import Unanswered
from .following import Following, Load
from .wakeups import CommitSignal

SWEEP_S = 1.0
"""An async follower of one session returns an empty page that moves its cursor past other
sessions' events at most this often (its own events come as soon as they commit)."""


class AsyncFollowing:
    """The loop side of a store's `Following` for one async store (`async_store.following`):
    the followers it made (to end when it closes) and, for each event loop, its `Fanout`, whose
    reads of the window run on the async store's `runner`."""

    def __init__(self, following: Following, runner: Runner) -> None:
        self.following = following
        """The store's `Following`."""
        self.runner = runner
        """The async store's workers."""
        self.followers: weakref.WeakSet[AsyncFollower] = weakref.WeakSet()
        self._fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Fanout] = (
            weakref.WeakKeyDictionary()
        )

    def fanout(self) -> Fanout:
        """The `Fanout` of the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        fanout = self._fanouts.get(loop)
        if fanout is None:
            following = self.following
            # The source of other processes' commits runs from the first task that waits.
            signal = following.watched_signal()
            fanout = Fanout(signal, following.window, loop, self.runner)
            self._fanouts[loop] = fanout
        return fanout

    def close(self) -> None:
        """End every follower made through it, and wake every task waiting in a `Fanout` of
        it, which then finds the async store closed (`runner.closed`)."""
        for follower in list(self.followers):
            follower.close()
        for fanout in list(self._fanouts.values()):
            fanout.wake_all()


class AsyncFollower(AsyncIterator[ApiEventPage]):
    """Pages of the log as they commit (`async_store.events.follow`): an async iterator
    (`async for page in follower`), an async context manager (`async with ... as follower`,
    which closes it) and awaitable (`follower = await ...`). While it waits it holds no
    thread: the store's commit signal wakes it on the event loop, and only the read of a page
    runs on a worker. `close()` ends it; so does closing the store.

    It starts at the first of `await`, `__aenter__`, `__anext__` and `next_page`: one statement
    on a worker checks the cursor (`CursorExpired`, `CursorAhead`, raised there, and the
    follower is closed), or, made with `after_seq=None`, reads the frontier it starts from."""

    def __init__(
        self,
        side: AsyncFollowing,
        load: Load,
        event_filter: ApiEventFilter | None,
        after_seq: int | None,
        limit: int,
        *,
        started: bool = False,
        strict: bool = False,
    ) -> None:
        """Prefer `async_store.events.follow`. `side` is the async store's `AsyncFollowing`,
        `load` reads a page from the database (`store.events.load`); `started`: `after_seq`
        is checked already; `strict`: a durable consumer's follower (see `Follower`)."""
        self._side = side
        following = side.following
        self._following = following
        self._follower = following.follower(
            load, event_filter, after_seq or 0, limit, strict=strict, started=started
        )
        self._after_seq = after_seq
        self._started = started  # whether the cursor is checked (or, for None, read)
        self._start_lock = asyncio.Lock()
        self._filter = event_filter or ApiEventFilter()
        self._runner = side.runner
        self._signal: CommitSignal = following.signal
        self._next_sweep = 0.0  # a session follower returns an empty page no sooner
        self.waiter: Waiter | None = None  # what it waits on, for `close()`
        self._loop: asyncio.AbstractEventLoop | None = None
        side.followers.add(self)

    @property
    def cursor(self) -> int | None:
        """The `next_after_seq` of the last page returned; before the follower starts (see the
        class), the `after_seq` it was made with: `None` for the frontier, until it starts and
        reads it."""
        return self._follower.cursor if self._started else self._after_seq

    async def _start(self) -> None:
        """Check the cursor (or read the frontier) once, on a worker; a refused cursor closes
        the follower. A closed follower does not start: it has nothing more to give."""
        async with self._start_lock:  # one start: a second caller waits for the first
            if self._started or self.closed:
                return
            start = self._following.start_cursor
            try:
                cursor = await self._runner.run(start, self._after_seq)
            except SessionJournalError:  # refused (or the store closed): it gives no more
                self.close()
                raise
            # Cancelled or timed out: not started, and may start again.
            self._follower.cursor, self._started = cursor, True
            self._following.started()

    def __await__(self) -> Generator[Any, None, AsyncFollower]:
        return self.__aenter__().__await__()

    @property
    def last_read(self) -> ApiEventPage | None:
        """The last page read, returned or not."""
        return self._follower.last_read

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._follower.closed

    @property
    def store_closed(self) -> bool:
        """Whether the store (or the async view it was made by) closed: the follower ended
        with it."""
        return self._signal.closed or self._runner.closed

    def __aiter__(self) -> AsyncFollower:
        return self

    async def __anext__(self) -> ApiEventPage:
        while True:
            try:
                page = await self.next_page(None)
            except StoreClosed:
                raise StopAsyncIteration from None
            if page is not None:
                return page
            if self.closed or self.store_closed:
                raise StopAsyncIteration

    async def next_page(
        self, timeout: float | None, *, events_only: bool = False
    ) -> ApiEventPage | None:
        """As `Follower.next_page`, awaited: the next page, or `None` when `timeout` seconds
        passed first (`None`: no limit), or the follower or the store closed. A follower of one
        session returns an empty page (its cursor moved past other sessions' events) at most
        once per `SWEEP_S`, and pages with its events as soon as they commit."""
        self._loop = asyncio.get_running_loop()
        deadline = None if timeout is None else time.monotonic() + timeout
        await self._start()
        if self._filter.session_id is not None:  # woken by that session's events only
            return await self._next_of_session(deadline, events_only)
        follower, signal = self._follower, self._signal
        while not follower.closed and not self.store_closed:
            generation = signal.generation  # before the read: a later commit moves it
            page = await self._poll(generation, events_only)
            if page is not None:
                return page
            left = follower.wait_left(deadline)
            if left <= 0:
                return None
            await self._fanout().wait_past(generation, left, lambda: follower.closed, self)
        return None

    async def _next_of_session(
        self, deadline: float | None, events_only: bool
    ) -> ApiEventPage | None:
        follower, signal = self._follower, self._signal
        fanout = self._fanout()
        # The generation the next read must reflect (the window is read again first when it is
        # older, once for all the loop's tasks): the signal's at the call and after a wait that
        # timed out, so that a commit (a prune, a delete) that moved the signal before is in
        # the page even if the loop has not routed it yet; after a wake-up by the routing, the
        # generation of the window it read, which holds every commit that woke this follower.
        generation: int | None = signal.generation
        while not follower.closed and not self.store_closed:
            # Registered before the read: an event committed after the read wakes it.
            waiter = self.waiter = fanout.register(self._filter)
            try:
                if generation is None:
                    generation = signal.generation
                now = time.monotonic()
                sweep = not events_only and now >= self._next_sweep
                page = await self._poll(generation, not sweep)
                if sweep or page is not None:  # the next sweep: spread, so followers differ
                    self._next_sweep = now + SWEEP_S * (0.5 + random.random())
                if page is not None:
                    return page
                left = follower.wait_left(deadline)
                if not events_only:  # back by the next sweep, to move the cursor
                    left = min(left, self._next_sweep - time.monotonic())
                generation = None  # unless the routing wakes it
                if left <= 0:
                    if deadline is not None and time.monotonic() >= deadline:
                        return None
                    continue
                try:
                    async with asyncio.timeout(left):
                        # Raises the error of a failed read of the window.
                        generation = await waiter
                except TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        return None
            finally:
                fanout.unregister(self._filter, waiter)
                self.waiter = None
                if waiter.done() and not waiter.cancelled():
                    waiter.exception()  # a failed read it did not wait for: seen, not logged
        return None

    async def _poll(self, generation: int, events_only: bool) -> ApiEventPage | None:
        """`Follower.poll` without blocking the loop: from the shared window in memory (read
        again first, once for all the loop's tasks, when it is behind), else on a worker."""
        follower = self._follower
        page = follower.poll_in_memory(generation, events_only=events_only)
        checked = False
        while page is Unanswered.WINDOW_BEHIND or (page is Unanswered.UNCHECKED and not checked):
            if page is Unanswered.UNCHECKED:  # once: a check found it current or read it
                await self._fanout().verify()
                checked = True
            else:
                await self._fanout().refresh(generation)
            page = follower.poll_in_memory(generation, events_only=events_only)
        if page is Unanswered.DATABASE or page is Unanswered.UNCHECKED:
            return await self._runner.run(follower.poll, generation, events_only=events_only)
        return page

    def _fanout(self) -> Fanout:
        return self._side.fanout()

    def close(self) -> None:
        """End the iteration (a `next_page` in progress returns `None`); from any thread."""
        self._follower.close()
        waiter, loop = self.waiter, self._loop
        if waiter is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits
                loop.call_soon_threadsafe(_set_if_pending, waiter)

    async def aclose(self) -> None:
        """`close()`, for `contextlib.aclosing`."""
        self.close()

    async def __aenter__(self) -> AsyncFollower:
        await self._start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _set_if_pending(waiter: Waiter) -> None:
    if not waiter.done():
        waiter.set_result(None)
