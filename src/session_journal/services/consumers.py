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

Leases (`acquire`): one holder at a time, for a time by the database's clock
(`storage/clock.py`). Each lease taken is a new generation; while a lease is live an ack must carry
it (`ack(..., lease=)`), and an ack of an older generation, an expired lease or none is refused
by the ack's own statement (`LeaseLost`: nothing changes, and a unit of work in which it was
refused cannot commit). Two replicas of a projector never both move its position; a replica
paused past its lease (a stopped VM, a long GC) learns it at its next ack or renewal. The first
`acquire` raises the minimum compatible level to 13. Lease calls take the consumer's row only,
each in a transaction of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Annotated, Literal

from pydantic import Field

from .._arguments import Given, Int64, Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id
from ..api_events import ApiEventFilter
from ..errors import (
    ConsumerNotFound,
    CursorAhead,
    InvalidRecord,
    LeaseHeld,
    LeaseLost,
    StoreClosed,
    TransientStorageError,
)
from ..follow.cursors import check_cursor, expired
from ..follow.follower import Follower
from ..follow.following import Following, Load
from ..follow.wakeups import CommitSignal
from ..records import ConsumerStatus
from ..storage.counters import StoreCounters
from ..storage.lone import Ack
from ..storage.protocols import LoopWriter, ReadContext, Transactions, WriteContext
from ..storage.repositories import LeaseHolder, LeaseTaken, StoredConsumer
from .events import MAX_WAIT_S, _timeout, page_size

MAX_IDLE_S = 366 * 86_400.0
"""The longest `max_idle_s` of a consumer (a year and a day)."""

Start = Literal["beginning", "now"] | Int64
"""Where a consumer starts (`register`) or goes back to (`reset`): `"beginning"`, the oldest
retained event; `"now"`, the frontier at the call; a seq, after which it reads (0: the
beginning)."""

MaxIdle = Annotated[float, Field(ge=1.0, le=MAX_IDLE_S, allow_inf_nan=False)]

STUCK_AFTER_S = 300.0
"""A consumer's default `stuck_after_s`."""

MIN_LEASE_S, MAX_LEASE_S = 1.0, 3600.0
"""The bounds of a lease's `ttl_s` (a second to an hour)."""

LeaseTtl = Annotated[float, Field(ge=MIN_LEASE_S, le=MAX_LEASE_S, allow_inf_nan=False)]
LeaseWait = Annotated[float, Field(ge=0.0, le=MAX_WAIT_S, allow_inf_nan=False)]


class HeldLease:
    """What a consumer's lease is, for `ack(..., lease=)`: its consumer, holder and generation,
    and when it expires as last taken or renewed (milliseconds since the epoch, by the
    database's clock). `Lease` and `AsyncLease` add renewing and releasing it."""

    __slots__ = ("_expires_at_ms", "_generation", "_holder", "_name", "_ttl_s")

    def __init__(
        self, name: str, holder: str, generation: int, expires_at_ms: int, ttl_s: float
    ) -> None:
        self._name = name
        self._holder = holder
        self._generation = generation
        self._expires_at_ms = expires_at_ms
        self._ttl_s = ttl_s

    @property
    def name(self) -> str:
        """The consumer's name."""
        return self._name

    @property
    def holder(self) -> str:
        """The holder given to `acquire`."""
        return self._holder

    @property
    def generation(self) -> int:
        """The lease's generation: one more than the lease before it."""
        return self._generation

    @property
    def expires_at_ms(self) -> int:
        """When it expires unless renewed, as last taken or renewed (database clock)."""
        return self._expires_at_ms

    @property
    def ttl_s(self) -> float:
        """The time to live it was taken with, which `renew` gives again by default."""
        return self._ttl_s

    def _token(self) -> tuple[str, int]:
        return self._holder, self._generation

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self._name!r}, holder={self._holder!r}, "
            f"generation={self._generation}, expires_at_ms={self._expires_at_ms})"
        )


