"""The shared tail: one in-memory window of the most recent committed events per store, from
which followers at or near the frontier are served without a query of their own.

The window holds the events with `lo < seq <= covered`, every one of them, each decoded once
(for the store: pages share the frozen `ApiEvent`s) with its JSON (`event_texts`),
and the frontier `hi` (`covered == hi` unless more than a window committed at once), all read in
one snapshot together with which of those events were deleted since. It answers a page for that
range exactly as `load` would have at that snapshot: the events of a session deleted since are
gone (a session id used again after a delete is no confusion), and nothing uncommitted is in it;
a follower of a workspace reads the database (a session may have moved). It is refreshed by one
reader for each move of the store's wake-up signal (whichever follower comes first, under a
lock; the others then read memory): each read publishes a new window and never changes a
published one, so a reader takes no lock (an event loop reads it without waiting). A read is two
statements: the log's version (`EventRepository.version`: frontier, floor, and the counter of
deleted events that a trigger keeps), and the new rows after `covered`; the earlier events are
counted (and their seqs read) again only when that counter moved.

What other processes commit reaches the store as a hint (a notification, a watcher's poll), a
little later, and only while someone waits. So a reader is answered from the window only when
a read or check of it began after the reader's previous read ended (`checked_since`); else the
window's version is first compared with the database's (`verify`, one statement at a time,
shared by the readers and streams that ask meanwhile). A new `wait` or `follow` has it checked
before its first page (what other processes did while nobody of this store waited is in it,
new events included); for a later page the check asks only whether events were removed (new
ones come with the wake-up their commit sends: readers do not poll the database for them). A
follower woken by a commit reads a window read after the wake-up, and one at the window's end
has nothing stale to be served (no statement more); a follower reading page after page through
the window checks before each page, so another process's prune or delete is in the next page
of every follower. A follower whose cursor is below `lo`, or whose page the window cannot
complete, reads the database as `load` does.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Literal

from ..api_events import (
    ApiEvent,
    ApiEventFilter,
    LegacyNotice,
    StoredRow,
    decode_events,
    event_texts,
)
from ..storage.protocols import EventReads, Transactions
from ..storage.repositories import LogVersion

Row = tuple[int, str, str, ApiEvent, object]
"""An event of the window: `(seq, session_id, its JSON text, the decoded event, the type tag
of its stored body as the type filter reads it)` (see `_decoded`)."""
_NEVER_READ = LogVersion(0, 0, 0)
_seq = itemgetter(0)


def needs_check(checked: bool, cursor: int, hi: int, *, first: bool = False) -> bool:
    """Whether a reader at `cursor` has the window checked (`SharedTail.verify`) before it is
    answered from a window whose frontier is `hi`: not when a read or check of it began after
    the reader's previous read ended (`checked`, see `SharedTail.checked_since`); else when it
    holds events after the cursor (they may be stale), or for a new reader's `first` page. At
    the window's end nothing stale is served, so no statement more."""
    return not checked and (cursor < hi or first)


