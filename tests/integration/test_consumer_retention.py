"""Retention waits for durable consumers: `prune` stops at the lowest live consumer's position
unless forced, `plan_prune` names the consumer, a consumer idle past its `max_idle_s` no longer
holds retention, and a `register` racing a prune never lands below the floor; both backends and
both APIs."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from session_journal import ApiEventFilter, CursorExpired, InvalidRecord, Store
from session_journal.storage.repositories import StoredConsumer
from tests.factories import SessionFactory
from tests.helpers import append_raw
from tests.integration.test_lone_writes import run_queued_behind_a_block

pytestmark = pytest.mark.both_apis

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'


def log_of(store: Store, events: int) -> None:
    store.sessions.save(SessionFactory(id="s1"))
    append_raw(store, "s1", BODY, events)


def stored_seqs(store: Store) -> list[int]:
    return [event.seq for event in store.events.load(after_seq=0, limit=1000).events]


def test_a_prune_stops_at_the_lowest_consumer_and_says_which(store: Store) -> None:
    log_of(store, 10)
    store.consumers.register("fast", start=8)
    store.consumers.register("slow", start=3)
    plan = store.events.plan_prune(through_seq=9)
    assert (plan.through_seq, plan.events, plan.held_back_by) == (3, 3, "slow")
    assert store.events.prune(through_seq=9) == 3
    assert store.events.pruned_through() == 3
    assert stored_seqs(store) == [4, 5, 6, 7, 8, 9, 10]
    store.consumers.ack("slow", 6)
    assert store.events.plan_prune(older_than_ms=2**62).held_back_by == "slow"
    assert store.events.prune(older_than_ms=2**62) == 3
    assert stored_seqs(store) == [7, 8, 9, 10]
    # Below every consumer: nobody holds it back.
    assert store.events.plan_prune(through_seq=6).held_back_by is None


def test_a_consumer_at_the_beginning_of_a_log_never_pruned_holds_all_of_it(store: Store) -> None:
    log_of(store, 4)
    store.consumers.register("projector")
    assert store.events.prune(through_seq=4) == 0
    assert store.events.pruned_through() == 0
    assert store.events.plan_prune(through_seq=4).held_back_by == "projector"


def test_a_forced_prune_passes_the_consumers_which_then_must_be_reset(store: Store) -> None:
    log_of(store, 6)
    store.consumers.register("projector", start=2)
    plan = store.events.plan_prune(through_seq=5, force=True)
    assert (plan.through_seq, plan.held_back_by) == (5, None)
    assert store.events.prune(through_seq=5, force=True) == 5
    assert store.consumers.get("projector").position == 2  # kept: its next read expires
    # Behind the floor it holds nothing back.
    assert store.events.plan_prune(through_seq=6).held_back_by is None
    with pytest.raises(CursorExpired):
        store.consumers.reset("projector", to=3)
    assert store.consumers.reset("projector", to="beginning").position == 5
    assert store.events.plan_prune(through_seq=6).held_back_by == "projector"


def test_a_consumer_idle_past_its_max_idle_holds_nothing_back(store: Store) -> None:
    log_of(store, 6)
    store.consumers.register("idle", start=1, max_idle_s=60)
    store.consumers.register("live", start=4)
    assert store.events.plan_prune(through_seq=6).held_back_by == "idle"
    backdate(store, "idle", minutes=2)
    plan = store.events.plan_prune(through_seq=6)
    assert (plan.through_seq, plan.held_back_by) == (4, "live")
    # An ack makes it live again, from where it acked.
    store.consumers.ack("idle", 2)
    assert store.events.plan_prune(through_seq=6).held_back_by == "idle"
    backdate(store, "idle", minutes=2)
    assert store.events.prune(through_seq=6) == 4
    with pytest.raises(CursorExpired):  # it cannot go back before the floor
        store.consumers.reset("idle", to=3)


def backdate(store: Store, name: str, *, minutes: int) -> None:
    """The consumer last acked (and registered) `minutes` ago."""
    then = int(time.time() * 1000) - minutes * 60_000
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "UPDATE consumers SET registered_at_ms = :then, last_ack_at_ms = :then "
                    "WHERE name = :name"
                ),
                {"then": then, "name": name},
            )
    finally:
        engine.dispose()


@pytest.mark.sync_api
def test_a_register_waiting_for_a_prune_sees_the_floor_it_raised(store: Store) -> None:
    """Another store (another process's write path) registers at seq 3 while a prune's first
    transaction holds the log's row and has raised the floor to 5: the register waits for it,
    then refuses, and no consumer is left below the floor."""
    log_of(store, 8)
    store.consumers.register("ahead", start="now")  # the minimum level is raised already
    other = Store.open(store.url)
    outcome: list[object] = []

    def register() -> None:
        try:
            outcome.append(other.consumers.register("late", start=3))
        except CursorExpired as error:
            outcome.append(error)

    try:
        with store.unit_of_work() as uow:
            uow.events.lock_log()
            uow.events.raise_floor(5)
            late = threading.Thread(target=register)
            late.start()
            late.join(0.5)
            assert late.is_alive()  # waiting for the log's row (or SQLite's write lock)
            uow.commit()
        late.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], CursorExpired)
        assert (outcome[0].pruned_through, outcome[0].cursor) == (5, 3)
        assert [status.name for status in store.consumers.list()] == ["ahead"]
    finally:
        other.close()


@pytest.mark.sync_api
def test_a_prune_waiting_for_a_register_stops_at_its_position(store: Store) -> None:
    """Another store prunes through seq 6 while a register's transaction holds the log's row
    with a new consumer at seq 3: the prune waits for it, reads the positions then, and stops
    at 3."""
    log_of(store, 8)
    store.consumers.register("ahead", start="now")
    other = Store.open(store.url)
    pruned: list[int] = []
    try:
        with store.unit_of_work() as uow:
            uow.events.lock_log()
            uow.consumers.insert(StoredConsumer("late", "{}", 3, 1, None, None))
            prune = threading.Thread(
                target=lambda: pruned.append(other.events.prune(through_seq=6))
            )
            prune.start()
            prune.join(0.5)
            assert prune.is_alive()
            uow.commit()
        prune.join(10)
        assert pruned == [3]
        assert store.events.pruned_through() == 3
    finally:
        other.close()


@pytest.mark.sync_api
def test_a_reset_racing_a_projector_that_acks_then_appends_never_deadlocks(store: Store) -> None:
    """A projector's transaction acks (the consumer's row) and then appends (the log's row, at
    commit) while another store resets the consumer: the reset takes the rows in that order too,
    so it waits for the projector and neither fails."""
    log_of(store, 4)
    store.consumers.register("projector")
    other = Store.open(store.url)
    outcome: list[object] = []

    def reset() -> None:
        try:
            outcome.append(other.consumers.reset("projector", to=1).position)
        except Exception as error:  # the test reads it
            outcome.append(error)

    try:
        with store.unit_of_work() as uow:
            store.consumers.ack("projector", 3, uow=uow)
            resetting = threading.Thread(target=reset)
            resetting.start()
            resetting.join(0.5)
            uow.events.append("s1", 1, BODY)
            uow.commit()
        resetting.join(10)
        assert outcome == [1]
        assert store.consumers.get("projector").position == 1  # the reset came second
        assert store.events.latest_seq() == 5
    finally:
        other.close()


@pytest.mark.sync_api
def test_two_stores_registering_one_new_name_with_other_filters_refuse_the_second(
    store: Store,
) -> None:
    """Store A has inserted consumer "x" (every event) in a transaction still open when store B
    registers "x" for faults only: B waits, then finds A's consumer and refuses its other
    filter, rather than returning A's as if it were its own."""
    log_of(store, 2)
    other = Store.open(store.url)
    outcome: list[object] = []

    def register() -> None:
        try:
            faults = ApiEventFilter(types=["session_fault"])
            outcome.append(other.consumers.register("x", filter=faults))
        except InvalidRecord as error:
            outcome.append(error)

    try:
        with store.unit_of_work() as uow:
            uow.events.lock_log()
            assert uow.consumers.insert(StoredConsumer("x", "{}", 0, 1, None, None))
            late = threading.Thread(target=register)
            late.start()
            late.join(0.5)
            assert late.is_alive()
            uow.commit()
        late.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], InvalidRecord), outcome
        assert "another filter" in str(outcome[0])
        assert store.consumers.get("x").filter == ApiEventFilter()
    finally:
        other.close()


