"""The shared tail: one in-memory window of the most recent committed events per store, from
which followers at or near the frontier are served without a query of their own.

The window holds the stored rows of the events with `lo < seq <= covered`, every one of them,
and the frontier `hi` (`covered == hi` unless more than a window committed at once), all read
in one snapshot together with which of those events still exist and their session's workspace.
It answers a page for that range exactly as `load` would have at that snapshot: the events of a
session deleted since are gone (which events exist is read again each time, so a session id
used again after a delete is no confusion), a workspace filter uses each session's workspace as
the database says, and nothing uncommitted is in it. It is refreshed by one reader for each
move of the store's wake-up signal (whichever follower comes first, under a lock; the others
then read memory): two statements, the new rows after `covered` with the frontier, and the
seqs and workspaces of the events after `lo`. A follower whose cursor is below `lo`, or
whose page the window cannot complete, reads the database as `load` does.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from operator import itemgetter
from typing import Literal

from ..api_events import ApiEventFilter
from ..unit_of_work import Transactions

Row = tuple[int, str, int, str]
_seq = itemgetter(0)


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
        self._lock = threading.Lock()
        self._generation = -1  # of the signal, when the window was last read
        self._filled = False
        self._lo = self._covered = self._hi = 0
        self._pruned = 0  # the floor of the pruned log, from the window's snapshot
        self._rows: list[Row] = []  # in seq order
        self._bytes = 0
        self._present: dict[int, str | None] = {}  # seq of an event that exists: its workspace
        self.refreshes = 0
        """How many times the window was read (for tests and benchmarks)."""

    def page(
        self, event_filter: ApiEventFilter, cursor: int, limit: int, generation: int
    ) -> tuple[int, int, list[Row]] | None:
        """The frontier, the floor of the pruned log and the rows of the page after `cursor`
        matching `event_filter`, as `load` would read them, for a reader that saw the signal
        at `generation` before it asked; `None` when the window cannot answer (read the
        database)."""
        if self._max_events == 0:
            return None
        with self._lock:
            if generation > self._generation:
                self._refresh(generation)
            return self._answer(event_filter, cursor, limit)

    def page_in_memory(
        self, event_filter: ApiEventFilter, cursor: int, limit: int, generation: int
    ) -> tuple[int, int, list[Row]] | Literal[False] | None:
        """`page`, but only if it needs neither a read of the database nor a wait for the lock
        (an event loop calls it): `False` when the window is behind `generation` (call
        `refresh(generation)` on a thread first) or busy; otherwise what `page` returns."""
        if self._max_events == 0:
            return None
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if generation > self._generation:
                return False
            return self._answer(event_filter, cursor, limit)
        finally:
            self._lock.release()

    def refresh(self, generation: int) -> None:
        """Read the window again unless it is as recent as `generation` already."""
        if self._max_events == 0:
            return
        with self._lock:
            if generation > self._generation:
                self._refresh(generation)

    def _answer(
        self, event_filter: ApiEventFilter, cursor: int, limit: int
    ) -> tuple[int, int, list[Row]] | None:
        """The page from the window as it is (the lock held)."""
        if not self._lo <= cursor <= self._hi:
            # Behind the window; or ahead of it: the reader saw newer rows in the database
            # than this window holds (a commit not signalled yet). The database answers.
            return None
        if cursor == 0 and self._pruned:
            # From the oldest retained event: the database answers (rows of a prune under way
            # are still in the window, and are not retained).
            return None
        rows: list[Row] = []
        for row in self._rows[bisect_right(self._rows, cursor, key=_seq) :]:
            if len(rows) >= limit:
                break
            if row[0] not in self._present:
                continue  # deleted since (with its session)
            if event_filter.session_id not in (None, row[1]):
                continue
            if event_filter.workspace_id is not None and (
                self._present[row[0]] != event_filter.workspace_id
            ):
                continue
            rows.append(row)
        if len(rows) < limit and self._covered < self._hi:
            return None  # the rest of the page is beyond the window
        return self._hi, self._pruned, rows

    def _refresh(self, generation: int) -> None:
        with self._transactions.reading("read the followers' window") as uow:
            if not self._filled:  # start empty at the frontier
                self._hi = self._lo = self._covered = uow.events.latest_seq()
                self._pruned = uow.events.pruned_through()
                self._rows, self._bytes = [], 0
                self._present = {}
                self._filled = True
            else:
                hi, pruned, new = uow.events.rows_after(self._covered, self._max_events)
                self._hi, self._pruned = hi, pruned
                self._covered = new[-1][0] if len(new) == self._max_events else hi
                self._rows.extend(new)
                self._bytes += sum(len(row[3]) for row in new)
                self._trim()
                self._present = uow.events.present_after(self._lo, self._covered)
        self._generation = generation
        self.refreshes += 1

    def _trim(self) -> None:
        drop = 0
        size = self._bytes
        while drop < len(self._rows) and (
            len(self._rows) - drop > self._max_events or size > self._max_bytes
        ):
            size -= len(self._rows[drop][3])
            drop += 1
        if drop:
            self._lo = self._rows[drop - 1][0]
            del self._rows[:drop]
            self._bytes = size