class Lease(HeldLease):
    """A consumer's lease, from `store.consumers.acquire`: pass it to every `ack` while it is
    held, `renew()` it well before it expires (a third of its `ttl_s` is usual), `release()` it
    when done (leaving its `with` block releases it too)."""

    __slots__ = ("_service",)

    def __init__(self, service: ConsumerService, taken: HeldLease) -> None:
        super().__init__(
            taken.name, taken.holder, taken.generation, taken.expires_at_ms, taken.ttl_s
        )
        self._service = service

    def renew(self, *, ttl_s: float | None = None) -> None:
        """Extend the lease to `ttl_s` from now (default: the `ttl_s` it was taken with) by the
        database's clock; `LeaseLost` if it expired, was released or was taken over meanwhile
        (stop handling events: another replica may be at work), `ConsumerNotFound` if the
        consumer was removed."""
        self._expires_at_ms = self._service._renew(self, self._ttl_s if ttl_s is None else ttl_s)

    def release(self) -> bool:
        """End the lease now, so another replica takes over without waiting for it to expire;
        whether it was still this one's (never raises `LeaseLost`: releasing a lost lease
        changes nothing)."""
        return self._service._release(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


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
        stuck_after_s: MaxIdle = STUCK_AFTER_S,
    ) -> ConsumerStatus:
        """Register the consumer `name` (the session id rules) reading the events `filter`
        selects (`None`: every event) after `start`: `"beginning"` (the oldest retained event),
        `"now"` (the frontier) or a seq (`CursorExpired` below the floor of the pruned log,
        `CursorAhead` above the frontier). With `max_idle_s` (1 s to a year), a consumer that
        has not acked for longer no longer holds retention back. It is *stuck*
        (`ConsumerStatus.stuck`) while events wait for it and it has not acked for longer than
        `stuck_after_s` (1 s to a year; 5 minutes by default).

        Registering a name again with an equal filter returns the consumer as it is (its
        position, `start`, `max_idle_s` and `stuck_after_s` unchanged); with another filter,
        `InvalidRecord`."""
        chosen = filter or ApiEventFilter()
        filter_json = chosen.model_dump_json(exclude_none=True)
        idle_ms = None if max_idle_s is None else round(max_idle_s * 1000)
        stuck_after_ms = round(stuck_after_s * 1000)

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
                name,
                filter_json,
                _position(start, latest, floor, self._transactions.counters),
                now_ms(),
                None,
                idle_ms,
                stuck_after_ms=stuck_after_ms,
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
            latest, recorded = (
                read.events.latest_seq(),
                read.events.recorded_at_after(stored.position),
            )
            return status_of(stored, recorded, latest, now_ms())

    @validate_arguments()
    def list(self) -> list[ConsumerStatus]:
        """Every consumer's status, by name, from one read."""
        with self._transactions.reading("list consumers") as read:
            latest, now = read.events.latest_seq(), now_ms()
            return [
                status_of(stored, recorded, latest, now)
                for stored, recorded in read.consumers.list_with_next()
            ]

    @validate_arguments()
    def remove(self, name: Id, *, unless_held: bool = False) -> None:
        """Remove the consumer (it no longer holds retention back); `ConsumerNotFound` if it
        is not registered. With `unless_held=True`, `LeaseHeld` (nothing changed) while a
        replica holds its live lease, judged under the row's lock: the replica would go on
        acking a consumer registered again."""

        def work(uow: WriteContext) -> None:
            if unless_held:
                _locked(uow, name, unless_held=True)
            if not uow.consumers.delete(name):
                raise ConsumerNotFound(f"consumer {name!r} is not registered")
            uow.consumers.notify_moved()  # a waiter learns it is gone
            uow.commit()

        self._transactions.submit(work, f"remove consumer {name!r}", solo=unless_held)
        self._moved()

    @validate_arguments()
    def reset(self, name: Id, *, to: Start, unless_held: bool = False) -> ConsumerStatus:
        """Move the consumer to `to`, back or forward (`register`'s `start` forms:
        `CursorExpired` below the floor, `CursorAhead` above the frontier); it counts as an ack
        for `max_idle_s`. `ConsumerNotFound` if it is not registered. With `unless_held=True`,
        `LeaseHeld` (nothing changed) while a replica holds its live lease, judged under the
        row's lock: its next ack would move the position on from its own page."""

        def work(uow: WriteContext) -> None:
            # The consumer's row first (as an ack in a caller's transaction that then appends
            # takes it before the log's row), then the log's, under which the floor is checked.
            _locked(uow, name, unless_held=unless_held)
            latest, floor = uow.events.lock_log()
            position = _position(to, latest, floor, self._transactions.counters)
            uow.consumers.set_position(name, position, now_ms())
            uow.consumers.notify_moved()
            uow.commit()

        self._transactions.submit(work, f"reset consumer {name!r}", solo=True)
        self._moved()
        return self.get(name)

    @validate_arguments()
    def ack(
        self,
        name: Id,
        seq: Int64,
        *,
        lease: Passed[HeldLease | None] = None,
        uow: Passed[WriteContext | None] = None,
    ) -> None:
        """Record that the consumer has handled the events through `seq`: its position becomes
        `seq` unless it is there or past it already (an ack never moves it back; it still
        records the ack's time). `seq` may be any seq up to the frontier (`InvalidRecord` above
        it), such as the `next_after_seq` of an empty filtered page. With `uow=` it commits with
        the caller's own writes: a projector whose read model is in the store's database handles
        each event exactly once. `ConsumerNotFound` if it is not registered.

        While the consumer has a live lease (`acquire`), the ack must carry it (`lease=`): an
        ack of an older generation, of an expired or released lease, or without the live one
        raises `LeaseLost` and changes nothing; given `uow=`, that unit of work can no longer
        commit (its commit raises `LeaseLost`), so the caller's writes roll back with it. A
        consumer whose lease was never taken, or was released, acks without one."""

        acked, action = self._ack(name, seq, lease)
        outcome = self._transactions.submit_lone(acked, action, uow)
        if outcome is not True:
            self._refused(acked, outcome, uow)
        if uow is None:
            self._moved()
        else:
            uow.after_commit(self._moved)  # the caller's commit wakes `wait_until`

    @validate_arguments()
    def _ack_write(
        self, name: Id, seq: Int64, lease: Passed[HeldLease | None] = None
    ) -> tuple[Ack, str]:
        """The lone write `ack(name, seq, lease=lease)` submits, checked as it checks it, and the
        name of the call for errors: for its async twin, which runs it on its event loop where
        it can (`loop_writes`)."""
        return self._ack(name, seq, lease)

    def _ack(self, name: str, seq: int, lease: HeldLease | None) -> tuple[Ack, str]:
        if lease is None:
            return Ack(name, seq, now_ms()), f"ack consumer {name!r}"
        if not isinstance(lease, HeldLease):
            raise InvalidRecord(
                f"lease must be a Lease or AsyncLease (from consumers.acquire), got "
                f"{type(lease).__name__}; nothing was written"
            )
        if lease.name != name:
            raise InvalidRecord(
                f"ack of consumer {name!r} given the lease of consumer {lease.name!r}; nothing "
                "was written"
            )
        action = f"ack consumer {name!r} (lease of {lease.holder!r}, generation {lease.generation})"
        return Ack(name, seq, now_ms(), lease._token()), action

    def _acked(self, write: Ack, outcome: bool | None) -> None:
        """After the lone write of `ack_write` ran (and committed): raise as `ack` does when
        it was refused, else wake `wait_until`."""
        if outcome is not True:
            self._refused(write, outcome, None)
        self._moved()

    def _refused(self, write: Ack, outcome: bool | None, uow: WriteContext | None) -> None:
        """Why an ack was refused (nothing was written): its lease (`False`: `LeaseLost`, and a
        unit of work given cannot commit), or it matched no row: `ConsumerNotFound`, or a seq
        above the frontier (`InvalidRecord`); read in the caller's unit of work, if any."""
        name, seq = write.name, write.seq
        with self._transactions.reading(f"ack consumer {name!r}", uow) as read:
            registered = read.consumers.get(name)
            latest = read.events.latest_seq()
            holding = None if outcome is None else _holder_of(read, name)
        if holding is not None:
            lost = _ack_lost(name, write.lease, holding)
            if uow is not None:
                uow.refuse_commit(lost)
            raise lost
        if registered is None:
            raise ConsumerNotFound(f"consumer {name!r} is not registered")
        if seq > latest:
            problem = f"seq {seq} is above the frontier {latest}"
        else:  # events committed since the ack ran
            problem = f"seq {seq} was above the frontier when it ran (it is {latest} now)"
        raise InvalidRecord(f"ack of consumer {name!r}: {problem}; nothing was written")

    @validate_arguments()
    def acquire(self, name: Id, holder: Id, *, ttl_s: LeaseTtl, wait_s: LeaseWait = 0.0) -> Lease:
        """Take the consumer's lease for `holder` (a replica's id, the session id rules: host
        and pid, say) for `ttl_s` seconds (1 s to an hour) by the database's clock. While
        another holder's lease is live, wait up to `wait_s` seconds (0 to 3,600) for it to be
        released or to expire, then `LeaseHeld` (naming the holder and when its lease expires).
        Each lease taken is a new generation, also by the holder that held it (a replica
        restarted under the same id takes over from its old self at once). `ConsumerNotFound`
        if it is not registered."""
        return Lease(self, self._acquire(name, holder, ttl_s, wait_s))

    def _acquire(self, name: str, holder: str, ttl_s: float, wait_s: float) -> HeldLease:
        """`acquire`'s lease, waiting on the acks' signal (a release notifies it) or until the
        lease held expires."""
        with self._acks_watched(wait_s) as acks:
            deadline = time.monotonic() + wait_s
            holding: LeaseHolder | None = None  # as the last attempt or read found it
            while True:
                seen = acks.generation  # before the read or attempt: a later release moves it
                if holding is not None:  # woken: a read, no write while the lease stays live
                    holding = self._holder(name)
                if holding is None or not _live(holding):
                    taken = self._try_acquire(name, holder, ttl_s)
                    if isinstance(taken, HeldLease):
                        return taken
                    holding = taken
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _held(name, holding)
                acks.wait_past(seen, _lease_wait(holding, left))

    def _holder(self, name: str) -> LeaseHolder:
        """Who holds the consumer's lease now (a read)."""
        with self._transactions.reading(f"acquire the lease of consumer {name!r}") as read:
            return _holder_of(read, name)

    def _try_acquire(self, name: str, holder: str, ttl_s: float) -> HeldLease | LeaseHolder:
        """One attempt: the lease taken, or who holds it (live at the attempt)."""

        def work(uow: WriteContext) -> LeaseTaken | LeaseHolder:
            taken = uow.consumers.acquire(name, holder, round(ttl_s * 1000))
            if taken is not None:
                uow.commit()
                return taken
            return _holder_of(uow, name)

        outcome = self._transactions.submit(
            work, f"acquire the lease of consumer {name!r}", solo=True
        )
        if isinstance(outcome, LeaseTaken):
            return HeldLease(name, holder, outcome.generation, outcome.expires_at_ms, ttl_s)
        return outcome

    def _renew(self, lease: HeldLease, ttl_s: float) -> int:
        """`Lease.renew`: the new expiry."""
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float):
            raise InvalidRecord(f"ttl_s must be a number of seconds, got {type(ttl_s).__name__}")
        if not MIN_LEASE_S <= ttl_s <= MAX_LEASE_S:  # NaN too
            raise InvalidRecord(
                f"ttl_s must be between {MIN_LEASE_S:g} and {MAX_LEASE_S:g} seconds, got "
                f"{ttl_s!r}; nothing was written"
            )
        holder, generation = lease._token()

        def work(uow: WriteContext) -> int | LeaseHolder:
            renewed = uow.consumers.renew(lease.name, holder, generation, round(ttl_s * 1000))
            if renewed is not None:
                uow.commit()
                return renewed
            return _holder_of(uow, lease.name)

        outcome = self._transactions.submit(
            work, f"renew the lease of consumer {lease.name!r}", solo=True
        )
        if isinstance(outcome, LeaseHolder):
            raise _lost(lease, outcome, "renew it")
        return outcome

    def _release(self, lease: HeldLease) -> bool:
        """`Lease.release`: whether it was still the consumer's."""
        holder, generation = lease._token()

        def work(uow: WriteContext) -> bool:
            released = uow.consumers.release(lease.name, holder, generation)
            if released:
                uow.consumers.notify_moved()  # a replica waiting in `acquire` tries again
                uow.commit()
            return released

        action = f"release the lease of consumer {lease.name!r}"
        released: bool = self._transactions.submit(work, action, solo=True)
        if released:
            self._moved()
        return released

    @contextmanager
    def _acks_watched(self, seconds: float) -> Iterator[CommitSignal]:
        """The acks' signal, watched for `seconds` of waiting (SQLite's watcher reads while
        someone waits; PostgreSQL's listener hears other processes' acks and releases)."""
        self._transactions.check_followable("wait for a consumer")
        following = self._following
        if seconds <= 0:  # nobody waits: nothing to start
            yield following.acks
            return
        acks = following.watched_acks()
        following.signal.waiter_joined()
        try:
            yield acks
        finally:
            following.signal.waiter_left()

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
        check_position(
            stored.position, version.latest_seq, version.pruned_through, self._transactions.counters
        )
        return _filter_of(stored), stored.position

    @validate_arguments()
    def wait_until(self, name: Id, seq: Int64, *, timeout: object) -> bool:
        """Block until the consumer's position is at or past `seq` (read-your-writes: a writer
        waits for a projector to have handled its event), then `True`; `False` once `timeout`
        seconds (0 to 3,600) pass first. Woken by acks, of this process or another, not by
        polling: on PostgreSQL an ack notifies on a channel of its own. `ConsumerNotFound` if it
        is not registered (or is removed meanwhile)."""
        seconds = _timeout(timeout)
        with self._acks_watched(seconds) as acks:
            deadline = time.monotonic() + seconds
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


