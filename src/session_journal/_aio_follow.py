"""What runs under `AsyncStore` (`session_journal.aio`): the worker threads of an async store
(`_Workers`), the tasks of one event loop waiting on the store's commit signal (`_LoopWaiters`:
no thread per waiting task), and `AsyncFollower`, which follows the log on the loop. The awaitable
twins of the services and `AsyncStore` itself are in `aio.py`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Generator
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from .api_events import ApiEventFilter, ApiEventPage
from .errors import InvalidRecord, SessionJournalError, StoreClosed, UsageError
from .services.events import EventService
from .storage.calls import WITHDRAWAL, Withdrawal
from .storage.tail import SharedTail
from .storage.wakeups import CommitSignal

P = ParamSpec("P")
T = TypeVar("T")

Waiter = asyncio.Future[int | None]
"""What a task of the loop waits on: woken with the generation of the followers' window that
the routing read (`None`: woken otherwise, or by the follower's `close()`)."""

DEFAULT_THREADS = 32
"""The worker threads of an `AsyncStore` unless `threads=` says otherwise."""
MAX_THREADS = 1024
"""The most worker threads an `AsyncStore` may have."""
SWEEP_S = 1.0
"""An async follower of one session returns an empty page that moves its cursor past other
sessions' events at most this often (its own events come as soon as they commit)."""
WAKE_CHUNK = 64
"""How many waiting tasks one turn of the event loop wakes (the others in the next turns)."""


def _thread_count(threads: object) -> int:
    """`threads` if it is a worker count an async store may have; `InvalidRecord` otherwise."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise InvalidRecord(f"threads must be an integer, got {type(threads).__name__}")
    if not 1 <= threads <= MAX_THREADS:
        raise InvalidRecord(f"threads must be from 1 to {MAX_THREADS}, got {threads}")
    return threads


def _mark_worker(mine: threading.local) -> None:
    """The pool's initializer: marks the worker thread as one of its pool's (`in_worker`)."""
    mine.worker = True


class _Workers:
    """The worker threads of one async store, and how a coroutine runs a call on them."""

    def __init__(self, threads: object) -> None:
        threads = _thread_count(threads)
        self._mine = threading.local()  # `worker` is set in the pool's threads only
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads,
            thread_name_prefix="session-journal async",
            initializer=_mark_worker,
            initargs=(self._mine,),
        )
        self._ended: concurrent.futures.Future[None] | None = None  # set once the threads ended
        self._closer: threading.Thread | None = None  # what waits for them, at `shutdown`
        self._loop_waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaiters] = (
            weakref.WeakKeyDictionary()
        )
        self.closed = False
        self.followers: weakref.WeakSet[AsyncFollower] = weakref.WeakSet()  # to end at close

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a worker. Cancelled: not started, it never runs; queued on
        the write path, it is withdrawn (`calls.Withdrawal`); running, it finishes there."""
        withdrawal = Withdrawal()
        context = contextvars.copy_context()
        context.run(WITHDRAWAL.set, withdrawal)
        name = getattr(fn, "__name__", "call")
        call = functools.partial(fn, *args, **kwargs)
        try:
            future = self._pool.submit(context.run, self._unless_closed, name, call)
        except RuntimeError:  # the pool was shut down: the store is closed
            raise StoreClosed(f"{name}: the store is closed") from None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # not started yet: it never runs
            withdrawal.cancel()  # queued on the write path: it never commits
            raise

    def waiters(self, signal: CommitSignal, tail: SharedTail) -> _LoopWaiters:
        """The waiters of the running loop on `signal` (made on first use)."""
        loop = asyncio.get_running_loop()
        waiters = self._loop_waiters.get(loop)
        if waiters is None:
            waiters = self._loop_waiters[loop] = _LoopWaiters(signal, tail, loop, self)
        return waiters

    def _unless_closed(self, name: str, call: Callable[[], T]) -> T:
        """`call()`, on a worker, unless the store closed while the call waited for one."""
        if self.closed:
            raise StoreClosed(f"{name}: the store is closed")
        return call()

    def in_worker(self) -> bool:
        """Whether the calling thread is one of these workers."""
        return bool(getattr(self._mine, "worker", False))

    def shutdown(self, then: Callable[[], None] | None = None) -> None:
        """Refuse new calls (`StoreClosed`), end the followers (and the waits) made through
        these workers, and stop the workers: a call running finishes; a call still waiting for
        a worker raises `StoreClosed` without running. Once every worker thread has ended,
        `then()` runs (closing the store an async store owns); `ended` waits for both.
        Refused (`UsageError`) in one of these workers, which would wait for itself."""
        if self.in_worker():
            raise UsageError(
                "AsyncStore.close() was called in one of its own worker threads (by a function "
                "the store runs, such as run_in_unit_of_work's), which close() waits for: it "
                "would wait for itself. Close the store from the event loop once the call "
                "has returned"
            )
        self.closed = True
        self._pool.shutdown(wait=False)  # the calls queued meanwhile raise `StoreClosed`
        for follower in list(self.followers):
            follower.close()
        if self._closer is None:
            ended: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._ended = ended
            self._closer = threading.Thread(
                target=self._join, args=(ended, then), name="session-journal async close"
            )
            self._closer.start()

    def _join(
        self, ended: concurrent.futures.Future[None], then: Callable[[], None] | None
    ) -> None:
        """On the closer thread: wait for every worker thread to end, then run `then`."""
        try:
            self._pool.shutdown(wait=True)
            if then is not None:
                then()
        except BaseException as error:  # told to whoever awaits `ended`
            ended.set_exception(error)
        else:
            ended.set_result(None)

    async def ended(self) -> None:
        """After `shutdown`: return once every worker thread and the closer have ended (and
        `then` ran; its error is raised here), without blocking the loop. Cancelled, the
        threads end all the same."""
        closer, ended = self._closer, self._ended
        assert closer is not None and ended is not None, "shutdown() first"
        # Shielded: a cancelled wait must not cancel what the closer will set.
        await asyncio.shield(asyncio.wrap_future(ended))
        # Its last act was to set `ended`: it returns at once (as `loop.shutdown_default_executor`
        # joins its own thread after its future), so no thread of these workers outlives this.
        closer.join()


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
        events: EventService,
        workers: _Workers,
        event_filter: ApiEventFilter | None,
        after_seq: int | None,
        limit: int,
        *,
        started: bool = False,
    ) -> None:
        self._events = events
        self._follower = events._follower(event_filter, after_seq or 0, limit)
        self._after_seq = after_seq
        self._started = started  # whether the cursor is checked (or, for None, read)
        self._start_lock = asyncio.Lock()
        session_id = None if event_filter is None else event_filter.session_id
        self._workers = workers
        self._signal: CommitSignal = self._follower._signal
        self._tail: SharedTail = events._tail
        self._session_id = session_id  # of the filter: woken by that session's events only
        self._next_sweep = 0.0  # a session follower returns an empty page no sooner
        self.waiter: Waiter | None = None  # what it waits on, for `close()`
        self._loop: asyncio.AbstractEventLoop | None = None
        workers.followers.add(self)

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
            start = self._events._start_cursor
            try:
                cursor = await self._workers.run(start, self._after_seq)
            except SessionJournalError:  # refused (or the store closed): it gives no more
                self.close()
                raise
            # Cancelled or timed out: not started, and may start again.
            self._follower.cursor, self._started = cursor, True

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
        return self._signal.closed or self._workers.closed

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
        if self._session_id is not None:
            return await self._next_of_session(self._session_id, deadline, events_only)
        follower, signal = self._follower, self._signal
        while not follower.closed and not self.store_closed:
            generation = signal.generation  # before the read: a later commit moves it
            page = await self._poll(generation, events_only)
            if page is not None:
                return page
            left = follower.wait_left(deadline)
            if left <= 0:
                return None
            await self._waiters().wait_past(generation, left, self)
        return None

    async def _next_of_session(
        self, session_id: str, deadline: float | None, events_only: bool
    ) -> ApiEventPage | None:
        follower, signal = self._follower, self._signal
        waiters = self._waiters()
        # The generation the next read must reflect (the window is read again first when it is
        # older, once for all the loop's tasks): the signal's at the call and after a wait that
        # timed out, so that a commit (a prune, a delete) that moved the signal before is in
        # the page even if the loop has not routed it yet; after a wake-up by the routing, the
        # generation of the window it read, which holds every commit that woke this follower.
        generation: int | None = signal.generation
        while not follower.closed and not self.store_closed:
            # Registered before the read: an event committed after the read wakes it.
            waiter = self.waiter = waiters.register(session_id)
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
                waiters.unregister(session_id, waiter)
                self.waiter = None
                if waiter.done() and not waiter.cancelled():
                    waiter.exception()  # a failed read it did not wait for: seen, not logged
        return None

    async def _poll(self, generation: int, events_only: bool) -> ApiEventPage | None:
        """`Follower.poll` without blocking the loop: from the shared window in memory (read
        again first, once for all the loop's tasks, when it is behind), else on a worker."""
        follower = self._follower
        page = follower.poll_in_memory(generation, events_only=events_only)
        while page == "behind":
            await self._waiters().refresh(generation)
            page = follower.poll_in_memory(generation, events_only=events_only)
        if page == "database":
            return await self._workers.run(follower.poll, generation, events_only=events_only)
        return page

    def _waiters(self) -> _LoopWaiters:
        return self._workers.waiters(self._signal, self._tail)

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


