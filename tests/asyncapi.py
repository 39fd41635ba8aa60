"""The async variant of the `store` fixture: a `Store` look-alike whose every service call goes
through an `AsyncStore`, awaited on an event loop of its own thread, so that the scenarios
written for the sync API run unchanged through the async one (a module opts in with
`pytestmark = pytest.mark.both_apis`; see `conftest.py`).

What the async API does not have (`unit_of_work()` blocks, `bind`, the internals some tests
inspect) is the sync store's, reached through `AsyncStore.sync`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, TypeVar

from session_journal import ApiEventPage
from session_journal.aio import AsyncFollower, AsyncLease, AsyncStore

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread; `run` awaits a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class _Service:
    def __init__(self, service: Any, loop: LoopThread) -> None:
        self._service = service
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        # An internal of the sync service, which a test inspects, or the journal writer's
        # question to its index (a sync call on its own thread, as `tests.unit` checks).
        if name.startswith("_") or name == "writing_in_this_thread":
            return getattr(self._service._service, name)
        method = getattr(self._service, name)  # a public name the async API lacks: a failure
        if name == "follow" and inspect.iscoroutinefunction(method):  # a consumer's: awaited

            def follow_consumer(*args: Any, **kwargs: Any) -> SyncFollower:
                return SyncFollower(self._loop.run(method(*args, **kwargs)), self._loop)

            return follow_consumer
        if name == "follow":  # a plain call; the follower starts (checks its cursor) when awaited

            def follow(*args: Any, **kwargs: Any) -> SyncFollower:
                follower = method(*args, **kwargs)
                assert isinstance(follower, AsyncFollower)
                return SyncFollower(self._loop.run(started(follower)), self._loop)

            return follow
        if not inspect.iscoroutinefunction(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            if isinstance(kwargs.get("lease"), SyncLease):  # an ack's lease: the async one
                kwargs["lease"] = kwargs["lease"].lease
            result = self._loop.run(method(*args, **kwargs))
            return SyncLease(result, self._loop) if isinstance(result, AsyncLease) else result

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        # A test that patches a method (to count reads, say) patches the sync service, which
        # the async one runs.
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._service._service, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._service._service, name)


async def started(follower: AsyncFollower) -> AsyncFollower:
    return await follower


class SyncFollower(Iterator[ApiEventPage]):
    """An `AsyncFollower` driven from a test's thread, shaped as a `Follower`."""

    def __init__(self, follower: AsyncFollower, loop: LoopThread) -> None:
        self._follower = follower
        self._loop = loop

    def __iter__(self) -> SyncFollower:
        return self

    def __next__(self) -> ApiEventPage:
        try:
            return self._loop.run(self._follower.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def next_page(self, timeout: float | None, *, events_only: bool = False) -> Any:
        return self._loop.run(self._follower.next_page(timeout, events_only=events_only))

    def close(self) -> None:
        # From any thread, as `Follower.close`: the async follower's close is thread-safe.
        self._follower.close()

    def __enter__(self) -> SyncFollower:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._follower, name)


class SyncLease:
    """An `AsyncLease` driven from a test's thread, shaped as a `Lease`."""

    def __init__(self, lease: AsyncLease, loop: LoopThread) -> None:
        self.lease = lease
        self._loop = loop

    def renew(self, *, ttl_s: float | None = None) -> None:
        self._loop.run(self.lease.renew(ttl_s=ttl_s))

    def release(self) -> bool:
        return self._loop.run(self.lease.release())

    def __enter__(self) -> SyncLease:
        self._loop.run(self.lease.__aenter__())
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.run(self.lease.__aexit__(*exc))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lease, name)


class SyncOverAsync:
    """A `Store` look-alike over an `AsyncStore` (see the module docstring)."""

    def __init__(self, store: AsyncStore, loop: LoopThread) -> None:
        self.async_store = store
        self._loop = loop
        for name in (
            "sessions",
            "events",
            "activity",
            "faults",
            "checkpoints",
            "projection",
            "consumers",
        ):
            setattr(self, name, _Service(getattr(store, name), loop))
        self.index = _Service(store.index, loop)

    def run_in_unit_of_work(self, fn: Callable[[Any], T]) -> T:
        return self._loop.run(self.async_store.run_in_unit_of_work(fn))

    def metrics(self) -> Any:
        return self._loop.run(self.async_store.metrics())

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """`Store.snapshot()` through `AsyncStore.snapshot()` (`async with`), its services
        awaited as the store's are."""
        opened = self.async_store.snapshot()
        snapshot = self._loop.run(opened.__aenter__())
        names = ("sessions", "events", "activity", "checkpoints", "projection", "index")
        services = {name: _Service(getattr(snapshot, name), self._loop) for name in names}
        try:
            yield SimpleNamespace(as_of_seq=snapshot.as_of_seq, **services)
        except BaseException as error:
            if not self._loop.run(opened.__aexit__(type(error), error, error.__traceback__)):
                raise
        else:
            self._loop.run(opened.__aexit__(None, None, None))

    def close(self) -> None:
        self._loop.run(self.async_store.close())

    def __enter__(self) -> SyncOverAsync:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.async_store.sync, name)
