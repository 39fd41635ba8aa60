"""Leases of durable consumers (`store.consumers.acquire`): one holder at a time, a new
generation for each lease taken, and acks fenced by the ack's own statement — on both backends
and through both APIs, with the database's clock pinned (`pinned_clock`) where a test moves
time, and the real clock where it waits."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    AsyncStore,
    ConsumerNotFound,
    InvalidRecord,
    LeaseHeld,
    LeaseLost,
    Store,
)
from session_journal.services.consumers import HeldLease
from session_journal.storage.unit_of_work import UnitOfWork
from tests.conftest import PinnedClock
from tests.factories import SessionFactory
from tests.integration.test_consumers import BODY, log_of, minimum_level
from tests.integration.test_group_commit import one_batch

pytestmark = pytest.mark.both_apis

TTL_S = 30


def lease_of(store: Store, name: str = "projector") -> tuple[str | None, int, int | None]:
    status = store.consumers.get(name)
    return status.holder, status.generation, status.lease_expires_at_ms


def test_a_lease_is_a_new_generation_until_its_ttl_by_the_databases_clock(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    assert lease_of(store) == (None, 0, None)
    assert minimum_level(store) == 12

    lease = store.consumers.acquire("projector", "host-a:41", ttl_s=TTL_S)
    assert (lease.name, lease.holder, lease.generation) == ("projector", "host-a:41", 1)
    assert lease.expires_at_ms == pinned_clock.ms + TTL_S * 1000
    assert lease_of(store) == ("host-a:41", 1, pinned_clock.ms + TTL_S * 1000)
    assert minimum_level(store) == 13  # older code would ack without looking at the lease

    pinned_clock.advance(20)
    lease.renew()
    assert lease.expires_at_ms == pinned_clock.ms + TTL_S * 1000
    lease.renew(ttl_s=5)
    assert lease_of(store) == ("host-a:41", 1, pinned_clock.ms + 5_000)
    assert lease.release() is True
    assert lease_of(store) == (None, 1, None)
    assert lease.release() is False  # released already: nothing changes, nothing raised


def test_another_holder_is_refused_while_the_lease_is_live_and_takes_over_after(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    first = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    expires = first.expires_at_ms

    pinned_clock.advance(TTL_S - 0.001)  # a millisecond before it expires
    with pytest.raises(LeaseHeld) as held:
        store.consumers.acquire("projector", "host-b", ttl_s=TTL_S)
    assert (held.value.name, held.value.holder, held.value.expires_at_ms) == (
        "projector",
        "host-a",
        expires,
    )
    assert "'host-a' until 2027-01-15T" in str(held.value)
    assert lease_of(store) == ("host-a", 1, expires)  # nothing written

    pinned_clock.advance(0.001)  # expired
    second = store.consumers.acquire("projector", "host-b", ttl_s=TTL_S)
    assert second.generation == 2
    assert lease_of(store) == ("host-b", 2, pinned_clock.ms + TTL_S * 1000)

    with pytest.raises(LeaseLost, match=r"taken over by 'host-b' \(generation 2\)"):
        first.renew()
    with pytest.raises(LeaseLost, match=r"taken over by 'host-b' \(generation 2\)"):
        store.consumers.ack("projector", 3, lease=first)
    with pytest.raises(LeaseLost, match=r"held by 'host-b' \(generation 2\)"):
        store.consumers.ack("projector", 3)  # without the live lease
    assert store.consumers.position("projector") == 0
    assert first.release() is False  # not its lease any more: the new holder keeps it
    assert lease_of(store)[0] == "host-b"

    store.consumers.ack("projector", 3, lease=second)
    assert store.consumers.position("projector") == 3


def test_an_expired_lease_nobody_took_cannot_renew_or_ack_and_no_longer_fences(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    store.consumers.ack("projector", 1, lease=lease)

    pinned_clock.advance(TTL_S)
    with pytest.raises(LeaseLost, match="expired"):
        lease.renew()
    with pytest.raises(LeaseLost, match="expired"):
        store.consumers.ack("projector", 2, lease=lease)
    assert store.consumers.position("projector") == 1
    store.consumers.ack("projector", 2)  # no live lease: an ack without one is let through
    assert store.consumers.position("projector") == 2


def test_the_same_holder_acquiring_again_fences_its_old_lease(
    store: Store, pinned_clock: PinnedClock
) -> None:
    """A replica restarted under the same id takes over from its old self at once."""
    log_of(store, 3)
    store.consumers.register("projector")
    old = store.consumers.acquire("projector", "pod-0", ttl_s=TTL_S)
    new = store.consumers.acquire("projector", "pod-0", ttl_s=TTL_S)
    assert (old.generation, new.generation) == (1, 2)
    with pytest.raises(LeaseLost, match=r"taken over by 'pod-0' \(generation 2\)"):
        store.consumers.ack("projector", 1, lease=old)
    store.consumers.ack("projector", 1, lease=new)
    assert store.consumers.position("projector") == 1


def test_a_released_lease_lets_acks_without_one_through_and_the_next_holder_in(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    with store.consumers.acquire("projector", "host-a", ttl_s=TTL_S) as lease:
        store.consumers.ack("projector", 1, lease=lease)
    assert lease_of(store) == (None, 1, None)  # the block released it
    store.consumers.ack("projector", 2)
    with pytest.raises(LeaseLost, match="was released"):
        store.consumers.ack("projector", 3, lease=lease)
    assert store.consumers.acquire("projector", "host-b", ttl_s=TTL_S).generation == 2
    assert store.consumers.position("projector") == 2


def test_fencing_does_not_trust_the_clock_to_move_forward(
    store: Store, pinned_clock: PinnedClock
) -> None:
    """A clock that jumps forward lets another holder in; when it jumps back, the old lease
    looks unexpired again, and is still refused: its generation is old."""
    log_of(store, 3)
    store.consumers.register("projector")
    old = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    pinned_clock.advance(3600)
    new = store.consumers.acquire("projector", "host-b", ttl_s=TTL_S)
    pinned_clock.advance(-3600)
    with pytest.raises(LeaseLost):
        old.renew()
    with pytest.raises(LeaseLost):
        store.consumers.ack("projector", 2, lease=old)
    store.consumers.ack("projector", 2, lease=new)
    assert lease_of(store) == ("host-b", 2, new.expires_at_ms)
    assert store.consumers.position("projector") == 2


def test_a_refused_ack_in_a_unit_of_work_rolls_back_the_callers_writes(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    old = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    pinned_clock.advance(TTL_S)
    store.consumers.acquire("projector", "host-b", ttl_s=TTL_S)

    with pytest.raises(LeaseLost), store.unit_of_work() as uow:
        uow.events.append("s1", 1, BODY)
        store.consumers.ack("projector", 3, lease=old, uow=uow)
        uow.commit()
    assert store.events.latest_seq() == 3  # the effect's event rolled back with the ack

    # Caught inside the block, the refusal still keeps the unit of work from committing.
    with pytest.raises(LeaseLost), store.unit_of_work() as uow:
        uow.events.append("s1", 1, BODY)
        with pytest.raises(LeaseLost):
            store.consumers.ack("projector", 3, lease=old, uow=uow)
        uow.commit()
    assert store.events.latest_seq() == 3
    assert store.consumers.position("projector") == 0


def test_a_bound_transaction_with_a_refused_ack_cannot_commit(
    store: Store, backend: str, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    engine = sa.create_engine(store.url)
    if backend == "sqlite":  # as the docs tell a host to set up its engine
        sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON"))
    try:
        with engine.connect() as connection:
            connection.begin()
            uow = store.bind(connection)
            uow.events.append("s1", 1, BODY)
            with pytest.raises(LeaseLost, match="held by 'host-a'"):
                store.consumers.ack("projector", 3, uow=uow)  # without the lease
            with pytest.raises(LeaseLost):
                connection.commit()
    finally:
        engine.dispose()
    assert store.events.latest_seq() == 3
    assert store.consumers.position("projector") == 0


def test_bad_arguments_are_refused_and_nothing_is_written(
    store: Store, pinned_clock: PinnedClock
) -> None:
    log_of(store, 3)
    store.consumers.register("projector")
    store.consumers.register("other")
    for kwargs in (
        {"ttl_s": 0.999},
        {"ttl_s": 3600.001},
        {"ttl_s": float("nan")},
        {"ttl_s": "30"},
        {"ttl_s": TTL_S, "wait_s": -1},
        {"ttl_s": TTL_S, "wait_s": 3601},
    ):
        with pytest.raises(InvalidRecord):
            store.consumers.acquire("projector", "host-a", **kwargs)
    for holder in ("", "host a", "x" * 129, "a/b"):
        with pytest.raises(InvalidRecord):
            store.consumers.acquire("projector", holder, ttl_s=TTL_S)
    assert lease_of(store) == (None, 0, None)

    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    for ttl_s in (0.5, 3601, float("nan"), "30", True):
        with pytest.raises(InvalidRecord):
            lease.renew(ttl_s=ttl_s)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="the lease of consumer 'projector'"):
        store.consumers.ack("other", 1, lease=lease)
    with pytest.raises(InvalidRecord, match="lease must be a Lease or AsyncLease"):
        store.consumers.ack("projector", 1, lease=("host-a", 1))  # type: ignore[arg-type]
    assert lease_of(store) == ("host-a", 1, pinned_clock.ms + TTL_S * 1000)
    assert store.consumers.position("projector") == 0
    assert store.consumers.position("other") == 0


def test_an_unknown_consumer(store: Store, pinned_clock: PinnedClock) -> None:
    log_of(store, 1)
    with pytest.raises(ConsumerNotFound):
        store.consumers.acquire("ghost", "host-a", ttl_s=TTL_S)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    store.consumers.remove("projector")
    with pytest.raises(ConsumerNotFound):
        lease.renew()
    with pytest.raises(ConsumerNotFound):
        store.consumers.ack("projector", 1, lease=lease)
    assert lease.release() is False


def test_acquire_waits_for_a_release(store: Store) -> None:
    """Woken by the release (the acks' signal), not by the lease's expiry an hour later."""
    log_of(store, 1)
    store.consumers.register("projector")
    held = store.consumers.acquire("projector", "host-a", ttl_s=3600)
    taken: list[HeldLease] = []
    waiter = threading.Thread(
        target=lambda: taken.append(
            store.consumers.acquire("projector", "host-b", ttl_s=TTL_S, wait_s=30)
        )
    )
    waiter.start()
    time.sleep(0.3)
    assert not taken  # still waiting
    began = time.monotonic()
    held.release()
    waiter.join(timeout=30)
    assert time.monotonic() - began < 5
    assert [(lease.holder, lease.generation) for lease in taken] == [("host-b", 2)]


def test_acquire_waits_for_an_expiry_and_gives_up_after_wait_s(store: Store) -> None:
    log_of(store, 1)
    store.consumers.register("projector")
    store.consumers.acquire("projector", "host-a", ttl_s=1)
    began = time.monotonic()
    with pytest.raises(LeaseHeld, match="held by 'host-a'"):
        store.consumers.acquire("projector", "host-b", ttl_s=TTL_S, wait_s=0.2)
    assert 0.2 <= time.monotonic() - began < 0.9
    lease = store.consumers.acquire("projector", "host-b", ttl_s=TTL_S, wait_s=10)
    assert time.monotonic() - began < 5  # about a second: when host-a's lease expired
    assert (lease.holder, lease.generation) == ("host-b", 2)


def test_leased_acks_made_at_once_are_all_kept(store: Store) -> None:
    """Acks from many threads with the lease, some of them in one batch of the write path."""
    log_of(store, 40)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    threads = [
        threading.Thread(
            target=store.consumers.ack, args=("projector", seq), kwargs={"lease": lease}
        )
        for seq in range(1, 41)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert store.consumers.position("projector") == 40


def projector_of(store: Store, lease: HeldLease, pinned_clock: PinnedClock) -> Any:
    """A function for `run_in_unit_of_work` that handles two events, acking each with `lease`
    and committing; before the second, the lease expires (the replica paused past it). It
    catches the refusal and returns, as a careless projector might."""

    def project(uow: UnitOfWork) -> str:
        for seq in (1, 2):
            if seq == 2:
                pinned_clock.advance(TTL_S)
            uow.events.append("s1", 1, BODY)  # the effect
            try:
                store.consumers.ack("projector", seq, lease=lease, uow=uow)
            except LeaseLost:
                return "lost"
            uow.commit()
        return "handled"

    return project


@pytest.mark.sync_api
def test_a_function_that_catches_the_refusal_commits_nothing(
    store: Store, pinned_clock: PinnedClock
) -> None:
    """A function the write path runs is its own unit of work: refused once, all of it is
    undone, and its caller gets `LeaseLost`."""
    log_of(store, 3)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    with pytest.raises(LeaseLost, match="expired"):
        store.run_in_unit_of_work(projector_of(store, lease, pinned_clock))
    assert store.events.latest_seq() == 3
    assert store.consumers.position("projector") == 0


@pytest.mark.sync_api
def test_a_refusal_in_a_batch_is_its_own_calls(store: Store, pinned_clock: PinnedClock) -> None:
    """Calls of one batch share the batch's transaction: a refused ack undoes its own call and
    keeps the others."""
    log_of(store, 3)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    calls = [
        lambda: store.run_in_unit_of_work(projector_of(store, lease, pinned_clock)),
        lambda: store.sessions.save(SessionFactory(id="other")),
        lambda: store.faults.record_startup_fault("other", "after the refusal"),
    ]
    with one_batch(store, calls) as callers:
        refused, saved, fault = (caller.outcome for caller in callers)
    assert isinstance(refused, LeaseLost)
    assert (saved, fault) == (None, True)
    assert store.events.latest_seq() == 4  # the fault of the third call, not the effects
    assert store.consumers.position("projector") == 0


@pytest.mark.sync_api
def test_a_waiting_acquire_reads_while_the_lease_stays_live(store: Store) -> None:
    """Woken by every commit (other consumers' acks), a waiting `acquire` reads who holds the
    lease, and tries to take it (a write transaction) only once it is not live."""
    log_of(store, 60)
    store.consumers.register("projector")
    store.consumers.register("other")
    store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    attempts = []
    attempt = store.consumers._try_acquire

    def counted(*args: Any) -> Any:
        attempts.append(args)
        return attempt(*args)

    store.consumers._try_acquire = counted  # type: ignore[method-assign]
    refused: list[BaseException] = []

    def wait() -> None:
        try:
            store.consumers.acquire("projector", "host-b", ttl_s=TTL_S, wait_s=1.5)
        except LeaseHeld as error:
            refused.append(error)

    waiter = threading.Thread(target=wait)
    waiter.start()
    for seq in range(1, 61):
        store.consumers.ack("other", seq)
        time.sleep(0.01)
    waiter.join(timeout=30)
    assert [type(error) for error in refused] == [LeaseHeld]
    assert len(attempts) == 1  # the first; the wake-ups of 60 acks only read


def test_lease_held_says_a_time_out_of_the_calendar_plainly() -> None:
    assert "1000000000000000000 ms after the epoch" in str(LeaseHeld("p", "h", 10**18))


def test_a_cancelled_acquire_releases_the_lease_it_took(backend: str, migrated_url: str) -> None:
    """An async `acquire` cancelled (a timeout) while its attempt waits for the database
    leaves the attempt to finish, and releases the lease it took: nobody is left holding it
    until it expires."""
    with Store.open(migrated_url) as setup:
        log_of(setup, 1)
        setup.consumers.register("projector")

    async def scenario() -> tuple[str | None, int]:
        async with await AsyncStore.open(migrated_url) as store:
            engine = sa.create_engine(migrated_url)
            try:
                with engine.connect() as blocker:  # holds the consumer's row (or the file)
                    if backend == "sqlite":
                        blocker.exec_driver_sql("BEGIN IMMEDIATE")
                    else:
                        blocker.begin()
                        blocker.exec_driver_sql(
                            "SELECT * FROM consumers WHERE name = 'projector' FOR UPDATE"
                        )
                    with pytest.raises(TimeoutError):
                        async with asyncio.timeout(0.5):
                            await store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
                    blocker.rollback()
            finally:
                engine.dispose()
            for _ in range(500):
                status = await store.consumers.get("projector")
                if status.generation == 1 and status.holder is None:
                    break
                await asyncio.sleep(0.01)
            return status.holder, status.generation

    assert asyncio.run(scenario()) == (None, 1)  # taken once, then released

    async def closed_right_after() -> None:
        async with await AsyncStore.open(migrated_url) as store:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.0005):
                    await store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
        # closing waited for the attempt, and released what it took

    asyncio.run(closed_right_after())
    with Store.open(migrated_url) as store:
        status = store.consumers.get("projector")
        assert status.holder is None and status.generation in (1, 2)
        assert store.consumers.acquire("projector", "host-b", ttl_s=TTL_S).holder == "host-b"


def test_reset_and_remove_unless_held(store: Store, pinned_clock: PinnedClock) -> None:
    """`unless_held=True` (the CLI's): refused under the row's lock while a replica holds the
    live lease; an expired or released lease does not refuse it; the default never does."""
    log_of(store, 3)
    store.consumers.register("projector")
    lease = store.consumers.acquire("projector", "host-a", ttl_s=TTL_S)
    with pytest.raises(LeaseHeld, match="'host-a'"):
        store.consumers.reset("projector", to=2, unless_held=True)
    with pytest.raises(LeaseHeld):
        store.consumers.remove("projector", unless_held=True)
    assert store.consumers.position("projector") == 0
    store.consumers.reset("projector", to=2)  # the default: the operator's word
    assert store.consumers.position("projector") == 2
    pinned_clock.advance(TTL_S)  # expired
    store.consumers.reset("projector", to=3, unless_held=True)
    lease = store.consumers.acquire("projector", "host-b", ttl_s=TTL_S)
    lease.release()
    store.consumers.remove("projector", unless_held=True)
    assert store.consumers.list() == []
