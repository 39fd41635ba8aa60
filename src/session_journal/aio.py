"""`AsyncStore`: the whole store from asyncio code, without blocking the event loop.

**The design: workers, not an async driver.** The services run unchanged (the same checks,
rules, errors and group commit) on a pool of worker threads that belongs to the async store; a
coroutine hands its call to the pool and awaits the result, so the event loop's thread never
waits on the disk, the network or a lock held across I/O. Concurrent calls of many tasks meet on
the write path exactly as the calls of threads do and form group commits; the pool's size
(`threads`, 32 by default) bounds how many calls are in flight at once (a call beyond it waits,
in memory, for a worker). Why workers rather than SQLAlchemy's asyncio extension: the write
path, its savepoints and its one commit per batch are shared with the sync `Store`, so a sync and
an async store in one process share one write path (`AsyncStore.from_store`), and
SQLAlchemy's asyncio extension runs its sync core in greenlets on top of the same drivers anyway
(`aiosqlite` is itself a thread per connection). The figures are in the README.

**Waiting costs no thread.** `events.wait` and `events.follow` wait for the store's commit
signal (`wakeups.CommitSignal`) on the event loop: the signal calls the loop back (one
`call_soon_threadsafe` per move, however many tasks wait) and only the read of a page goes to a
worker.

**Cancellation.** Cancelling a task that awaits a write withdraws the call if no batch took it
yet: it is never written. A call already in a batch runs to the end and may commit, as with any
database client whose request reached the server. Cancelling a `wait` or a `follow` releases
everything it held (its registration with the signal; a page read in flight finishes in its
worker and is dropped).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import time
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from .api_events import ApiEventFilter, ApiEventPage
from .arguments import Given, Int64, validate_arguments
from .config import StoreOptions
from .errors import InvalidRecord, StoreClosed
from .services.activity import ActivityService
from .services.checkpoints import CheckpointService
from .services.events import EventService, Follower, _timeout, page_size
from .services.faults import FaultService
from .services.index import ProjectIndex
from .services.projection import ProjectionService
from .services.sessions import SessionService
from .store import Store
from .unit_of_work import UnitOfWork
from .wakeups import CommitSignal
from .write_path import WITHDRAWAL, Withdrawal

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S")

DEFAULT_THREADS = 32
"""The worker threads of an `AsyncStore` unless `threads=` says otherwise."""
MAX_THREADS = 1024
"""The most worker threads an `AsyncStore` may have."""


class _Workers:
    """The worker threads of one async store, and how a coroutine runs a call on them."""

    def __init__(self, threads: object) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise InvalidRecord(f"threads must be an integer, got {type(threads).__name__}")
        if not 1 <= threads <= MAX_THREADS:
            raise InvalidRecord(f"threads must be from 1 to {MAX_THREADS}, got {threads}")
        self.threads = threads
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="session-journal async"
        )
        self._loop_waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaiters] = (
            weakref.WeakKeyDictionary()
        )
        self._refreshing: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[int, asyncio.Future[None]]
        ] = weakref.WeakKeyDictionary()

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a worker. Cancelled: not started, it never runs; queued on
        the write path, it is withdrawn (`write_path.Withdrawal`); running, it finishes there."""
        withdrawal = Withdrawal()
        context = contextvars.copy_context()
        context.run(WITHDRAWAL.set, withdrawal)
        try:
            future = self._pool.submit(context.run, functools.partial(fn, *args, **kwargs))
        except RuntimeError:  # the pool was shut down: the store is closed
            raise StoreClosed(f"{getattr(fn, '__name__', 'call')}: the store is closed") from None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # not started yet: it never runs
            withdrawal.cancel()  # queued on the write path: it never commits
            raise

    async def refresh(self, follower: Follower, generation: int) -> None:
        """Bring the followers' shared window up to `generation` on a worker; the tasks of this
        loop that ask meanwhile await the same read instead of starting their own."""
        loop = asyncio.get_running_loop()
        pending = self._refreshing.get(loop)
        if pending is None or pending[0] < generation or pending[1].done():
            future = asyncio.ensure_future(self.run(follower.refresh_window, generation))
            pending = self._refreshing[loop] = (generation, future)
        # Shielded: a waiter cancelled must not cancel the read the others await.
        await asyncio.shield(pending[1])

    def waiters(self, signal: CommitSignal) -> _LoopWaiters:
        """The waiters of the running loop on `signal` (made on first use)."""
        loop = asyncio.get_running_loop()
        waiters = self._loop_waiters.get(loop)
        if waiters is None:
            waiters = self._loop_waiters[loop] = _LoopWaiters(signal, loop)
        return waiters

    def shutdown(self) -> None:
        """Let the calls already handed over finish (each sees the closed store), then stop."""
        self._pool.shutdown(wait=False)


class _Service(Generic[S]):
    """An async view of one service of a `Store`: the same methods, awaitable."""

    def __init__(self, service: S, workers: _Workers) -> None:
        self._service = service
        self._workers = workers