class SharedTail:
    """The window of one store (see the module docstring)."""

    def __init__(
        self,
        transactions: Transactions,
        max_events: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """A window of at most `max_events` events and `max_bytes` body bytes (by default the
        store's `follow_window_events` and `follow_window_bytes`; 0 events: no window, every
        follower reads the database)."""
        options = transactions.options
        self._transactions = transactions
        self._max_events = options.follow_window_events if max_events is None else max_events
        self._max_bytes = options.follow_window_bytes if max_bytes is None else max_bytes
        self._lock = threading.Lock()  # one refresh at a time; readers never take it
        # One check (`verify`) at a time: the readers that ask meanwhile wait for it and, when it
        # began after their bound, need none of their own (taken before `_lock`, never after).
        self._check_lock = threading.Lock()
        self._preload = 0  # events before the frontier the first read takes (`preload`)
        self._window = Window(generation=-1, filled=False, lo=0, covered=0, hi=0)
        # When the last read or check of the window that found it current began (a
        # `time.monotonic()`): it holds every commit completed before then (`checked_since`).
        self._checked_at = float("-inf")
        # When the last check that found none of the window's events removed began, its
        # frontier perhaps behind the database's (`verify` for a reader's later page): it
        # serves no event removed before then.
        self._kept_at = float("-inf")
        self.refreshes = 0
        """How many times the window was read (for tests and benchmarks)."""
        self.checks = 0
        """How many times its version was compared with the database's (`verify`; for tests
        and benchmarks)."""

    def page(
        self,
        event_filter: ApiEventFilter,
        cursor: int,
        limit: int,
        generation: int,
        *,
        since: float | None = None,
        first: bool = False,
    ) -> tuple[int, int, list[Row]] | None:
        """The frontier, the floor of the pruned log and the rows of the page after `cursor`
        matching `event_filter`, as `load` would read them, for a reader that saw the signal
        at `generation` before it asked, and after every commit that completed before `since`
        (a `time.monotonic()`: unless a read or check of the window began after then, see
        `checked_since`, it is checked before it answers with what it holds after `cursor`, and
        before any answer to a reader's `first` read; `None`: no such bound); `None` when the
        window cannot answer (read the database)."""
        if self._max_events == 0:
            return None
        self.refresh(generation)  # first: a read now is a check too
        # Before the snapshot it covers:
        checked = since is None or self.checked_since(since, first=first)
        window = self._window
        answer = window.answer(event_filter, cursor, limit)
        if answer is None or not needs_check(checked, cursor, window.hi, first=first):
            return answer
        self.verify(since, first=first)
        return self._window.answer(event_filter, cursor, limit)

    def page_in_memory(
        self, event_filter: ApiEventFilter, cursor: int, limit: int, generation: int
    ) -> tuple[int, int, list[Row]] | Literal[False] | None:
        """`page`, but only from memory, never waiting (an event loop calls it): `False` when
        the window is older than `generation` (call `refresh(generation)` on a thread first);
        otherwise what `page` returns."""
        if self._max_events == 0:
            return None
        window = self._window  # a snapshot: a refresh publishes a new one, never changes it
        if generation > window.generation:
            return False
        return window.answer(event_filter, cursor, limit)

    def checked_since(self, moment: float, *, first: bool = False) -> bool:
        """Whether a read or check of the window that found it current began after `moment`
        (a `time.monotonic()`): it then holds every commit, of any process, completed before
        `moment`; or, for a reader's later page (not its `first`), one that found none of its
        events removed (it then serves no event removed before `moment`; what was appended
        meanwhile comes with the wake-up every commit sends). A reader answered from memory
        asks it with the end of its previous read; when it is false, `verify` first."""
        at = self._checked_at if first else max(self._checked_at, self._kept_at)
        return at > moment

    def text_of(self, event: ApiEvent) -> str | None:
        """The JSON the window holds for `event` (exactly `event.model_dump_json()`) when
        `event` is the window's own object, without encoding it; else `None`."""
        rows = self._window.rows
        if not isinstance(event.seq, int):  # made without validation: not the window's
            return None
        at = bisect_left(rows, event.seq, key=_seq)
        if at < len(rows) and rows[at][3] is event:
            return rows[at][2]
        return None

    def snapshot(self) -> Window:
        """The window as last read (never changed afterwards)."""
        return self._window

    def preload(self, events: int) -> None:
        """Unless the window was read already: read it now, with the last `events` events
        before the frontier (within its bounds, above the floor of the pruned log), so that
        followers starting a little way back (clients reconnecting) are served from memory."""
        if self._max_events == 0 or self._window.filled:
            return
        with self._lock:
            self._preload = max(self._preload, events)
            if not self._window.filled:
                self._refresh(self._window.generation)

    def refresh(self, generation: int) -> None:
        """Read the window again unless it is as recent as `generation` already."""
        if self._max_events == 0 or generation <= self._window.generation:
            return
        with self._lock:
            if generation > self._window.generation:
                self._refresh(generation)

    def verify(self, since: float | None = None, *, first: bool = True) -> None:
        """Make the window answer for every commit that completed before this call, by any
        process (an append, a prune, a delete: whether or not it woke this store), or, for a
        reader's later page (`first` false), for every removal: one statement reads the log's
        version, and the window is read again only when its own version is older. A reader
        answered from the window calls it when the window was not checked after `since` (see
        `page`). One check runs at a time: a reader that waited
        for another's finds, once its turn comes, whether a check that began after `since`
        answered for it meanwhile, and then reads nothing (so threads asking together share
        a statement, as the async fan-out's tasks do). For a reader's later page (`first`
        false) the window is read again only when events were removed (a prune, a deletion);
        new events alone leave it as it is, to be read on the wake-up they send: followers
        reading through the window do not poll the database for new events."""
        if self._max_events == 0:
            return
        with self._check_lock:
            if since is not None and self.checked_since(since, first=first):
                return  # a check or read that began after `since` answered for it
            window = self._window
            if not window.filled:
                return  # the first read fills it at the frontier, read then
            began = time.monotonic()
            self.checks += 1
            with self._transactions.reading_one_statement("check the followers' window") as read:
                version = read.events.version()
            if window.version.covers(version):
                self._current_at(began)
                return
            held = window.version
            if (
                not first
                and held.pruned_through >= version.pruned_through
                and held.deletions >= version.deletions
            ):
                if began > self._kept_at:  # none removed: it serves what it holds
                    self._kept_at = began
                return
            with self._lock:
                if not self._window.version.covers(version):
                    self._refresh(self._window.generation)
                else:
                    self._current_at(began)

    def _current_at(self, began: float) -> None:
        """A check that began at `began` found the window current (a lost race with another
        check only keeps the earlier time: one check more, never one less)."""
        if began > self._checked_at:
            self._checked_at = began

    def _refresh(self, generation: int) -> None:
        """Read what committed since the window's last read and publish the new window (the
        lock held); a failed read publishes nothing."""
        old = self._window
        began = time.monotonic()
        with self._transactions.reading("read the followers' window") as uow:
            # First, in the read's snapshot: the window is at least as recent as its version.
            version = uow.events.version()
            first = not old.filled
            if first:  # start at the frontier, with the last `preload` events
                hi = version.latest_seq
                start = max(version.pruned_through, hi - min(self._preload, self._max_events))
                # Read from `start` below, in this snapshot: every row read is stored.
                old = window = Window(
                    generation,
                    filled=True,
                    lo=start,
                    covered=start,
                    hi=start,
                    pruned=version.pruned_through,
                    version=version,
                )
            if not first or start < hi:
                hi, pruned, read_rows = uow.events.rows_after(old.covered, self._max_events)
                covered = read_rows[-1][0] if len(read_rows) == self._max_events else hi
                new = _decoded(read_rows, uow.events)
                rows = old.rows + new
                size = old.size + sum(encoded_size(row[2]) for row in new)
                drop = 0
                while drop < len(rows) and (
                    len(rows) - drop > self._max_events or size > self._max_bytes
                ):
                    size -= encoded_size(rows[drop][2])
                    drop += 1
                lo = rows[drop - 1][0] if drop else old.lo
                rows = rows[drop:]
                # Which of the window's earlier events are gone (a prune, a deleted session):
                # the database counts every deletion of events (a trigger), so an unchanged
                # counter means none went since the last read. Otherwise, none can have been
                # added below `old.covered` (seqs are taken at commit, in order), so an
                # unchanged count of the earlier ones still means none of them went; else
                # their seqs are read again. The new rows were read in this snapshot: stored.
                missing = frozenset(seq for seq in old.missing if seq > lo)
                earlier = max(0, len(old.rows) - drop)  # the earlier rows kept (none if more
                # than a window was read: the new rows then pushed them all out)
                if (
                    earlier
                    and version.deletions != old.version.deletions
                    and uow.events.count_between(lo, old.covered) != earlier - len(missing)
                ):
                    stored = uow.events.present_after(lo, old.covered)
                    missing = frozenset(row[0] for row in rows[:earlier] if row[0] not in stored)
                window = Window(
                    generation,
                    filled=True,
                    lo=lo,
                    covered=covered,
                    hi=hi,
                    pruned=pruned,
                    rows=rows,
                    size=size,
                    missing=missing,
                    version=version,
                )
        self._window = window
        self._checked_at = began  # (the lock held: no other read publishes meanwhile)
        self.refreshes += 1


def encoded_size(text: str) -> int:
    """The bytes of `text` in UTF-8 (what bounds of memory count)."""
    return len(text) if text.isascii() else len(text.encode())


def _decoded(stored: list[StoredRow], events: EventReads) -> list[Row]:
    """The window's rows of stored rows: each event's JSON and the event, decoded once, and
    the tag of its stored body as the database's type filter reads it. A canonical body that
    decodes is its own tag; the tags of the others (hand-written or older code's bodies, and
    canonical ones this code cannot decode, such as newer code's values) are read from the
    database in the same snapshot, so that the window filters exactly as a page read there
    (their JSON too is the decoded event's, never the stored text)."""
    texts = event_texts(stored)
    decoded = decode_events(stored, texts)
    odd = [
        index
        for index, (row, event) in enumerate(zip(stored, decoded, strict=True))
        if not row[4] or isinstance(event.event, LegacyNotice)
    ]
    tags: dict[int, object] = events.stored_types([stored[index][0] for index in odd])
    for index in odd:
        if stored[index][4]:  # canonical for the code that wrote it, not for this code
            texts[index] = decoded[index].model_dump_json()
    return [
        (row[0], row[1], text, event, tags.get(row[0], event.event.type))
        for row, text, event in zip(stored, texts, decoded, strict=True)
    ]


@dataclass(frozen=True)
class Window:
    """One published state of the window: the rows of the events with `lo < seq <= covered`,
    the frontier `hi` and which of those events were deleted since they were read, all as of one
    snapshot at the signal's `generation`. Never changed once published, so a reader needs no
    lock."""

    generation: int
    filled: bool
    lo: int
    covered: int
    hi: int
    pruned: int = 0  # the floor of the pruned log, from the same snapshot
    rows: list[Row] = field(default_factory=list)  # in seq order
    size: int = 0  # bytes of the events' JSON, encoded (UTF-8)
    missing: frozenset[int] = frozenset()  # the seqs of those events deleted since
    version: LogVersion = _NEVER_READ  # the log's version, read first in that snapshot

    def rows_after(self, seq: int | None) -> list[Row] | None:
        """The window's rows with a seq above `seq` (those deleted since included); `None` when
        the window cannot tell (`seq` unknown or below the window, or events beyond it)."""
        if seq is None or not self.filled or seq < self.lo or self.covered < self.hi:
            return None
        return self.rows[bisect_right(self.rows, seq, key=_seq) :]

    def answer(
        self, event_filter: ApiEventFilter, cursor: int, limit: int
    ) -> tuple[int, int, list[Row]] | None:
        """The frontier, the floor of the pruned log and the page after `cursor`, or `None`
        when the window cannot answer."""
        if not self.filled or not self.lo <= cursor <= self.hi:
            # Behind the window; or ahead of it: the reader saw newer rows in the database
            # than this window holds (a commit not signalled yet). The database answers.
            return None
        if event_filter.workspace_id is not None:
            # Which workspace a session is in is the database's to say now (a session may have
            # moved): a workspace follower reads the database.
            return None
        if cursor == 0 and self.pruned:
            # From the oldest retained event: the database answers (rows of a prune under way
            # are still in the window, and are not retained).
            return None
        after = self.rows[bisect_right(self.rows, cursor, key=_seq) :]
        session_id = event_filter.session_id
        if session_id is not None:  # most followers follow one session: narrow it first
            after = [row for row in after if row[1] == session_id]
        types = event_filter.types
        if types is not None:
            after = [row for row in after if row[4] in types]
        missing = self.missing
        rows = after if not missing else [row for row in after if row[0] not in missing]
        rows = rows[:limit]
        if len(rows) < limit and self.covered < self.hi:
            return None  # the rest of the page is beyond the window
        return self.hi, self.pruned, rows
