"""`Following`: the one object per store that owns what following its log takes: the commit
signal (and the signal of consumers' acks), the wake-up source of other processes' commits and
the window of recent events. A
`Store` makes it when it opens (`store.following`); a snapshot has none (nothing commits into
it) and builds no window."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..api_events import ApiEventFilter, ApiEventPage
from ..storage.protocols import Transactions
from .cursors import check_cursor
from .follower import Follower
from .wakeups import CommitSignal, PostgresListener, SqliteWatcher
from .window import SharedTail

Load = Callable[[ApiEventFilter | None, int, int], ApiEventPage]
"""How a follower reads a page from the database: `store.events.load(filter, after_seq,
limit)`."""


class FollowedDatabase(Transactions, Protocol):
    """What `Following` needs of the store's database (`storage.database.Database`): its reads,
    a word after each commit of this process, and a connection of its own for the wake-up
    source of other processes' commits."""

    @property
    def dialect_name(self) -> str:
        """`sqlite` or `postgresql` (any other name: no wake-up source of other processes)."""
        ...

    def dedicated_connection(self) -> Any:
        """A driver connection outside the pool, in autocommit, for the wake-up source's
        thread (which closes it)."""
        ...

    def on_commit(self, listener: Callable[[], None]) -> None:
        """Call `listener` right after each commit of this process (one listener: the last
        one given)."""
        ...


class Following:
    """The following of one store's log (see the module docstring). Followers of any kind (a
    `Follower`, an `AsyncFollower`, the web layer's streams) share its signal and its window:
    every follower sees other processes' deletes and prunes through the one window."""

    def __init__(self, database: FollowedDatabase) -> None:
        self._database = database
        self._pid = os.getpid()
        self._fresh()
        database.on_commit(self._committed)

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._signal = CommitSignal()
        self._acks = CommitSignal()
        self._source: SqliteWatcher | PostgresListener | None = None
        self._window = SharedTail(self._database)

    @property
    def window(self) -> SharedTail:
        """The window of the most recent events (`window.SharedTail`); in a child process
        after `fork`, the child's own (see `signal`)."""
        self.signal  # noqa: B018 (the fork check)
        return self._window

    def _committed(self) -> None:
        """After a commit of this process: followers read again."""
        self.signal.pulse()

    @property
    def signal(self) -> CommitSignal:
        """The commit signal, without starting the wake-up source (see `watched_signal`). In a
        child process after `fork`, a signal, source and window of the child's own: the
        parent's source thread did not come along, and its connection is the parent's."""
        if os.getpid() != self._pid:
            with _FORKED:  # the first threads of the child to ask: one reset
                if os.getpid() != self._pid:
                    _INHERITED.append(self._source)  # never closed: the parent's connection
                    self._fresh()
                    self._pid = os.getpid()
        return self._signal

    @property
    def acks(self) -> CommitSignal:
        """The signal of consumers' positions (see `wakeups`), without starting the wake-up
        source; after `fork`, the child's own (see `signal`)."""
        self.signal  # noqa: B018 (the fork check)
        return self._acks

    def watched_acks(self) -> CommitSignal:
        """The signal of consumers' positions, with the wake-up source of other processes'
        commits started (see `watched_signal`)."""
        self.watched_signal()
        return self._acks

    def watched_signal(self) -> CommitSignal:
        """The commit signal, with the source of other processes' commits started (the first
        call starts it: one per store, whatever the number of followers)."""
        signal = self.signal
        with self._lock:
            if self._source is None and not signal.closed:
                name = self._database.dialect_name
                connect = self._database.dedicated_connection
                if name == "sqlite":
                    self._source = SqliteWatcher(signal, connect, self._acks)
                elif name == "postgresql":
                    self._source = PostgresListener(signal, connect, self._acks)
                if self._source is not None:
                    self._source.start()
        return signal

    @property
    def source(self) -> SqliteWatcher | PostgresListener | None:
        """The wake-up source of other processes' commits, once a follower started it."""
        with self._lock:
            return self._source

    def follower(
        self,
        load: Load,
        event_filter: ApiEventFilter | None,
        cursor: int,
        limit: int,
        *,
        strict: bool = False,
        started: bool = True,
    ) -> Follower:
        """A follower of the log from `cursor` (checked already: `start_cursor`), `limit`
        events a page at most, reading the database with `load` when the window cannot
        answer; `strict`: a durable consumer's (see `Follower`). `StoreClosed` once the store
        closed. `started=False`: its cursor is checked later (an `AsyncFollower`'s), which
        counts it then (`started`)."""
        self._database.check_followable("follow events")
        signal = self.watched_signal()
        counters = self._database.counters
        follower = Follower(
            load, self.window, signal, event_filter, cursor, limit, strict=strict, counters=counters
        )
        if started:
            counters.follower_started()
        return follower

    def started(self) -> None:
        """A follower made with `started=False` checked its cursor: count it."""
        self._database.counters.follower_started()

    def start_cursor(self, after_seq: int | None) -> int:
        """Where a follower starts: `after_seq`, checked against the log's frontier and floor
        read by one statement (`check_cursor`: `CursorExpired`, `CursorAhead`), else the
        frontier now."""
        reading = self._database.reading_one_statement("start following events")
        with reading as read:
            version = read.events.version()
        if after_seq is None:
            return version.latest_seq
        check_cursor(after_seq, version.latest_seq, version.pruned_through, self._database.counters)
        return after_seq

    def close(self) -> None:
        """The store closes: every follower returns, for good, and the source stops."""
        self.signal.close()
        self._acks.close()
        with self._lock:
            source = self._source
        if source is not None:
            source.stop()


_INHERITED: list[object] = []
"""The sources a child process inherited across `fork`: kept, never closed."""
_FORKED = threading.Lock()
"""Taken by the first threads of a child process that ask for a `Following`'s signal."""