@pytest.mark.sync_api
def test_register_reset_and_the_first_prune_batch_run_in_transactions_of_their_own(
    store: Store,
) -> None:
    """Each takes the log's row before other rows: a shared batch's later calls (an ack, which
    waits for the consumer's row another process's projector may hold) would hold the log's
    row, and every appender with it, meanwhile."""
    log_of(store, 6)
    store.consumers.register("projector")
    path = store._database.write_path
    batches = path.batches
    outcomes = run_queued_behind_a_block(
        store,
        [
            lambda: store.consumers.ack("projector", 1),
            lambda: store.consumers.register("new"),
            lambda: store.consumers.ack("projector", 2),
            lambda: store.consumers.reset("new", to=3),
            lambda: store.events.prune(through_seq=1),
            lambda: store.consumers.ack("projector", 4),
        ],
    )
    assert [type(outcome).__name__ for outcome in outcomes] == [
        "NoneType",
        "ConsumerStatus",
        "NoneType",
        "ConsumerStatus",
        "int",
        "NoneType",
    ]
    # The block's, then one each: the ack; register; the ack; reset; prune's floor (solo); and
    # prune's two deleting batches (one event, then nothing left), the last ack alone or in the
    # first of them. Shared, the six queued calls would have been one transaction: 4 in all.
    assert path.batches - batches in (8, 9)


@pytest.mark.sync_api
def test_a_prune_never_deadlocks_with_a_writer_that_deletes_a_session_then_appends(
    store: Store,
) -> None:
    """Another store's transaction deletes a session (its events' deletion moves the deletion
    counter's row) and then appends (the log's row, at commit) while a prune runs: the prune
    records its floor in a transaction that deletes nothing, and deletes in transactions that
    do not lock the log's row, so neither waits for the other in a cycle."""
    log_of(store, 6)
    store.sessions.save(SessionFactory(id="doomed"))
    append_raw(store, "doomed", BODY, 2)
    other = Store.open(store.url)
    pruned: list[object] = []
    path = store._database.write_path
    retried = path.retried

    def prune() -> None:
        try:
            pruned.append(store.events.prune(through_seq=4))
        except Exception as error:  # the test reads it
            pruned.append(error)

    try:
        with other.unit_of_work() as uow:
            uow.sessions.delete("doomed")
            pruning = threading.Thread(target=prune)
            pruning.start()
            pruning.join(0.5)  # its floor recorded (PostgreSQL); its deleting batch waits
            uow.events.append("s1", 1, BODY)
            uow.commit()
        pruning.join(30)
        assert pruned == [4]
        assert path.retried == retried  # no transaction of the prune was a deadlock's victim
        assert store.events.pruned_through() == 4
        assert [event.seq for event in store.events.load(after_seq=0).events] == [5, 6, 9]
    finally:
        other.close()
