"""Wake-ups for followers: one `CommitSignal` per store, moved by every source that can tell
that events may have committed.

A follower (`store.events.wait`, `follow`) reads the signal's generation, then the log; if the
page is empty it waits for the generation to move. A commit that ended before the generation was
read is in the page; one that ends later moves the generation: no wake-up is lost. Signals are
hints only: what a follower returns always comes from committed rows, read again.

Sources, one of each per store whatever the number of followers:
- commits of this process: the write path pulses right after each commit;
- other processes on SQLite: `SqliteWatcher`, a thread that reads `PRAGMA data_version` (a
  counter SQLite moves when another connection commits) every `SQLITE_POLL_S` while commits
  come, every `SQLITE_IDLE_POLL_S` after `SQLITE_QUIET_S` without one, and only while a
  follower waits;
- other processes and hosts on PostgreSQL: `PostgresListener`, a thread on one connection of its
  own that `LISTEN`s on `CHANNEL`; every transaction that appends events sends `NOTIFY` with
  its schema as the payload (it rides in the statement that takes the seqs, and PostgreSQL
  delivers it at commit); stores of other schemas of the same database ignore it. When that
  connection drops, the listener pulses (followers read the log again) and reconnects; until it
  is back, and wherever `LISTEN` cannot be used, it pulses every `FALLBACK_POLL_S` instead.

A second signal per store, `acks`, moves when a durable consumer's position may have moved
(`store.consumers.wait_until` waits for it): after each ack, register and reset of this
process; on SQLite whenever the watcher sees another connection's commit; on PostgreSQL on a
notification on `ACK_CHANNEL` of its own, which an ack sends and which does not move the
followers' signal (and whenever the listener reconnects or polls).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..storage.repositories.consumers import ACK_CHANNEL
from ..storage.repositories.events import CHANNEL

SQLITE_POLL_S = 0.005
"""How often the SQLite watcher reads `data_version` while a follower waits and commits come."""
SQLITE_QUIET_S = 0.1
"""After this long without another connection's commit, the watcher slows down..."""
SQLITE_IDLE_POLL_S = 0.025
"""... to reading `data_version` this often (the first commit after a quiet spell wakes
followers within it; the next ones within `SQLITE_POLL_S` again): idle followers cost a fifth
of the reads."""
FALLBACK_POLL_S = 0.25
"""How often followers are woken while PostgreSQL notifications are unavailable."""
RECONNECT_S = (0.05, 2.0)
"""The PostgreSQL listener's first and longest pause between reconnection attempts."""

_log = logging.getLogger("session_journal.wakeups")


class CommitSignal:
    """A generation counter that moves when events may have committed, and the followers
    waiting for it to move."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # taken directly on the hot path (`pulse`)
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._waiting = 0
        self._closed = False
        # Told of every pulse, interrupt and close, with the lock held: each must return at
        # once (an event loop's `call_soon_threadsafe`, see `aio`).
        self._listeners: list[Callable[[], None]] = []

    @property
    def generation(self) -> int:
        """The current generation: read it before reading the log."""
        return self._generation

    @property
    def closed(self) -> bool:
        """Whether the store closed (every wait returns at once)."""
        return self._closed

    def waiting(self) -> int:
        """How many waiters wait now: threads and tasks in `wait_past`, and one for each
        `Fanout` with registrations, whatever their number."""
        return self._waiting

    def pulse(self) -> None:
        """Events may have committed: wake every follower."""
        with self._lock:
            self._generation += 1
            if self._waiting:  # the followers waiting in `wait_past` (the sources wait for
                self._changed.notify_all()  # `_waiting` to grow, not for a pulse)
            self._tell()

    def _tell(self) -> None:
        for listener in self._listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` (with the signal's lock held: it must return at once and never call
        back) on every pulse, interrupt and close: how waiters that are not threads (an event
        loop's tasks) learn that the generation moved."""
        with self._changed:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Stop calling `listener` (nothing if it was not added)."""
        with self._changed:
            # `!=`, not `is not`: each access to a bound method makes a new, equal object.
            self._listeners = [known for known in self._listeners if known != listener]

    def waiter_joined(self) -> None:
        """A waiter that is not a thread (see `add_listener`) starts waiting: counted as a
        thread in `wait_past` is, so that the sources that run only while someone waits run."""
        with self._changed:
            self._waiting += 1
            if self._waiting == 1:
                self._changed.notify_all()

    def waiter_left(self) -> None:
        """The waiter of `waiter_joined` stops waiting."""
        with self._changed:
            self._waiting -= 1

    def wait_past(
        self, generation: int, timeout: float, stop: threading.Event | None = None
    ) -> bool:
        """Block until the generation is no longer `generation`, the signal closes, `stop` is
        set (then `interrupt()` wakes the wait), or `timeout` seconds pass; whether one of the
        three happened."""

        def over() -> bool:
            return (
                self._generation != generation
                or self._closed
                or (stop is not None and stop.is_set())
            )

        with self._changed:
            if over():
                return True
            self._waiting += 1
            try:
                if self._waiting == 1:  # a source that sleeps while nobody waits wakes now
                    self._changed.notify_all()
                return self._changed.wait_for(over, timeout)
            finally:
                self._waiting -= 1

    def interrupt(self) -> None:
        """Wake the waiters without moving the generation: each looks at its own `stop`, the
        others wait on (a follower closing must not make every follower read again)."""
        with self._changed:
            self._changed.notify_all()
            self._tell()

    def wait_for_waiters(self, timeout: float) -> bool:
        """For a source that runs only while someone waits: block until a follower waits (or
        the signal closes); whether one does."""
        with self._changed:
            return self._changed.wait_for(lambda: self._waiting > 0 or self._closed, timeout)

    def close(self) -> None:
        """The store closes: wake every follower, for good."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            self._tell()


