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
(`aiosqlite` is itself a thread per connection). The figures are in the docs (Performance).

**Waiting costs no thread.** `events.wait` and `events.follow` wait for the store's commit
signal (`session_journal.follow`) on the event loop: the signal calls the loop back (one
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
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

from ._aio_workers import DEFAULT_THREADS, MAX_THREADS, _thread_count, _Workers
from ._arguments import Given, Int64, validate_arguments
from ._validation import Id
from .api_events import ApiEvent, ApiEventFilter, ApiEventPage, page_json
from .config import StoreOptions
from .errors import InvalidRecord, StoreClosed
from .follow.async_follower import SWEEP_S, AsyncFollower, AsyncFollowing
from .follow.fanout import WAKE_CHUNK
from .records import StoreMetrics
from .services.activity import ActivityService
from .services.checkpoints import CheckpointService
from .services.consumers import (
    ConsumerService,
    HeldLease,
    Lease,
    LeaseTtl,
    LeaseWait,
    _held,
    _lease_wait,
    _live,
)
from .services.events import EventService, _timeout, page_size
from .services.faults import FaultService
from .services.index import ProjectIndex
from .services.projection import ProjectionService
from .services.sessions import SessionService
from .storage.lone import Ack
from .storage.protocols import LoopWrite, LoopWriter
from .storage.repositories import LeaseHolder
from .storage.unit_of_work import UnitOfWork
from .store import Snapshot, Store

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., object])
S = TypeVar("S")

__all__ = [
    "DEFAULT_THREADS",
    "MAX_THREADS",
    "SWEEP_S",
    "WAKE_CHUNK",
    "AsyncActivityService",
    "AsyncCheckpointService",
    "AsyncConsumerService",
    "AsyncEventService",
    "AsyncFaultService",
    "AsyncFollower",
    "AsyncLease",
    "AsyncProjectIndex",
    "AsyncProjectionService",
    "AsyncSessionService",
    "AsyncSnapshot",
    "AsyncStore",
]


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

    return _twin_of(method)(call)


def _twin_of(method: Callable[..., object]) -> Callable[[F], F]:
    """Give an async twin the sync method's name, parameters and annotations, for
    `inspect.signature`, `help()`, `typing.get_type_hints` and docs generators (`__wrapped__`
    gives them its module's names)."""

    def decorate(call: F) -> F:
        call.__name__ = method.__name__
        # SessionService.get: AsyncSessionService.get
        call.__qualname__ = f"Async{method.__qualname__}"
        call.__doc__ = f"Awaitable `{method.__qualname__}`: {method.__doc__ or ''}"
        call.__annotations__ = dict(method.__annotations__)
        call.__wrapped__ = method  # type: ignore[attr-defined]
        return call

    return decorate


def _with_doc_of(method: Callable[..., object]) -> Callable[[F], F]:
    """Append the docstring of the sync `method` to a hand-written twin's own."""

    def decorate(twin: F) -> F:
        twin.__doc__ = f"{twin.__doc__ or ''}\n\n{method.__qualname__}: {method.__doc__ or ''}"
        return twin

    return decorate


class AsyncSessionService(_Service[SessionService]):
    """`async_store.sessions`: `SessionService`, awaitable."""

    save = _awaitable(SessionService.save)
    save_lifecycle = _awaitable(SessionService.save_lifecycle)
    get = _awaitable(SessionService.get)
    list = _awaitable(SessionService.list)
    list_ended = _awaitable(SessionService.list_ended)
    count_by_state = _awaitable(SessionService.count_by_state)
    page = _awaitable(SessionService.page)
    delete = _awaitable(SessionService.delete)
    remove_ended = _awaitable(SessionService.remove_ended)


class AsyncActivityService(_Service[ActivityService]):
    """`async_store.activity`: `ActivityService`, awaitable."""

    record = _awaitable(ActivityService.record)
    get = _awaitable(ActivityService.get)