class _LoopWaiters:
    """The tasks of one event loop waiting on one commit signal: the signal calls back once per
    move (`call_soon_threadsafe`, coalesced while a wake-up is pending), and the loop wakes the
    tasks, whatever their number.

    Two kinds of waiters. A follower without a session filter waits for the signal to move, and
    each move wakes it. A follower of one session waits for *its* session: on each move the loop
    reads the followers' window once (on a worker) and wakes only the followers of the sessions
    that have new events there (all of them when the window cannot tell), so that a thousand
    followers of a thousand sessions cost one wake-up per event, not a thousand."""

    def __init__(
        self,
        signal: CommitSignal,
        tail: SharedTail,
        loop: asyncio.AbstractEventLoop,
        workers: _Workers,
    ) -> None:
        self._signal = signal
        self._tail = tail
        self._workers = workers
        self._loop = weakref.ref(loop)  # the store's registry of loops must not keep one alive
        self._waiters: set[Waiter] = set()
        self._sessions: dict[str, set[Waiter]] = {}
        self._routed: int | None = None  # the window's `covered` when sessions were last woken
        self._routed_floor = 0  # and its floor of the pruned log
        self._routing: asyncio.Task[None] | None = None
        self._route_again = False
        self._refreshing: tuple[int, asyncio.Task[None]] | None = None
        self._scheduled = False
        signal.add_listener(self._told)

    def _told(self) -> None:  # any thread, with the signal's lock held
        loop = self._loop()
        if loop is None or loop.is_closed():  # nobody of it waits any more
            self._signal.remove_listener(self._told)
            return
        if self._scheduled:
            return  # the pending wake-up will see every waiter registered until it runs
        self._scheduled = True
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # closed meanwhile
            self._signal.remove_listener(self._told)

    async def refresh(self, generation: int) -> None:
        """Bring the followers' shared window up to `generation` on a worker; the tasks of this
        loop that ask meanwhile await the same read instead of starting their own."""
        pending = self._refreshing
        if pending is None or pending[1].done() or pending[0] < generation:
            task = asyncio.ensure_future(self._workers.run(self._tail.refresh, generation))
            task.add_done_callback(self._refreshed)
            pending = self._refreshing = (generation, task)
        # Shielded: a waiter cancelled must not cancel the read the others await.
        await asyncio.shield(pending[1])

    def _refreshed(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: the awaiters (if any are left) raise it themselves
        if self._refreshing is not None and self._refreshing[1] is task:
            self._refreshing = None  # nothing of the loop is kept once the read is over

    def _wake(self) -> None:  # on the loop
        self._scheduled = False
        waiters, self._waiters = self._waiters, set()
        self._release(list(waiters))
        if self._signal.closed:
            self._release([w for ws in self._sessions.values() for w in ws])
        elif self._sessions:
            self.route()

    def route(self) -> None:
        """Wake the followers of the sessions with new events (after a read of the window), or
        read again once the read in progress is over."""
        if self._routing is None:
            self._routing = asyncio.ensure_future(self._route())
        else:
            self._route_again = True

    async def _route(self) -> None:
        """Read the window up to the signal's generation and wake the followers of the sessions
        with new events in it; again while the signal moved meanwhile."""
        try:
            while True:
                self._route_again = False
                await self.refresh(self._signal.generation)
                window = self._tail.snapshot()
                touched = window.sessions_after(self._routed)
                if window.pruned != self._routed_floor:  # a prune may expire any of them
                    touched, self._routed_floor = None, window.pruned
                self._routed = window.covered if window.filled else None
                # Each woken follower reads at the generation of this window.
                if touched is None:  # the window cannot tell: every follower looks
                    woken = [w for ws in self._sessions.values() for w in ws]
                else:
                    woken = [w for s in touched for w in self._sessions.get(s, ())]
                self._release(woken, window.generation)
                if not self._route_again:
                    return
        except Exception as error:  # a failed read: every waiting follower raises it
            self._routed = None
            for waiters in self._sessions.values():
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(error)
        finally:
            self._routing = None

    def _release(self, waiters: list[Waiter], generation: int | None = None) -> None:
        """Wake `WAKE_CHUNK` waiters now and the rest in later turns of the loop, so that the
        loop's other tasks (and timers) run between the chunks, however many tasks wait; each
        with `generation`, the window's that the routing read (`None`: another cause)."""
        for waiter in waiters[:WAKE_CHUNK]:
            if not waiter.done():  # a waiter cancelled or woken meanwhile is left alone
                waiter.set_result(generation)
        if len(waiters) > WAKE_CHUNK:
            asyncio.get_running_loop().call_soon(self._release, waiters[WAKE_CHUNK:], generation)

    async def wait_past(self, generation: int, timeout: float, follower: AsyncFollower) -> None:
        """Until the signal moves past `generation` or closes, `follower` closes, or `timeout`
        seconds pass."""
        signal = self._signal
        signal.waiter_joined()  # a source that runs only while someone waits runs now
        try:
            async with asyncio.timeout(timeout):
                while signal.generation == generation and not (signal.closed or follower.closed):
                    waiter = follower.waiter = asyncio.get_running_loop().create_future()
                    self._waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        self._waiters.discard(waiter)
                        follower.waiter = None
        except TimeoutError:
            pass
        finally:
            signal.waiter_left()

    def register(self, session_id: str) -> Waiter:
        """A waiter for the next events of `session_id` (register before reading, so that no
        event committed after the read goes unnoticed); `unregister` it afterwards."""
        waiter = asyncio.get_running_loop().create_future()
        self._sessions.setdefault(session_id, set()).add(waiter)
        self._signal.waiter_joined()
        return waiter

    def unregister(self, session_id: str, waiter: Waiter) -> None:
        """Forget a waiter of `register`."""
        self._signal.waiter_left()
        waiters = self._sessions.get(session_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._sessions[session_id]