class _Source:
    """A daemon thread feeding a `CommitSignal`, started once, stopped by `stop()`."""

    name = "source"

    def __init__(self, signal: CommitSignal, acks: CommitSignal | None = None) -> None:
        """`signal`: the followers'; `acks`: the consumers' positions' (see the module)."""
        self._signal = signal
        self._acks = acks
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()
        """Set once the source reads the database and has pulsed for what committed while it
        started (PostgreSQL: while LISTEN is in force), for tests."""

    def start(self) -> None:
        """Start the thread unless it runs (idempotent, thread-safe)."""
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(
                    target=self._guarded, name=f"session-journal {self.name}", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a few polls at most)."""
        self._stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _guarded(self) -> None:
        try:
            self._run()
        except Exception:  # never silently: followers then fall back to their own timeouts
            _log.exception("%s stopped", self.name)
            self._pulse_all()

    def _pulse_all(self) -> None:
        """Anything may have committed: both signals move."""
        self._signal.pulse()
        if self._acks is not None:
            self._acks.pulse()

    def _run(self) -> None:
        raise NotImplementedError


class SqliteWatcher(_Source):
    """Reads `PRAGMA data_version` on a connection of its own while a follower waits (every
    `SQLITE_POLL_S`, slowing to `SQLITE_IDLE_POLL_S` when nothing commits), and pulses when it
    moved (another connection committed)."""

    name = "SQLite watcher"

    def __init__(
        self, signal: CommitSignal, connect: Callable[[], Any], acks: CommitSignal | None = None
    ) -> None:
        super().__init__(signal, acks)
        self._connect = connect  # a new sqlite3 connection (autocommit: no read stays open)

    def _run(self) -> None:
        connection = self._connect()
        try:
            # Compared with the value of the previous read however long ago (a change made
            # while nobody waited gives one needless pulse); starting afresh when a follower
            # comes would miss a commit made between its read of the log and ours.
            last = self._version(connection)
            # What committed before that first reading (while the watcher started, after a
            # follower's read of the log) is read again, as the listener does after LISTEN.
            self._pulse_all()
            self.listening.set()
            quiet = 0  # reads in a row that found no commit
            while not self._stopping.is_set():
                if not self._signal.wait_for_waiters(timeout=0.5):
                    continue
                version = self._version(connection)
                if version != last:
                    self._pulse_all()
                    quiet = 0
                else:
                    quiet += 1
                last = version
                idle = quiet * SQLITE_POLL_S >= SQLITE_QUIET_S
                self._stopping.wait(SQLITE_IDLE_POLL_S if idle else SQLITE_POLL_S)
        finally:
            connection.close()

    @staticmethod
    def _version(connection: Any) -> Any:
        return connection.execute("PRAGMA data_version").fetchone()[0]


class PostgresListener(_Source):
    """`LISTEN`s on `CHANNEL` (and `ACK_CHANNEL`) on a connection of its own and pulses the
    followers' signal (the acks' signal) on each notification. When the connection drops:
    pulse both, poll every `FALLBACK_POLL_S` and reconnect with back-off."""

    name = "PostgreSQL listener"

    def __init__(
        self, signal: CommitSignal, connect: Callable[[], Any], acks: CommitSignal | None = None
    ) -> None:
        super().__init__(signal, acks)
        self._connect = connect  # a new psycopg connection (autocommit)
        self._connection: Any = None
        self.connections = 0  # connections made, for tests

    def _run(self) -> None:
        pause = RECONNECT_S[0]
        while not self._stopping.is_set():
            try:
                self._listen()
                pause = RECONNECT_S[0]
            except Exception as error:  # the connection dropped or could not be made
                self.listening.clear()
                _log.warning("PostgreSQL listener: %s; polling until it reconnects", error)
            self._close_connection()
            self._pulse_all()  # followers read the log again: nothing is lost meanwhile
            deadline = time.monotonic() + pause
            while not self._stopping.is_set() and time.monotonic() < deadline:
                self._stopping.wait(min(FALLBACK_POLL_S, pause))
                self._pulse_all()
            pause = min(pause * 2, RECONNECT_S[1])

    def _listen(self) -> None:
        self._connection = connection = self._connect()
        self.connections += 1
        schema = connection.execute("SELECT current_schema()").fetchone()[0]
        connection.execute(f"LISTEN {CHANNEL}")
        if self._acks is not None:
            connection.execute(f"LISTEN {ACK_CHANNEL}")
        self._pulse_all()  # what committed before LISTEN took effect is read again
        self.listening.set()
        while not self._stopping.is_set():
            for notification in connection.notifies(timeout=0.2, stop_after=1):
                if notification.payload != schema:  # another schema's store
                    continue
                if notification.channel == ACK_CHANNEL and self._acks is not None:
                    self._acks.pulse()
                else:
                    self._signal.pulse()

    def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # it may be broken already
                connection.close()

    def stop(self) -> None:
        """Stop listening and close the connection."""
        super().stop()
        self._close_connection()