class _LoopWrites:
    """The lone writes an async service started on event loops (`storage/loop_writes.py`):
    started there when the store can (PostgreSQL, nothing else of the process writing), and
    awaited by `AsyncStore.close`."""

    def __init__(self, loop_writes: LoopWriter | None, workers: _Workers) -> None:
        self._loop_writes = loop_writes
        self._workers = workers
        self._on_loop: set[asyncio.Task[Any]] = set()  # lone writes running on a loop

    def start(
        self,
        prepare: Callable[..., tuple[LoopWrite[T], str]],
        bind: Callable[..., tuple[Any, ...] | None],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[asyncio.Future[T], LoopWrite[T]] | None:
        """The lone write of a call with `args` and `kwargs` (bound by `bind` to the arguments
        `prepare` takes, `None` when given `uow=`; made and checked by `prepare`: a startup
        fault's `(session_id, message)`, an ack's `(name, seq, lease)`), started on the running
        loop and shielded (a caller cancelled leaves its one statement to run to its end), and
        the write; `None` when the call may not run there now (given `uow=`, not binding, the
        store's loop writes busy or absent: the caller runs it on a worker, whose sync method
        says what is wrong with it)."""
        loop_writes = self._loop_writes
        if loop_writes is None or self._workers.closed:
            return None
        try:
            lone = bind(*args, **kwargs)
        except TypeError:  # a call that does not bind
            return None
        if lone is None:
            return None
        write, action = prepare(*lone)  # checked here
        started = loop_writes.start(write, action)
        if started is None:
            return None
        self._on_loop.add(started)
        started.add_done_callback(self._on_loop.discard)
        return asyncio.shield(started), write

    async def settled(self) -> None:
        """Return once the lone writes started on the running loop have ended."""
        loop = asyncio.get_running_loop()
        running = [task for task in self._on_loop if task.get_loop() is loop]
        if running:
            await asyncio.wait(running)


class AsyncFaultService(_Service[FaultService]):
    """`async_store.faults`: `FaultService`, awaitable. On PostgreSQL a lone startup fault runs
    on the event loop itself when nothing else of the process writes (`storage/loop_writes.py`):
    no worker thread between the task and its one statement."""

    def __init__(self, service: FaultService, workers: _Workers) -> None:
        super().__init__(service, workers)
        self.on_loop = _LoopWrites(service.loop_writes, workers)

    @_twin_of(FaultService.record_startup_fault)
    async def record_startup_fault(self, /, *args: Any, **kwargs: Any) -> bool:
        # On PostgreSQL, when nothing else of the process writes, its one statement runs on
        # the event loop itself, on a connection of the store's own (`storage/loop_writes.py`);
        # otherwise on a worker, as every call.
        started = self.on_loop.start(self._service.startup_fault, _fault_arguments, args, kwargs)
        if started is not None:
            return await started[0]
        return await self._workers.run(self._service.record_startup_fault, *args, **kwargs)


def _fault_arguments(session_id: Any, message: Any, *, uow: Any = None) -> tuple[Any, ...] | None:
    """A startup fault's arguments, for its lone write on the loop (none given `uow`)."""
    return (session_id, message) if uow is None else None


def _ack_arguments(
    name: Any, seq: Any, *, lease: Any = None, uow: Any = None
) -> tuple[Any, ...] | None:
    """An ack's arguments, for its lone write on the loop (none given `uow`)."""
    return (name, seq, lease) if uow is None else None


class AsyncCheckpointService(_Service[CheckpointService]):
    """`async_store.checkpoints`: `CheckpointService`, awaitable."""

    begin = _awaitable(CheckpointService.begin)
    correlate_barrier = _awaitable(CheckpointService.correlate_barrier)
    save_requested = _awaitable(CheckpointService.save_requested)
    finish_failed = _awaitable(CheckpointService.finish_failed)
    recover_interrupted = _awaitable(CheckpointService.recover_interrupted)
    get = _awaitable(CheckpointService.get)


class AsyncLease(HeldLease):
    """A consumer's lease, from `async_store.consumers.acquire`: `Lease`, with `renew` and
    `release` awaited (on a worker) and `async with` releasing it."""

    __slots__ = ("_consumers",)

    def __init__(self, consumers: AsyncConsumerService, taken: HeldLease) -> None:
        super().__init__(
            taken.name, taken.holder, taken.generation, taken.expires_at_ms, taken.ttl_s
        )
        self._consumers = consumers

    @_with_doc_of(Lease.renew)
    async def renew(self, *, ttl_s: float | None = None) -> None:
        """`Lease.renew`, awaited."""
        consumers = self._consumers
        ttl = self.ttl_s if ttl_s is None else ttl_s
        self._expires_at_ms = await consumers._workers.run(consumers._service._renew, self, ttl)

    @_with_doc_of(Lease.release)
    async def release(self) -> bool:
        """`Lease.release`, awaited."""
        consumers = self._consumers
        return await consumers._workers.run(consumers._service._release, self)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.release()


class AsyncConsumerService(_Service[ConsumerService]):
    """`async_store.consumers`: `ConsumerService`, awaitable; `wait_until` waits without
    holding a thread, and `follow` gives an `AsyncFollower`."""

    def __init__(
        self, service: ConsumerService, workers: _Workers, following: AsyncFollowing
    ) -> None:
        super().__init__(service, workers)
        self._following = following
        self.on_loop = _LoopWrites(service.loop_writes, workers)
        # The attempts of cancelled acquires, and the releases of the leases they took.
        self._orphans: set[asyncio.Future[Any]] = set()

    register = _awaitable(ConsumerService.register)
    get = _awaitable(ConsumerService.get)
    list = _awaitable(ConsumerService.list)
    remove = _awaitable(ConsumerService.remove)
    reset = _awaitable(ConsumerService.reset)
    position = _awaitable(ConsumerService.position)

    @_twin_of(ConsumerService.ack)
    async def ack(self, /, *args: Any, **kwargs: Any) -> None:
        # As a startup fault: on PostgreSQL, when nothing else of the process writes, its one
        # statement runs on the event loop itself; otherwise on a worker.
        started = self.on_loop.start(self._service._ack_write, _ack_arguments, args, kwargs)
        if started is None:
            await self._workers.run(self._service.ack, *args, **kwargs)
            return
        ran, write = started[0], cast(Ack, started[1])
        outcome = await ran
        if outcome is True:
            self._service._acked(write, outcome)
        else:  # why it was refused: read on a worker
            await self._workers.run(self._service._acked, write, outcome)

    @_with_doc_of(ConsumerService.follow)
    @validate_arguments()
    async def follow(self, name: Id, *, limit: int = 100) -> AsyncFollower:
        """`ConsumerService.follow`, awaited (it reads the consumer's position first, on a
        worker): an `AsyncFollower`, started, from the consumer's position."""
        start = self._service._follow_start
        event_filter, position = await self._workers.run(start, name)
        load = self._service._load
        side = self._following
        return AsyncFollower(
            side, load, event_filter, position, page_size(limit), started=True, strict=True
        )

    @_with_doc_of(ConsumerService.acquire)
    @validate_arguments()
    async def acquire(
        self, name: Id, holder: Id, *, ttl_s: LeaseTtl, wait_s: LeaseWait = 0.0
    ) -> AsyncLease:
        """`ConsumerService.acquire`, awaited without holding a thread while it waits: each
        attempt runs on a worker, and the acks' signal (a release) calls the loop back."""
        service = self._service
        async with self._acks_listened(wait_s) as moved:
            deadline = time.monotonic() + wait_s
            holding: LeaseHolder | None = None  # as the last attempt or read found it
            while True:
                moved.clear()  # before the read or attempt: a later release sets it
                if holding is not None:  # woken: a read, no write while the lease stays live
                    holding = await self._workers.run(service._holder, name)
                if holding is None or not _live(holding):
                    taken = await self._attempt(name, holder, ttl_s)
                    if isinstance(taken, HeldLease):
                        return AsyncLease(self, taken)
                    holding = taken
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _held(name, holding)
                await _woken(moved, _lease_wait(holding, left))

    async def _attempt(self, name: str, holder: str, ttl_s: float) -> HeldLease | LeaseHolder:
        """One attempt of `acquire` on a worker, shielded: a caller cancelled meanwhile (a
        timeout) leaves it to run to its end, and a lease it took is released, not left held
        by nobody until it expires."""
        attempt = asyncio.ensure_future(
            self._workers.run(self._service._try_acquire, name, holder, ttl_s)
        )
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            self._orphans.add(attempt)
            attempt.add_done_callback(self._release_orphan)
            raise

    def _release_orphan(self, attempt: asyncio.Future[Any]) -> None:
        """Release the lease an attempt whose caller was cancelled took (on a worker)."""
        self._orphans.discard(attempt)
        if attempt.cancelled() or attempt.exception() is not None:
            return
        taken = attempt.result()
        if isinstance(taken, HeldLease):
            release = asyncio.ensure_future(self._workers.run(self._service._release, taken))
            self._orphans.add(release)
            release.add_done_callback(self._released)

    def _released(self, release: asyncio.Future[Any]) -> None:
        self._orphans.discard(release)
        if not release.cancelled():
            release.exception()  # retrieved: the lease then expires by itself

    async def released(self) -> None:
        """Return once the attempts of cancelled `acquire`s have ended and the leases they took
        are released (`AsyncStore.close` waits for it before it stops the workers)."""
        while self._orphans:
            await asyncio.gather(*self._orphans, return_exceptions=True)
            await asyncio.sleep(0)  # their callbacks run: a release starts, or they are gone

    @_with_doc_of(ConsumerService.wait_until)
    @validate_arguments()
    async def wait_until(self, name: Id, seq: Int64, *, timeout: object) -> bool:
        """`ConsumerService.wait_until`, awaited without holding a thread: the acks' signal
        calls the loop back, and only the reads of the position go to a worker."""
        seconds = _timeout(timeout)
        async with self._acks_listened(seconds) as moved:
            deadline = time.monotonic() + seconds
            while True:
                moved.clear()  # before the read: a later ack sets it
                if await self._workers.run(self._service.position, name) >= seq:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._following.following.acks.closed or self._workers.closed:
                    raise StoreClosed("wait for a consumer: the store was closed")
                await _woken(moved, left)

    @asynccontextmanager
    async def _acks_listened(self, seconds: float) -> AsyncIterator[asyncio.Event]:
        """An event the acks' signal sets (acks, releases: of this process or, heard by the
        store's watcher or listener, of another) while up to `seconds` are waited."""
        moved = asyncio.Event()
        if seconds <= 0:  # nobody waits: nothing to listen to
            yield moved
            return
        following = self._following.following
        acks = following.watched_acks()
        loop = asyncio.get_running_loop()

        def wake() -> None:  # with the signal's lock held: returns at once
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(moved.set)

        acks.add_listener(wake)
        following.signal.waiter_joined()  # the SQLite watcher reads while someone waits
        try:
            yield moved
        finally:
            acks.remove_listener(wake)
            following.signal.waiter_left()


async def _woken(moved: asyncio.Event, seconds: float) -> None:
    """Return once `moved` is set or `seconds` pass."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await moved.wait()


class AsyncProjectionService(_Service[ProjectionService]):
    """`async_store.projection`: `ProjectionService`, awaitable."""

    apply = _awaitable(ProjectionService.apply)
    load = _awaitable(ProjectionService.load)
    transcript = _awaitable(ProjectionService.transcript)


class AsyncProjectIndex(_Service[ProjectIndex]):
    """`async_store.index`: `ProjectIndex`, awaitable."""

    insert = _awaitable(ProjectIndex.insert)
    search = _awaitable(ProjectIndex.search)
    rebuild = _awaitable(ProjectIndex.rebuild)


class AsyncEventService(_Service[EventService]):
    """`async_store.events`: `load` and `latest_seq` awaitable; `wait` awaits a commit without
    holding a thread; `follow` is an async iterator (`AsyncFollower`)."""

    def __init__(
        self, service: EventService, workers: _Workers, following: AsyncFollowing | None
    ) -> None:
        """`following`: the async store's (`None` for a snapshot's, whose waits and follows are
        refused as its sync twin refuses them)."""
        super().__init__(service, workers)
        self._following = following

    load = _awaitable(EventService.load)
    load_json = _awaitable(EventService.load_json)
    load_json_events = _awaitable(EventService.load_json_events)
    load_before = _awaitable(EventService.load_before)
    load_before_json = _awaitable(EventService.load_before_json)
    rate = _awaitable(EventService.rate)
    latest_seq = _awaitable(EventService.latest_seq)
    pruned_through = _awaitable(EventService.pruned_through)
    plan_prune = _awaitable(EventService.plan_prune)
    prune = _awaitable(EventService.prune)

    @_with_doc_of(EventService.wait)
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
        size = page_size(limit)
        following = self._following
        if following is None:  # a snapshot's: refused (after the read its sync twin makes)
            await self._workers.run(self._service.wait, filter, after_seq, limit, timeout=0)
            raise AssertionError("a snapshot's wait is refused")
        cursor = await self.latest_seq() if after_seq is None else after_seq
        # Its first page checks the cursor: `wait` returns (or raises) no sooner.
        follower = AsyncFollower(following, self._service.load, filter, cursor, size, started=True)
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

    @_with_doc_of(EventService.wait_json)
    @validate_arguments()
    async def wait_json(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        timeout: object,
    ) -> bytes:
        """`EventService.wait_json`, awaited: `wait`'s page as its JSON (UTF-8)."""
        page = await self.wait(filter, after_seq, limit, timeout=timeout)
        texts = [self._service.event_json(event).decode() for event in page.events]
        return page_json(texts, page.next_after_seq, page.latest_seq, page.pruned_through)

    @_with_doc_of(EventService.event_json)
    def event_json(self, event: ApiEvent) -> bytes:
        """`EventService.event_json` (a plain call: it reads no database): one event's JSON,
        from the followers' window when the event came from it."""
        return self._service.event_json(event)

    @_with_doc_of(EventService.follow)
    @validate_arguments()
    def follow(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
    ) -> AsyncFollower:
        """`EventService.follow`, as an `AsyncFollower`: a plain call (its arguments are checked
        here, `InvalidRecord`), whose result is used with `async for`, `async with` or `await`.
        The cursor is checked when the follower starts, at the first of those (see
        `AsyncFollower`): `CursorExpired` and `CursorAhead` are raised there, before a page."""
        following = self._following
        if following is None:  # a snapshot's: refused, as its sync twin refuses it
            self._service.follow(filter, after_seq, limit)
            raise AssertionError("a snapshot's follow is refused")
        return AsyncFollower(following, self._service.load, filter, after_seq, page_size(limit))


