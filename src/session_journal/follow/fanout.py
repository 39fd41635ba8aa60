"""`Fanout`: the followers and streams of one process as cursors on one event loop.

Tasks of the loop wait without a thread each: the store's commit signal calls the loop back once
per move (`call_soon_threadsafe`, coalesced while a wake-up is pending), and the loop wakes the
tasks, whatever their number. Two kinds of waits:

- `wait_past`: until the signal moves (an `AsyncFollower` of the whole log);
- `register`: until the window holds new events that a filter may admit (an `AsyncFollower` of
  one session, a stream of the HTTP feed). On each move the loop reads the window once (on a
  worker, `refresh`) and wakes only the registrations with something new in it: a thousand
  streams of a thousand sessions cost one wake-up per event, not a thousand. Under load the
  reads are spaced by what the last one woke (`spacing`), so that what commits meanwhile joins
  one wake-up.

A woken task reads the one window (`window`: immutable, so no lock) and falls back to the
database when the window cannot answer (`_Window.answer` gives `None`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

from ..api_events import ApiEventFilter
from .wakeups import CommitSignal
from .window import Row, SharedTail, Window

P = ParamSpec("P")
T = TypeVar("T")

Waiter = asyncio.Future[int | None]
"""What a task of the loop waits on: woken with the generation of the window that the routing
read (`None`: woken otherwise: the signal moved or closed, or the waiter's owner woke it)."""

WAKE_CHUNK = 64
"""How many waiting tasks one turn of the event loop wakes (the others in the next turns)."""
SPACING_S = 0.01
"""Under load, reads of the window for the registrations are at least `PER_WAITER_S` times the
registrations the last read woke apart, and at most this far: each woken task takes all that is
new at once. A thousand streams that each read wake up costs a thousand writes, spaced 10 ms;
a thousand followers of a thousand sessions, of which each read wakes one, are not held up."""
PER_WAITER_S = 10e-6
"""How much the spacing grows with each registration the last read woke (within
`SPACING_S`)."""


class Runner(Protocol):
    """How the loop side runs a blocking call: on a worker thread of the async store
    (`aio._Workers`), without blocking the loop."""

    @property
    def closed(self) -> bool:
        """Whether the async store closed (its followers end)."""
        ...

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a worker."""
        ...


class Fanout:
    """The waiting tasks of one event loop on one store's signal and window (see the module
    docstring). Made by `AsyncFollowing.fanout()`, one per loop; methods are called on its
    loop."""

    def __init__(
        self,
        signal: CommitSignal,
        window: SharedTail,
        loop: asyncio.AbstractEventLoop,
        runner: Runner,
    ) -> None:
        self.signal = signal
        """The store's commit signal."""
        self._tail = window
        self._runner = runner
        self._loop = weakref.ref(loop)  # the store's registry of loops must not keep one alive
        self._waiters: set[Waiter] = set()  # of `wait_past`
        self._sessions: dict[str, dict[Waiter, ApiEventFilter]] = {}  # registrations by session
        self._others: dict[Waiter, ApiEventFilter] = {}  # registrations of other filters
        self._registered = 0  # registrations now (the signal counts the fan-out as one waiter)
        self._routed: int | None = None  # the window's `covered` when registrations last woke
        self._routed_floor = 0  # and its floor of the pruned log
        self._routed_at = 0.0  # and when
        self._woken = 0  # how many registrations that read woke
        self._routing: asyncio.Task[None] | None = None
        self._route_again = False
        self._refreshing: tuple[int, asyncio.Task[None]] | None = None
        self._verifying: asyncio.Task[None] | None = None
        self._verify_next: asyncio.Task[None] | None = None
        self._scheduled = False
        signal.add_listener(self._told)

    @property
    def window(self) -> Window:
        """The window as last read (immutable: `Window.answer` reads it without a lock)."""
        return self._tail.snapshot()

    def registered(self) -> int:
        """How many registrations wait now."""
        return self._registered

    def spacing(self) -> float:
        """How long after the last read of the window for the registrations the next one
        waits at least: `PER_WAITER_S` for each registration that read woke, `SPACING_S` at
        most (see `SPACING_S`)."""
        return min(SPACING_S, self._woken * PER_WAITER_S)

    def _told(self) -> None:  # any thread, with the signal's lock held
        loop = self._loop()
        if loop is None or loop.is_closed():  # nobody of it waits any more
            self.signal.remove_listener(self._told)
            return
        if self._scheduled:
            return  # the pending wake-up will see every waiter registered until it runs
        self._scheduled = True
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # closed meanwhile
            self.signal.remove_listener(self._told)

    async def refresh(self, generation: int) -> None:
        """Bring the window up to `generation` on a worker; the tasks of this loop that ask
        meanwhile await the same read instead of starting their own."""
        pending = self._refreshing
        if pending is None or pending[1].done() or pending[0] < generation:
            task = asyncio.ensure_future(self._runner.run(self._tail.refresh, generation))
            task.add_done_callback(self._refreshed)
            pending = self._refreshing = (generation, task)
        # Shielded: a waiter cancelled must not cancel the read the others await.
        await asyncio.shield(pending[1])

    def _refreshed(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: the awaiters (if any are left) raise it themselves
        if self._refreshing is not None and self._refreshing[1] is task:
            self._refreshing = None  # nothing of the loop is kept once the read is over

    async def verify(self) -> None:
        """Make the window answer for every commit that completed before this call, by any
        process (`SharedTail.verify`, one statement on a worker), before a new reader's first
        read of it. The tasks that ask while a check runs share the next one (which starts
        after their call), so a thousand streams opening at once make a few statements, not a
        thousand."""
        if self._verify_next is None:
            self._verify_next = asyncio.ensure_future(self._verify_after(self._verifying))
        # Shielded: a caller cancelled must not cancel the check the others await.
        await asyncio.shield(self._verify_next)

    def checked_since(self, moment: float) -> bool:
        """Whether a reader's later page may be answered from the window for a reader whose
        previous read ended at `moment` (a `time.monotonic()`): it serves no event removed
        before then (`SharedTail.checked_since`). A reader that reads the window again for more
        calls `verify` (a full check) first when it is false."""
        return self._tail.checked_since(moment)

    async def _verify_after(self, running: asyncio.Task[None] | None) -> None:
        if running is not None:
            await asyncio.wait([running])  # its error is its own callers'
        self._verifying, self._verify_next = self._verify_next, None
        try:
            await self._runner.run(self._tail.verify)
        finally:
            if self._verifying is asyncio.current_task():
                self._verifying = None

    def _wake(self) -> None:  # on the loop
        self._scheduled = False
        waiters, self._waiters = self._waiters, set()
        self._release(list(waiters))
        if self.signal.closed:
            self._release(self._registrations())
        elif self._sessions or self._others:
            self.route()

    def wake_all(self) -> None:
        """Wake every waiting task, from any thread (each looks at why it waits: the async
        store closed, say)."""
        loop = self._loop()
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nothing waits
                loop.call_soon_threadsafe(self._release_all)

    def _release_all(self) -> None:
        waiters, self._waiters = self._waiters, set()
        self._release([*waiters, *self._registrations()])

    def _registrations(self) -> list[Waiter]:
        return [*self._others, *(w for ws in self._sessions.values() for w in ws)]

    def route(self) -> None:
        """Wake the registrations with new events (after a read of the window), or read again
        once the read in progress is over."""
        if self._routing is None:
            self._routing = asyncio.ensure_future(self._route())
        else:
            self._route_again = True

    async def _route(self) -> None:
        """Read the window up to the signal's generation and wake the registrations with new
        events in it; again while the signal moved meanwhile, spaced under load."""
        try:
            while True:
                wait = self._routed_at + self.spacing() - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)  # what commits meanwhile joins this wake-up
                self._route_again = False
                await self.refresh(self.signal.generation)
                window = self._tail.snapshot()
                new = window.rows_after(self._routed)
                if window.pruned != self._routed_floor:  # a prune may expire any of them
                    new, self._routed_floor = None, window.pruned
                self._routed = window.covered if window.filled else None
                self._routed_at = time.monotonic()
                # Each woken task reads at the generation of this window (a window that is never
                # read, `follow_window_events=0`, has none: the task reads the database).
                generation = window.generation if window.filled else None
                woken = self._admitting(new)
                self._woken = len(woken)
                self._release(woken, generation)
                if not self._route_again:
                    return
        except Exception as error:  # a failed read: every registration raises it
            self._routed = None
            for waiter in self._registrations():
                if not waiter.done():
                    waiter.set_exception(error)
        finally:
            self._routing = None

    def _admitting(self, new: list[Row] | None) -> list[Waiter]:
        """The registrations whose filter may admit one of `new` (every one when the window
        cannot tell, `None`)."""
        if new is None:
            return self._registrations()
        if not new:
            return []
        tags: dict[str, set[object]] = {}
        for row in new:
            tags.setdefault(row[1], set()).add(row[4])
        woken = [
            waiter
            for session, session_tags in tags.items()
            for waiter, wanted in self._sessions.get(session, {}).items()
            if wanted.types is None or not session_tags.isdisjoint(wanted.types)
        ]
        if self._others:
            every = set().union(*tags.values())
            woken += [
                waiter
                for waiter, wanted in self._others.items()
                if wanted.types is None or not every.isdisjoint(wanted.types)
            ]
        return woken

    def _release(self, waiters: list[Waiter], generation: int | None = None) -> None:
        """Wake `WAKE_CHUNK` waiters now and the rest in later turns of the loop, so that the
        loop's other tasks (and timers) run between the chunks, however many tasks wait; each
        with `generation`, the window's that the routing read (`None`: another cause)."""
        for waiter in waiters[:WAKE_CHUNK]:
            if not waiter.done():  # a waiter cancelled or woken meanwhile is left alone
                waiter.set_result(generation)
        if len(waiters) > WAKE_CHUNK:
            asyncio.get_running_loop().call_soon(self._release, waiters[WAKE_CHUNK:], generation)

    async def wait_past(
        self, generation: int, timeout: float, ended: Callable[[], bool], waiting: WaitingFor
    ) -> None:
        """Until the signal moves past `generation` or closes, `ended()` is true (checked
        whenever the wait is woken: `waiting` is told each waiter, so that its owner can wake
        it), or `timeout` seconds pass."""
        signal = self.signal
        signal.waiter_joined()  # a source that runs only while someone waits runs now
        try:
            async with asyncio.timeout(timeout):
                while signal.generation == generation and not (signal.closed or ended()):
                    waiter = asyncio.get_running_loop().create_future()
                    waiting.waiter = waiter
                    self._waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        self._waiters.discard(waiter)
                        waiting.waiter = None
        except TimeoutError:
            pass
        finally:
            signal.waiter_left()

    def register(self, event_filter: ApiEventFilter) -> Waiter:
        """A waiter for the next events that `event_filter` may admit (register before reading,
        so that no event committed after the read goes unnoticed); `unregister` it afterwards.
        Its owner may wake it too (`set_result(None)`)."""
        waiter: Waiter = asyncio.get_running_loop().create_future()
        session_id = event_filter.session_id
        if session_id is None:
            self._others[waiter] = event_filter
        else:
            self._sessions.setdefault(session_id, {})[waiter] = event_filter
        self._registered += 1
        if self._registered == 1:  # the signal counts the fan-out's registrations as one
            self.signal.waiter_joined()  # waiter (its sources run while someone waits)
        return waiter

    def unregister(self, event_filter: ApiEventFilter, waiter: Waiter) -> None:
        """Forget a waiter of `register`."""
        self._registered -= 1
        if self._registered == 0:
            self.signal.waiter_left()
        session_id = event_filter.session_id
        if session_id is None:
            self._others.pop(waiter, None)
            return
        waiters = self._sessions.get(session_id)
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                del self._sessions[session_id]


class WaitingFor(Protocol):
    """Who waits in `Fanout.wait_past`: told the waiter it waits on (`None` afterwards)."""

    waiter: Waiter | None