def check_position(
    position: int, latest: int, floor: int, counters: StoreCounters | None = None
) -> None:
    """A consumer's position, checked as a follower's cursor is, but stricter: below the floor
    it has expired (`CursorExpired`, counted in the store's `counters`), 0 included (a consumer
    at 0 has read nothing, and some of its events are gone); above the frontier it comes from
    another database (`CursorAhead`)."""
    if position < floor:
        raise expired(floor, position, counters)
    check_cursor(position, latest, floor, counters)


def _locked(uow: WriteContext, name: str, *, unless_held: bool) -> None:
    """Lock the consumer's row (PostgreSQL) until the transaction ends; `ConsumerNotFound` if
    it is not registered, and with `unless_held`, `LeaseHeld` while a replica holds its live
    lease (by the database's clock)."""
    if uow.consumers.lock(name) is None:
        raise ConsumerNotFound(f"consumer {name!r} is not registered")
    if unless_held:
        holding = _holder_of(uow, name)
        if _live(holding):
            raise _held(name, holding)


def _holder_of(read: ReadContext, name: str) -> LeaseHolder:
    """Who holds the consumer's lease (read in `read`); `ConsumerNotFound` if it is gone."""
    holding = read.consumers.holder_of(name)
    if holding is None:
        raise ConsumerNotFound(f"consumer {name!r} is not registered")
    return holding


