"""The worker threads of an `AsyncStore` (`_Workers`): how a coroutine runs a call of the sync
store without blocking its event loop, and how they end when the store closes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .errors import InvalidRecord, StoreClosed, UsageError
from .storage.calls import WITHDRAWAL, Withdrawal

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_THREADS = 32
"""The worker threads of an `AsyncStore` unless `threads=` says otherwise."""
MAX_THREADS = 1024
"""The most worker threads an `AsyncStore` may have."""


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
        self.closed = False

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

    def _unless_closed(self, name: str, call: Callable[[], T]) -> T:
        """`call()`, on a worker, unless the store closed while the call waited for one."""
        if self.closed:
            raise StoreClosed(f"{name}: the store is closed")
        return call()

    def in_worker(self) -> bool:
        """Whether the calling thread is one of these workers."""
        return bool(getattr(self._mine, "worker", False))

    def shutdown(self, then: Callable[[], None] | None = None) -> None:
        """Refuse new calls (`StoreClosed`) and stop the workers: a call running finishes; a
        call still waiting for a worker raises `StoreClosed` without running. Once every worker
        thread has ended, `then()` runs (closing the store an async store owns); `ended` waits
        for both. Refused (`UsageError`) in one of these workers, which would wait for
        itself."""
        if self.in_worker():
            raise UsageError(
                "AsyncStore.close() was called in one of its own worker threads (by a function "
                "the store runs, such as run_in_unit_of_work's), which close() waits for: it "
                "would wait for itself. Close the store from the event loop once the call "
                "has returned"
            )
        self.closed = True
        self._pool.shutdown(wait=False)  # the calls queued meanwhile raise `StoreClosed`
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
