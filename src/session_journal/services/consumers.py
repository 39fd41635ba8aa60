"""Durable consumers: named positions in the log that the store keeps (`store.consumers`).

A consumer is a reader of the log, a projector say, whose position the store keeps: it reads the
events after its position (`follow(name)`) and acks the seq it has handled (`ack`), with its own
writes when they are in the store's database (`uow=`), so that a restart goes on where the last
commit left it. Retention waits for consumers (`store.events.prune`).

The rules, each kept in the transaction that decides it:
- a position never moves back by an ack (an ack at or below it only records the ack's time),
  and never above the frontier (`InvalidRecord`);
- `register(start=seq)` and `reset(to=seq)` check the floor of the pruned log with the log's
  row locked (`lock_log`), as prune's first transaction takes it before it reads the positions
  and raises the floor: no race leaves a consumer's position below the floor unseen;
- the first `register` raises the database's minimum compatible level to 12 (older code, which
  knows no consumers, would prune past them).
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import Field

from .._arguments import Given, Int64, Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id
from ..api_events import ApiEventFilter
from ..errors import (
    ConsumerNotFound,
    CursorAhead,
    CursorExpired,
    InvalidRecord,
    StoreClosed,
    TransientStorageError,
)
from ..follow.cursors import check_cursor
from ..follow.follower import Follower
from ..follow.following import Following, Load
from ..records import ConsumerStatus
from ..storage.lone import Ack
from ..storage.protocols import LoopWriter, ReadContext, Transactions, WriteContext
from ..storage.repositories import StoredConsumer
from .events import _timeout, page_size

MAX_IDLE_S = 366 * 86_400.0
"""The longest `max_idle_s` of a consumer (a year and a day)."""

Start = Literal["beginning", "now"] | Int64
"""Where a consumer starts (`register`) or goes back to (`reset`): `"beginning"`, the oldest
retained event; `"now"`, the frontier at the call; a seq, after which it reads (0: the
beginning)."""

MaxIdle = Annotated[float, Field(ge=1.0, le=MAX_IDLE_S, allow_inf_nan=False)]


class ConsumerService:
    """`store.consumers`."""

    def __init__(self, transactions: Transactions, load: Load, following: Following) -> None:
        """`load`: how a consumer's follower reads a page (`store.events.load`); `following`:
        the store's (`Store.following`), on which followers and `wait_until` wait."""
        self._transactions = transactions
        self._load = load
        self._following = following

    @validate_arguments()
    def register(
        self,
        name: Id,
        *,
        filter: Given[ApiEventFilter] | None = None,
        start: Start = "beginning",
        max_idle_s: MaxIdle | None = None,
    ) -> ConsumerStatus:
        """Register the consumer `name` (the session id rules) reading the events `filter`
        selects (`None`: every event) after `start`: `"beginning"` (the oldest retained event),
        `"now"` (the frontier) or a seq (`CursorExpired` below the floor of the pruned log,
        `CursorAhead` above the frontier). With `max_idle_s` (1 s to a year), a consumer that
        has not acked for longer no longer holds retention back.

        Registering a name again with an equal filter returns the consumer as it is (its
        position, `start` and `max_idle_s` unchanged); with another filter, `InvalidRecord`."""
        chosen = filter or ApiEventFilter()
        filter_json = chosen.model_dump_json(exclude_none=True)
        idle_ms = None if max_idle_s is None else round(max_idle_s * 1000)

        def same_filter(existing: StoredConsumer) -> None:
            if _filter_of(existing) != chosen:
                raise InvalidRecord(
                    f"consumer {name!r} is registered with another filter "
                    f"({existing.filter_json}); remove it first to change its filter; nothing "
                    "was written"
                )

        def work(uow: WriteContext) -> None:
            # Registered already (each replica of a projector registers when it starts): no
            # lock taken, so a replica acking it in a transaction that appends is never
            # waited for in the wrong order.
            existing = uow.consumers.get(name)
            if existing is not None:
                return same_filter(existing)
            # A new consumer: its position checked against the floor with the log's row
            # locked (as prune reads the positions); the log's row first, then the consumer's.
            latest, floor = uow.events.lock_log()
            added = StoredConsumer(
                name, filter_json, _position(start, latest, floor), now_ms(), None, idle_ms
            )
            if not uow.consumers.insert(added):  # registered meanwhile: as if it had been
                registered = uow.consumers.get(name)
                if registered is None:  # and removed since
                    raise TransientStorageError(
                        f"register consumer {name!r}: another process registered and removed "
                        "it meanwhile; nothing was written; try again"
                    )
                return same_filter(registered)
            uow.commit()

        self._transactions.submit(work, f"register consumer {name!r}", solo=True)
        self._moved()
        return self.get(name)

    @validate_arguments()
    def get(self, name: Id, *, uow: Passed[WriteContext | None] = None) -> ConsumerStatus:
        """The consumer's status now; `ConsumerNotFound` if it is not registered."""
        with self._transactions.reading(f"get consumer {name!r}", uow) as read:
            stored = read.consumers.get(name)
            if stored is None:
                raise ConsumerNotFound(f"consumer {name!r} is not registered")
            return _status(read, stored, read.events.latest_seq(), now_ms())

    @validate_arguments()
    def list(self) -> list[ConsumerStatus]:
        """Every consumer's status, by name, from one read."""
        with self._transactions.reading("list consumers") as read:
            latest, now = read.events.latest_seq(), now_ms()
            return [_status(read, stored, latest, now) for stored in read.consumers.list()]

    @validate_arguments()
    def remove(self, name: Id) -> None:
        """Remove the consumer (it no longer holds retention back); `ConsumerNotFound` if it
        is not registered."""

        def work(uow: WriteContext) -> None:
            if not uow.consumers.delete(name):
                raise ConsumerNotFound(f"consumer {name!r} is not registered")
            uow.consumers.notify_moved()  # a waiter learns it is gone
            uow.commit()

        self._transactions.submit(work, f"remove consumer {name!r}")
        self._moved()

    @validate_arguments()
    def reset(self, name: Id, *, to: Start) -> ConsumerStatus:
        """Move the consumer to `to`, back or forward (`register`'s `start` forms:
        `CursorExpired` below the floor, `CursorAhead` above the frontier); it counts as an ack
        for `max_idle_s`. `ConsumerNotFound` if it is not registered."""

        def work(uow: WriteContext) -> None:
            # The consumer's row first (as an ack in a caller's transaction that then appends
            # takes it before the log's row), then the log's, under which the floor is checked.
            if uow.consumers.lock(name) is None:
                raise ConsumerNotFound(f"consumer {name!r} is not registered")
            latest, floor = uow.events.lock_log()
            uow.consumers.set_position(name, _position(to, latest, floor), now_ms())
            uow.consumers.notify_moved()
            uow.commit()

        self._transactions.submit(work, f"reset consumer {name!r}", solo=True)
        self._moved()
        return self.get(name)

    @validate_arguments()
    def ack(self, name: Id, seq: Int64, *, uow: Passed[WriteContext | None] = None) -> None:
        """Record that the consumer has handled the events through `seq`: its position becomes
        `seq` unless it is there or past it already (an ack never moves it back; it still
        records the ack's time). `seq` may be any seq up to the frontier (`InvalidRecord` above
        it), such as the `next_after_seq` of an empty filtered page. With `uow=` it commits with
        the caller's own writes: a projector whose read model is in the store's database handles
        each event exactly once. `ConsumerNotFound` if it is not registered."""

        acked, action = self._ack(name, seq)
        if not self._transactions.submit_lone(acked, action, uow):
            self._refused(name, seq, uow)
        if uow is None:
            self._moved()
        else:
            uow.after_commit(self._moved)  # the caller's commit wakes `wait_until`

    @validate_arguments()
    def _ack_write(self, name: Id, seq: Int64) -> tuple[Ack, str]:
        """The lone write `ack(name, seq)` submits, checked as it checks it, and the name of
        the call for errors: for its async twin, which runs it on its event loop where it can
        (`loop_writes`)."""
        return self._ack(name, seq)

    def _ack(self, name: str, seq: int) -> tuple[Ack, str]:
        return Ack(name, seq, now_ms()), f"ack consumer {name!r}"

    def _acked(self, name: str, seq: int, moved: bool) -> None:
        """After the lone write of `ack_write` ran (and committed): raise as `ack` does when
        it matched no row, else wake `wait_until`."""
        if not moved:
            self._refused(name, seq, None)
        self._moved()

    def _refused(self, name: str, seq: int, uow: WriteContext | None) -> None:
        """Why an ack matched no row (nothing was written): `ConsumerNotFound`, or a seq above
        the frontier (`InvalidRecord`); read in the caller's unit of work, if any."""
        with self._transactions.reading(f"ack consumer {name!r}", uow) as read:
            registered = read.consumers.get(name) is not None
            latest = read.events.latest_seq()
        if not registered:
            raise ConsumerNotFound(f"consumer {name!r} is not registered")
        if seq > latest:
            problem = f"seq {seq} is above the frontier {latest}"
        else:  # events committed since the ack ran
            problem = f"seq {seq} was above the frontier when it ran (it is {latest} now)"
        raise InvalidRecord(f"ack of consumer {name!r}: {problem}; nothing was written")

    @property
    def loop_writes(self) -> LoopWriter | None:
        """Where an async store runs this service's lone writes (acks) on its event loop
        (PostgreSQL, `storage/loop_writes.py`); `None` where it runs them on a worker."""
        return self._transactions.loop_writes

    @validate_arguments()
    def follow(self, name: Id, *, limit: int = 100) -> Follower:
        """A `Follower` of the consumer: the pages of the events its filter selects, after its
        stored position, as they commit (as `store.events.follow` gives them). Acks stay
        explicit: the follower moves its own cursor, not the consumer's position.
        `ConsumerNotFound` if it is not registered; `CursorExpired` if its position is below the
        floor of the pruned log (it was idle past `max_idle_s`, or a prune was forced past it:
        `reset` it). A consumer at the very beginning of the log (position 0) expires too once
        anything is pruned, also while it follows: its events are gone."""
        event_filter, position = self._follow_start(name)
        return self._following.follower(
            self._load, event_filter, position, page_size(limit), strict=True
        )

    def _follow_start(self, name: str) -> tuple[ApiEventFilter, int]:
        """The filter and position a follower of the consumer starts from, checked against the
        floor and the frontier read with them (`follow`'s errors)."""
        with self._transactions.reading(f"follow consumer {name!r}") as read:
            stored = read.consumers.get(name)
            if stored is None:
                raise ConsumerNotFound(f"consumer {name!r} is not registered")
            version = read.events.version()
        check_position(stored.position, version.latest_seq, version.pruned_through)
        return _filter_of(stored), stored.position

    @validate_arguments()
    def wait_until(self, name: Id, seq: Int64, *, timeout: object) -> bool:
        """Block until the consumer's position is at or past `seq` (read-your-writes: a writer
        waits for a projector to have handled its event), then `True`; `False` once `timeout`
        seconds (0 to 3,600) pass first. Woken by acks, of this process or another, not by
        polling: on PostgreSQL an ack notifies on a channel of its own. `ConsumerNotFound` if it
        is not registered (or is removed meanwhile)."""
        seconds = _timeout(timeout)
        self._transactions.check_followable("wait for a consumer")
        following = self._following
        acks = following.watched_acks()
        deadline = time.monotonic() + seconds
        following.signal.waiter_joined()  # the SQLite watcher reads while someone waits
        try:
            while True:
                generation = acks.generation  # before the read: a later ack moves it
                if self.position(name) >= seq:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if acks.closed:
                    raise StoreClosed("wait for a consumer: the store was closed")
                acks.wait_past(generation, left)
        finally:
            following.signal.waiter_left()

    @validate_arguments()
    def position(self, name: Id) -> int:
        """The consumer's position now (one read, no lag computed); `ConsumerNotFound` if it is
        not registered."""
        with self._transactions.reading(f"read the position of consumer {name!r}") as read:
            stored = read.consumers.get(name)
        if stored is None:
            raise ConsumerNotFound(f"consumer {name!r} is not registered")
        return stored.position

    def _moved(self) -> None:
        """A position moved in this process: `wait_until` reads again."""
        self._following.acks.pulse()