def _awaitable(
    method: Callable[Concatenate[S, P], T],
) -> Callable[Concatenate[_Service[S], P], Coroutine[Any, Any, T]]:
    """The async form of a service method: the sync method run on a worker."""
    name = method.__name__

    async def call(self: _Service[S], /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, T] = getattr(self._service, name)
        return await self._workers.run(bound, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Awaitable `{method.__qualname__}`: {method.__doc__ or ''}"
    return call


class AsyncSessionService(_Service[SessionService]):
    """`async_store.sessions`: `SessionService`, awaitable."""

    save = _awaitable(SessionService.save)
    save_lifecycle = _awaitable(SessionService.save_lifecycle)
    get = _awaitable(SessionService.get)
    list = _awaitable(SessionService.list)
    delete = _awaitable(SessionService.delete)
    remove_ended = _awaitable(SessionService.remove_ended)


class AsyncActivityService(_Service[ActivityService]):
    """`async_store.activity`: `ActivityService`, awaitable."""

    record = _awaitable(ActivityService.record)
    get = _awaitable(ActivityService.get)


class AsyncFaultService(_Service[FaultService]):
    """`async_store.faults`: `FaultService`, awaitable."""

    record_startup_fault = _awaitable(FaultService.record_startup_fault)


class AsyncCheckpointService(_Service[CheckpointService]):
    """`async_store.checkpoints`: `CheckpointService`, awaitable."""

    begin = _awaitable(CheckpointService.begin)
    correlate_barrier = _awaitable(CheckpointService.correlate_barrier)
    save_requested = _awaitable(CheckpointService.save_requested)
    finish_failed = _awaitable(CheckpointService.finish_failed)
    recover_interrupted = _awaitable(CheckpointService.recover_interrupted)
    get = _awaitable(CheckpointService.get)


class AsyncProjectionService(_Service[ProjectionService]):
    """`async_store.projection`: `ProjectionService`, awaitable."""

    apply = _awaitable(ProjectionService.apply)
    load = _awaitable(ProjectionService.load)


class AsyncProjectIndex(_Service[ProjectIndex]):
    """`async_store.index`: `ProjectIndex`, awaitable."""

    insert = _awaitable(ProjectIndex.insert)
    search = _awaitable(ProjectIndex.search)
    rebuild = _awaitable(ProjectIndex.rebuild)


class AsyncFollower(AsyncIterator[ApiEventPage]):
    """Pages of the log as they commit, for `async for` (`async_store.events.follow`). While it
    waits it holds no thread: the store's commit signal wakes it on the event loop, and only
    the read of a page runs on a worker. `close()` (or `async with`) ends it; so does closing
    the store."""

    def __init__(self, follower: Follower, workers: _Workers) -> None:
        self._follower = follower
        self._workers = workers
        self._signal: CommitSignal = follower._signal

    @property
    def cursor(self) -> int:
        """The `next_after_seq` of the last page returned."""
        return self._follower.cursor

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
        """Whether the store closed (the follower ended with it)."""
        return self._signal.closed

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
        passed first (`None`: no limit), or the follower or the store closed."""
        follower, signal = self._follower, self._signal
        deadline = None if timeout is None else time.monotonic() + timeout
        while not follower.closed and not signal.closed:
            generation = signal.generation  # before the read: a later commit moves it
            page = follower.poll_in_memory(generation, events_only=events_only)
            if page is False:  # the window is behind: one read for every task of the loop
                await self._workers.refresh(follower, generation)
                page = follower.poll_in_memory(generation, events_only=events_only)
            found = (  # when the window cannot answer, the database does, on a worker
                await self._workers.run(follower.poll, generation, events_only=events_only)
                if page is False
                else page
            )
            if found is not None:
                return found
            left = follower.wait_left(deadline)
            if left <= 0:
                return None
            await self._workers.waiters(signal).wait_past(generation, left, follower)
        return None

    def close(self) -> None:
        """End the iteration (a `next_page` in progress returns `None`)."""
        self._follower.close()

    async def aclose(self) -> None:
        """`close()`, for `contextlib.aclosing`."""
        self.close()

    async def __aenter__(self) -> AsyncFollower:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncEventService(_Service[EventService]):
    """`async_store.events`: `load` and `latest_seq` awaitable; `wait` awaits a commit without
    holding a thread; `follow` is an async iterator (`AsyncFollower`)."""

    load = _awaitable(EventService.load)
    latest_seq = _awaitable(EventService.latest_seq)
    pruned_through = _awaitable(EventService.pruned_through)
    plan_prune = _awaitable(EventService.plan_prune)
    prune = _awaitable(EventService.prune)

    @validate_arguments()
    async def wait(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        timeout: object,
    ) -> ApiEventPage:
        """`EventService.wait`, awaited: the same arguments, rules and errors."""
        seconds = _timeout(timeout)
        cursor = await self.latest_seq() if after_seq is None else after_seq
        follower = self._follower(filter, cursor, limit)
        try:
            page = await follower.next_page(seconds, events_only=True)
        finally:
            follower.close()
        if page is not None:
            return page
        last = follower.last_read
        if last is None or follower.store_closed:
            raise StoreClosed("wait for events: the store was closed")
        return last  # empty; its cursor follows `load`'s rules

    @validate_arguments()
    async def follow(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
    ) -> AsyncFollower:
        """`EventService.follow`, as an `AsyncFollower` (`async for page in ...`)."""
        cursor = await self.latest_seq() if after_seq is None else after_seq
        return self._follower(filter, cursor, limit)

    def _follower(
        self, event_filter: ApiEventFilter | None, cursor: int, limit: int
    ) -> AsyncFollower:
        return AsyncFollower(
            Follower(self._service, event_filter, cursor, page_size(limit)), self._workers
        )


class _LoopWaiters:
    """The tasks of one event loop waiting on one commit signal: the signal calls back once per
    move (`call_soon_threadsafe`, coalesced while a wake-up is pending), and the loop wakes them
    all, whatever their number."""

    def __init__(self, signal: CommitSignal, loop: asyncio.AbstractEventLoop) -> None:
        self._signal = signal
        self._loop = weakref.ref(loop)  # the store's registry of loops must not keep one alive
        self._waiters: set[asyncio.Future[None]] = set()
        self._scheduled = False
        signal.add_listener(self._told)

    def _told(self) -> None:  # any thread, with the signal's lock held
        if self._scheduled:
            return  # the pending wake-up will see every waiter registered until it runs
        self._scheduled = True
        loop = self._loop()
        try:
            if loop is None:
                raise RuntimeError("the loop is gone")
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: nobody of it waits any more
            self._signal.remove_listener(self._told)

    def _wake(self) -> None:  # on the loop
        self._scheduled = False
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_past(self, generation: int, timeout: float, follower: Follower) -> None:
        """Until the signal moves past `generation` or closes, `follower` closes, or `timeout`
        seconds pass."""
        signal = self._signal
        signal.waiter_joined()  # a source that runs only while someone waits runs now
        try:
            async with asyncio.timeout(timeout):
                while signal.generation == generation and not (signal.closed or follower.closed):
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        self._waiters.discard(waiter)
        except TimeoutError:
            pass
        finally:
            signal.waiter_left()


class AsyncStore:
    """The store for asyncio code: `await AsyncStore.open(url)`, or `AsyncStore.from_store`
    for an async view of a sync `Store` (one write path for both). The services of `Store`
    under the same names, every method awaitable, with the same arguments, results, checks and
    errors (see the module docstring for how it runs)."""

    def __init__(self, store: Store, *, threads: int = DEFAULT_THREADS, owns: bool) -> None:
        """Prefer `open` or `from_store`. `owns`: closing this closes `store` too."""
        self._store = store
        self._owns = owns
        self._workers = workers = _Workers(threads)
        self.sessions = AsyncSessionService(store.sessions, workers)
        self.events = AsyncEventService(store.events, workers)
        self.activity = AsyncActivityService(store.activity, workers)
        self.faults = AsyncFaultService(store.faults, workers)
        self.checkpoints = AsyncCheckpointService(store.checkpoints, workers)
        self.projection = AsyncProjectionService(store.projection, workers)
        self.index = AsyncProjectIndex(store.index, workers)

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        upgrade: bool = False,
        options: StoreOptions | None = None,
        threads: int = DEFAULT_THREADS,
    ) -> AsyncStore:
        """`Store.open`, awaited (the same arguments and errors), with `threads` worker
        threads (1 to 1,024)."""
        _Workers(threads).shutdown()  # a bad `threads` is refused before anything is opened
        store = await asyncio.to_thread(Store.open, url, upgrade=upgrade, options=options)
        return cls(store, threads=threads, owns=True)

    @classmethod
    def from_store(cls, store: Store, *, threads: int = DEFAULT_THREADS) -> AsyncStore:
        """An async view of `store`: the same database, write path and followers' signal, so
        sync and async callers of one process form group commits together. Closing the view
        stops its workers only; whoever opened `store` closes it."""
        if not isinstance(store, Store):
            raise InvalidRecord(f"store must be a Store, got {type(store).__name__}")
        return cls(store, threads=threads, owns=False)

    @property
    def sync(self) -> Store:
        """The sync `Store` underneath (for `unit_of_work()`, `bind()`, or sync callers)."""
        return self._store

    @property
    def url(self) -> str:
        """The database URL."""
        return self._store.url

    async def run_in_unit_of_work(self, fn: Callable[[UnitOfWork], T]) -> T:
        """`Store.run_in_unit_of_work`, awaited: `fn` (a plain function of the unit of work)
        runs on the write path, joins the next batch in its own savepoint, and its work is kept
        only if it calls `uow.commit()`; its result or its exception comes back here."""
        return await self._workers.run(self._store.run_in_unit_of_work, fn)

    async def close(self) -> None:
        """Close: every later call raises `StoreClosed`; the followers end; calls in progress
        finish first. A view made by `from_store` stops its workers and leaves the store open."""
        if self._owns:
            await asyncio.to_thread(self._store.close)
        self._workers.shutdown()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Async{self._store!r}"