def _live(holding: LeaseHolder) -> bool:
    return (
        holding.holder is not None
        and holding.expires_at_ms is not None
        and holding.expires_at_ms > holding.now_ms
    )


def _held(name: str, holding: LeaseHolder) -> LeaseHeld:
    """`LeaseHeld` for a lease `acquire` found live (or, at its deadline, live a moment ago)."""
    return LeaseHeld(name, holding.holder or "another holder", holding.expires_at_ms or 0)


def _lease_wait(holding: LeaseHolder, left: float) -> float:
    """How long `acquire` waits before it tries again: until the lease it found expires (as
    the database's clock reads it), at most `left`; not at all if it was no longer live."""
    if not _live(holding):  # released or expired since the attempt: try again now
        return 0.0
    assert holding.expires_at_ms is not None
    return min(left, (holding.expires_at_ms - holding.now_ms) / 1000)


def _what_became(holding: LeaseHolder, generation: int) -> str:
    """What became of the lease of `generation`, as `holding` (read after) says."""
    if holding.generation != generation:
        return f"was taken over by {holding.holder!r} (generation {holding.generation})"
    if holding.holder is None:
        return "was released"
    return "expired"


def _lost(lease: HeldLease, holding: LeaseHolder, what: str) -> LeaseLost:
    """`LeaseLost` for a call with `lease` that its lease refused."""
    return LeaseLost(
        f"cannot {what}: the lease of consumer {lease.name!r} held by {lease.holder!r} "
        f"(generation {lease.generation}) {_what_became(holding, lease.generation)}; nothing was "
        "written; stop handling its events and acquire it again"
    )


