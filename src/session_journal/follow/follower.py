"""`Follower`, the iterator of `store.events.follow` (and the reader under `wait`): pages of the
log served from the store's window when it can answer and from the database otherwise."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

from ..api_events import ApiEventFilter, ApiEventPage
from ..errors import StoreClosed
from ..storage.counters import StoreCounters
from .cursors import check_cursor, expired, page_after
from .wakeups import CommitSignal
from .window import SharedTail, needs_check


class Unanswered(enum.Enum):
    """Why `Follower.poll_in_memory` gave no answer from memory."""

    WINDOW_BEHIND = enum.auto()
    """The window is older than the generation asked for: refresh it on a thread
    (`SharedTail.refresh`), then ask again."""
    DATABASE = enum.auto()
    """Only the database can answer: `Follower.poll` on a thread."""
    UNCHECKED = enum.auto()
    """The window was not checked since the follower's previous read (`SharedTail.verify` on a
    thread, shared by the readers that ask at once), then ask again."""


class Follower(Iterator[ApiEventPage]):
    """Pages of the log as they commit (`store.events.follow`). Each page holds events, or is
    empty with a cursor moved past events of other sessions; iterate, or call `next_page` with
    a timeout. Thread-safe `close()`; the iteration also ends when the store closes.

    While it waits it costs nothing: it reads the log again only when the store's wake-up
    signal moved (a commit here or elsewhere: see `wakeups`), and at the latest every
    `reread_s` seconds (a safety net; a signal is only a hint)."""

    def __init__(
        self,
        load: Callable[[ApiEventFilter | None, int, int], ApiEventPage],
        tail: SharedTail,
        signal: CommitSignal,
        event_filter: ApiEventFilter | None,
        cursor: int,
        limit: int,
        *,
        strict: bool = False,
        counters: StoreCounters | None = None,
    ) -> None:
        """Prefer `store.events.follow`. `load` reads a page from the database (`events.load`),
        `tail` is the store's shared window and `signal` its commit signal. `strict`: the
        follower of a durable consumer, for which a cursor of 0 is the position before the
        first event ever appended, not "the oldest retained event": it expires
        (`CursorExpired`) once anything is pruned."""
        self._strict = strict
        self._counters = counters  # the store's: a `CursorExpired` raised here is counted
        self._load = load
        self._tail = tail
        self._filter = event_filter
        self._limit = limit
        self._closed = threading.Event()
        self._signal = signal
        self.cursor = cursor
        """The cursor: the `next_after_seq` of the last page returned."""
        self.reread_s = 60.0
        """The longest time between two reads of the log while nothing wakes the follower."""
        self.last_read: ApiEventPage | None = None  # the last page read, returned or not
        self._read_at: int | None = None  # the signal's generation when it was read
        # The shared window as it was just before that read: a window published since (a read
        # of it that checked it against the database republishes it at the same generation
        # with newer rows) makes the next poll read again, whatever the generation.
        self._read_window: object = None
        # When its previous read ended (first: when it was made): a page from the shared
        # window holds every commit completed before then (`SharedTail.checked_since`).
        self._since = time.monotonic()
        self._first = True  # until a read answered: the first is checked even at the end
        self._read_time = 0.0  # and the time

    def __iter__(self) -> Follower:
        return self

    def __next__(self) -> ApiEventPage:
        while True:
            try:
                page = self.next_page(timeout=None)
            except StoreClosed:
                raise StopIteration from None
            if page is not None:
                return page
            if self.closed or self._signal.closed:
                raise StopIteration

    def next_page(self, timeout: float | None, *, events_only: bool = False) -> ApiEventPage | None:
        """The next page: one holding events, or (unless `events_only`) an empty one whose
        cursor moved; `None` when `timeout` seconds passed first (`None`: no limit), or the
        follower or the store closed. `CursorAhead` if the cursor is above the frontier."""
        signal = self._signal
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed.is_set() and not signal.closed:
            generation = signal.generation  # before the read: a later commit moves it
            page = self.poll(generation, events_only=events_only)
            if page is not None:
                return page
            left = self.wait_left(deadline)
            if left <= 0:
                return None
            signal.wait_past(generation, left, stop=self._closed)
        return None

    def poll(self, generation: int, *, events_only: bool = False) -> ApiEventPage | None:
        """One step of `next_page` without waiting, for a reader that saw the signal at
        `generation` just before: the next page if one is there, else `None` (then wait for the
        signal to move past `generation`). It reads only when the signal moved since the last
        read, or when that read is older than `reread_s` (then from the database itself)."""
        window = self._tail.snapshot()
        stale = self._read_at is not None and self._stale()
        if self._read_at != generation or stale or window is not self._read_window:
            page = self._read(None if stale else generation)
            return self._took(page, generation, events_only, window)
        return self._unreturned(events_only)

    def _unreturned(self, events_only: bool) -> ApiEventPage | None:
        """The empty page last read, if it moved the cursor and was not returned (it was read
        for `events_only`) and this call returns such pages; else `None`. Nothing committed
        since that read (the signal did not move), so it is still the answer."""
        last = self.last_read
        if events_only or last is None or last.events or last.next_after_seq <= self.cursor:
            return None
        self.cursor, self._read_at = last.next_after_seq, None
        return last

    def poll_in_memory(
        self, generation: int, *, events_only: bool = False
    ) -> ApiEventPage | Unanswered | None:
        """`poll`, but only if it can be answered from memory without waiting for a lock (from
        an event loop); else why not (`Unanswered`)."""
        window = self._tail.snapshot()
        stale = self._read_at is not None and self._stale()
        if self._read_at == generation and not stale and window is self._read_window:
            return self._unreturned(events_only)
        if stale:
            return Unanswered.DATABASE
        cursor = self._next_cursor()
        event_filter = self._filter or ApiEventFilter()
        # Before the snapshot it covers:
        checked = self._tail.checked_since(self._since, first=self._first)
        served = self._tail.page_in_memory(event_filter, cursor, self._limit, generation)
        if served is False:
            return Unanswered.WINDOW_BEHIND
        if served is None:
            return Unanswered.DATABASE
        latest, pruned, rows = served
        if needs_check(checked, cursor, latest, first=self._first):
            return Unanswered.UNCHECKED
        events = tuple(row[3] for row in rows)
        page = self._checked(cursor, page_after(cursor, latest, events, pruned), pruned)
        self._since, self._first = time.monotonic(), False
        return self._took(page, generation, events_only, window)

    def _took(
        self, page: ApiEventPage, generation: int, events_only: bool, window: object
    ) -> ApiEventPage | None:
        """`page` if it is one to return (events, or a moved cursor unless `events_only`);
        else `None`, remembering that the log was read at `generation`, with the shared window
        as `window` or newer."""
        if page.events or (page.next_after_seq != self.cursor and not events_only):
            self.cursor, self._read_at = page.next_after_seq, None
            return page
        self._read_at, self._read_time = generation, time.monotonic()
        self._read_window = window
        return None

    def wait_left(self, deadline: float | None) -> float:
        """How long to wait for the signal now: until `deadline` (a `time.monotonic()`; `None`:
        none), and at most `reread_s`."""
        if deadline is None:
            return self.reread_s
        return min(deadline - time.monotonic(), self.reread_s)

    def _read(self, generation: int | None) -> ApiEventPage:
        """The page after the cursor: from the store's shared window when it can answer (for a
        reader that saw the signal at `generation`), else from the database."""
        cursor = self._next_cursor()
        served = None
        if generation is not None:
            event_filter = self._filter or ApiEventFilter()
            served = self._tail.page(
                event_filter, cursor, self._limit, generation, since=self._since, first=self._first
            )
        if served is None:
            # `load` raises `CursorExpired` for a cursor below the floor of its snapshot.
            page = self._load(self._filter, cursor, self._limit)
            pruned = page.pruned_through
        else:
            latest, pruned, rows = served
            page = page_after(cursor, latest, tuple(row[3] for row in rows), pruned)
        page = self._checked(cursor, page, pruned)
        self._since, self._first = time.monotonic(), False
        return page

    def _checked(self, cursor: int, page: ApiEventPage, pruned_through: int) -> ApiEventPage:
        """`page`, read after `cursor` in a snapshot whose floor of the pruned log was
        `pruned_through`, remembered as the last read; `CursorExpired` if the cursor is below
        that floor (events after it were pruned), `CursorAhead` if it is above the frontier."""
        if self._strict and cursor < pruned_through:
            raise expired(pruned_through, cursor, self._counters)
        check_cursor(cursor, page.latest_seq, pruned_through, self._counters)
        self.last_read = page
        return page

    def _next_cursor(self) -> int:
        # Past the last page read: an empty filtered page moves it too, even when `next_page`
        # did not return that page.
        return (
            self.cursor
            if self.last_read is None
            else max(self.cursor, self.last_read.next_after_seq)
        )

    def _stale(self) -> bool:
        return time.monotonic() - self._read_time >= self.reread_s

    def close(self) -> None:
        """End the iteration, also one blocked in another thread (it returns at once); the
        store's other followers are not made to read the log again."""
        self._closed.set()
        self._signal.interrupt()

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed.is_set()

    @property
    def store_closed(self) -> bool:
        """Whether the store closed (the follower ended with it)."""
        return self._signal.closed

    def __enter__(self) -> Follower:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