class _AsyncReads:
    """The awaitable twins of the services that read (see `store._Reads`)."""

    def __init__(
        self, reads: Store | Snapshot, workers: _Workers, following: AsyncFollowing | None
    ) -> None:
        self.sessions = AsyncSessionService(reads.sessions, workers)
        self.events = AsyncEventService(reads.events, workers, following)
        self.activity = AsyncActivityService(reads.activity, workers)
        self.checkpoints = AsyncCheckpointService(reads.checkpoints, workers)
        self.projection = AsyncProjectionService(reads.projection, workers)
        self.index = AsyncProjectIndex(reads.index, workers)


class AsyncSnapshot(_AsyncReads):
    """`Snapshot`, awaitable: the reads of one moment of the database (`AsyncStore.snapshot()`),
    its services' methods awaitable, on the store's workers, one call at a time."""

    def __init__(self, snapshot: Snapshot, workers: _Workers) -> None:
        super().__init__(snapshot, workers, None)  # nothing commits into a snapshot
        self.as_of_seq = snapshot.as_of_seq
        """The frontier of the snapshot: every event up to it is in it, none after."""

    def __repr__(self) -> str:
        return f"AsyncSnapshot(as_of_seq={self.as_of_seq})"


async def _leave(
    opened: AbstractContextManager[Snapshot], error: BaseException | None
) -> bool | None:
    """Leave a sync snapshot's block on a thread, to the end even if the awaiting task is
    cancelled meanwhile (its connection goes back to the pool)."""
    exit_args = (None, None, None) if error is None else (type(error), error, error.__traceback__)
    return await asyncio.shield(asyncio.to_thread(opened.__exit__, *exit_args))