def _ack_lost(name: str, lease: tuple[str, int] | None, holding: LeaseHolder) -> LeaseLost:
    """`LeaseLost` for an ack its lease refused (with `lease`, or without one)."""
    if lease is None and not _live(holding):  # released or expired since the ack ran
        return LeaseLost(
            f"ack of consumer {name!r} refused: a lease of it was live when the ack ran "
            f"(released or expired since; generation {holding.generation}); nothing was "
            "written"
        )
    if lease is None:
        return LeaseLost(
            f"ack of consumer {name!r} refused: it is held by {holding.holder!r} "
            f"(generation {holding.generation}), whose lease must be given (ack(..., "
            "lease=)); nothing was written"
        )
    holder, generation = lease
    return LeaseLost(
        f"ack of consumer {name!r} refused: the lease held by {holder!r} (generation "
        f"{generation}) {_what_became(holding, generation)}; nothing was written; stop handling "
        "its events and acquire it again"
    )


def _filter_of(stored: StoredConsumer) -> ApiEventFilter:
    return ApiEventFilter.model_validate_json(stored.filter_json)


def _position(start: str | int, latest: int, floor: int, counters: StoreCounters) -> int:
    """The position `start` stands for, with the frontier and floor read under the log's lock
    (a `CursorExpired` counted in the store's `counters`)."""
    if start == "beginning" or start == 0:
        return floor
    if start == "now":
        return latest
    assert isinstance(start, int)
    if start < floor:
        raise expired(floor, start, counters)
    if start > latest:
        raise CursorAhead(
            f"seq {start} is above the frontier {latest}: it comes from another database or a "
            "restored backup; nothing was written"
        )
    return start


def status_of(
    stored: StoredConsumer, recorded: int | None, latest: int, now: int
) -> ConsumerStatus:
    """The status of a stored consumer at a read of the frontier `latest` at `now`, `recorded`
    the time of the first event after its position (`None`: none)."""
    acked = stored.last_ack_at_ms or stored.registered_at_ms  # a reset counts as an ack
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
        holder=stored.holder,
        generation=stored.generation,
        lease_expires_at_ms=stored.lease_expires_at_ms,
        stuck_after_s=stored.stuck_after_ms / 1000,
        stuck=latest > stored.position and now - acked > stored.stuck_after_ms,
    )