def check_position(position: int, latest: int, floor: int) -> None:
    """A consumer's position, checked as a follower's cursor is, but stricter: below the floor
    it has expired (`CursorExpired`), 0 included (a consumer at 0 has read nothing, and some of
    its events are gone); above the frontier it comes from another database (`CursorAhead`)."""
    if position < floor:
        raise CursorExpired(floor, position)
    check_cursor(position, latest, floor)


def _filter_of(stored: StoredConsumer) -> ApiEventFilter:
    return ApiEventFilter.model_validate_json(stored.filter_json)


def _position(start: str | int, latest: int, floor: int) -> int:
    """The position `start` stands for, with the frontier and floor read under the log's lock."""
    if start == "beginning" or start == 0:
        return floor
    if start == "now":
        return latest
    assert isinstance(start, int)
    if start < floor:
        raise CursorExpired(floor, start)
    if start > latest:
        raise CursorAhead(
            f"seq {start} is above the frontier {latest}: it comes from another database or a "
            "restored backup; nothing was written"
        )
    return start


def _status(read: ReadContext, stored: StoredConsumer, latest: int, now: int) -> ConsumerStatus:
    """The status of a stored consumer at a read of the frontier `latest` at `now`."""
    recorded = read.events.recorded_at_after(stored.position)
    lag_ms = 0 if recorded is None else max(0, now - recorded)
    return ConsumerStatus(
        name=stored.name,
        filter=_filter_of(stored),
        position=stored.position,
        latest_seq=latest,
        lag=max(0, latest - stored.position),
        lag_seconds=lag_ms / 1000,
        registered_at_ms=stored.registered_at_ms,
        last_ack_at_ms=stored.last_ack_at_ms,
        max_idle_s=None if stored.max_idle_ms is None else stored.max_idle_ms / 1000,
    )