def _leave_once_taken(
    opened: AbstractContextManager[Snapshot],
) -> Callable[[asyncio.Future[Snapshot]], None]:
    """For a snapshot whose task was cancelled while it was being taken: once taken on its
    thread after all, leave it on the executor (which keeps the work until done, unlike a
    task nobody holds), giving its connection back."""
    loop = asyncio.get_running_loop()

    def leave(entering: asyncio.Future[Snapshot]) -> None:
        if not entering.cancelled() and entering.exception() is None:
            loop.run_in_executor(None, opened.__exit__, None, None, None)

    return leave


class AsyncStore(_AsyncReads):
    """The store for asyncio code: `await AsyncStore.open(url)`, or `AsyncStore.from_store`
    for an async view of a sync `Store` (one write path for both). The services of `Store`
    under the same names, every method awaitable, with the same arguments, results, checks and
    errors (see the module docstring for how it runs)."""

    def __init__(self, store: Store, *, threads: int = DEFAULT_THREADS, owns: bool) -> None:
        """Prefer `open` or `from_store`. `owns`: closing this closes `store` too."""
        self._store = store
        self._owns = owns
        self._workers = workers = _Workers(threads)
        self.following = AsyncFollowing(store.following, workers)
        """The loop side of the store's `Following` (`session_journal.follow`): the `Fanout` of
        each event loop, on which the web layer's streams wait."""
        super().__init__(store, workers, self.following)
        self.faults = AsyncFaultService(store.faults, workers)
        self.consumers = AsyncConsumerService(store.consumers, workers, self.following)

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
        _thread_count(threads)  # a bad `threads` is refused before anything is opened
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

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[AsyncSnapshot]:
        """`Store.snapshot()`, as `async with`: an `AsyncSnapshot` whose reads all see one
        moment of the database (`as_of_seq`), on one reader connection held until the block
        ends. Taking it runs on a worker; a task cancelled meanwhile still gives the connection
        back."""
        opened = self._store.snapshot()
        entering = asyncio.ensure_future(self._workers.run(opened.__enter__))
        try:
            snapshot = await asyncio.shield(entering)
        except asyncio.CancelledError:
            entering.add_done_callback(_leave_once_taken(opened))
            raise
        try:
            yield AsyncSnapshot(snapshot, self._workers)
        except BaseException as error:
            if not await _leave(opened, error):
                raise
        else:
            await _leave(opened, None)

    async def metrics(self) -> StoreMetrics:
        """`Store.metrics()`, awaited: its one read runs on a worker."""
        return await self._workers.run(self._store.metrics)

    async def run_in_unit_of_work(self, fn: Callable[[UnitOfWork], T]) -> T:
        """`Store.run_in_unit_of_work`, awaited: `fn` (a plain function of the unit of work)
        runs on the write path, joins the next batch in its own savepoint, and its work is kept
        only if it calls `uow.commit()`; its result or its exception comes back here."""
        return await self._workers.run(self._store.run_in_unit_of_work, fn)

    async def close(self) -> None:
        """Close: every later call raises `StoreClosed`; the followers and waits end; a call
        running on a worker finishes first, and a call still waiting for a worker raises
        `StoreClosed` without running. Once the workers have ended, a store of its own (`open`)
        closes its sync store too; a view made by `from_store` leaves the store open. Returns
        when all that is done and every thread of the store has ended; the event loop runs on
        meanwhile. Closing again waits the same way and does nothing more. Called in one of the
        store's own workers (by a function the store runs), it would wait for itself: it
        raises `UsageError` and closes nothing."""
        if not self._workers.closed and not self._workers.in_worker():
            await self.consumers.released()  # no lease left held by a cancelled acquire
        self._workers.shutdown(self._store.close if self._owns else None)
        self.following.close()  # its followers and waits end
        # The lone writes running on this loop finish first.
        await self.faults.on_loop.settled()
        await self.consumers.on_loop.settled()
        await self._workers.ended()

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
