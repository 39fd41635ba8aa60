"""Durable consumers (`store.consumers`): registering, reading the status, acking (monotonic, up
to the frontier, with the caller's writes), resetting and removing, on both backends and
through both APIs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEventFilter,
    ConsumerNotFound,
    ConsumerStatus,
    CursorAhead,
    CursorExpired,
    InvalidRecord,
    StorageError,
    Store,
    TransientStorageError,
)
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import SessionFactory
from tests.helpers import append_raw

pytestmark = pytest.mark.both_apis

BODY = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}'


def log_of(store: Store, events: int, session_id: str = "s1") -> None:
    """A session with `events` events (seqs 1..events in a fresh log)."""
    store.sessions.save(SessionFactory(id=session_id))
    append_raw(store, session_id, BODY, events)


def minimum_level(store: Store) -> int:
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            query = sa.text("SELECT minimum_compatible_level FROM schema_compatibility")
            return int(connection.execute(query).scalar_one())
    finally:
        engine.dispose()


def test_a_consumer_registered_from_the_beginning_starts_before_the_first_event(
    store: Store,
) -> None:
    log_of(store, 3)
    status = store.consumers.register("projector")
    assert isinstance(status, ConsumerStatus)
    assert (status.name, status.filter, status.position) == ("projector", ApiEventFilter(), 0)
    assert (status.latest_seq, status.lag, status.last_ack_at_ms, status.max_idle_s) == (
        3,
        3,
        None,
        None,
    )
    assert status.lag_seconds > 0
    again = store.consumers.get("projector")
    assert again.model_dump(exclude={"lag_seconds"}) == status.model_dump(exclude={"lag_seconds"})


def test_start_now_and_at_a_seq(store: Store) -> None:
    log_of(store, 5)
    assert store.consumers.register("tail", start="now").position == 5
    assert store.consumers.register("middle", start=2).position == 2
    now = store.consumers.get("tail")
    assert (now.lag, now.lag_seconds) == (0, 0)
    assert [status.name for status in store.consumers.list()] == ["middle", "tail"]


def test_a_start_outside_the_log_is_refused_and_nothing_is_written(store: Store) -> None:
    log_of(store, 5)
    with pytest.raises(CursorAhead):
        store.consumers.register("ahead", start=6)
    store.events.prune(through_seq=3)
    with pytest.raises(CursorExpired) as expired:
        store.consumers.register("behind", start=2)
    assert (expired.value.pruned_through, expired.value.cursor) == (3, 2)
    assert store.consumers.list() == []
    # From the beginning of a pruned log: after the floor.
    assert store.consumers.register("fresh").position == 3


def test_registering_again_returns_the_consumer_unchanged_unless_its_filter_differs(
    store: Store,
) -> None:
    log_of(store, 4)
    by_type = ApiEventFilter(types=["session_fault"])
    store.consumers.register("faults", filter=by_type, start=1, max_idle_s=60)
    store.consumers.ack("faults", 3)
    again = store.consumers.register("faults", filter=ApiEventFilter(types=["session_fault"]))
    assert (again.position, again.filter, again.max_idle_s) == (3, by_type, 60.0)
    with pytest.raises(InvalidRecord, match="another filter"):
        store.consumers.register("faults")
    with pytest.raises(InvalidRecord, match="another filter"):
        store.consumers.register("faults", filter=ApiEventFilter(session_id="s1"))
    assert store.consumers.get("faults").filter == by_type


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"name": "bad name"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"name": "p", "start": "later"}, "start"),
        ({"name": "p", "start": -1}, "start"),
        ({"name": "p", "start": True}, "start"),
        ({"name": "p", "max_idle_s": 0.5}, "max_idle_s"),
        ({"name": "p", "max_idle_s": float("inf")}, "max_idle_s"),
        ({"name": "p", "max_idle_s": 400 * 86_400}, "max_idle_s"),
        ({"name": "p", "filter": {"types": ["session_fault"]}}, "filter"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_written(
    store: Store, arguments: dict[str, object], problem: str
) -> None:
    given = dict(arguments)  # the parameters are shared by both APIs' runs
    name = given.pop("name")
    with pytest.raises(InvalidRecord, match=problem):
        store.consumers.register(name, **given)
    assert store.consumers.list() == []


def test_an_ack_moves_the_position_forward_only(store: Store) -> None:
    log_of(store, 5)
    store.consumers.register("projector")
    store.consumers.ack("projector", 3)
    acked = store.consumers.get("projector")
    assert (acked.position, acked.lag) == (3, 2)
    assert acked.last_ack_at_ms is not None
    store.consumers.ack("projector", 1)  # behind it: a no-op for the position
    assert store.consumers.get("projector").position == 3
    store.consumers.ack("projector", 5)
    assert (store.consumers.get("projector").position, store.consumers.get("projector").lag) == (
        5,
        0,
    )


def test_an_ack_above_the_frontier_or_of_an_unknown_consumer_is_refused(store: Store) -> None:
    log_of(store, 2)
    store.consumers.register("projector")
    with pytest.raises(InvalidRecord, match="above the frontier 2"):
        store.consumers.ack("projector", 3)
    with pytest.raises(ConsumerNotFound):
        store.consumers.ack("nobody", 1)
    with pytest.raises(InvalidRecord, match="seq"):
        store.consumers.ack("projector", -1)
    assert store.consumers.get("projector").position == 0


def test_an_ack_in_a_unit_of_work_commits_with_the_callers_writes(store: Store) -> None:
    log_of(store, 3)
    store.consumers.register("projector")

    def handled_then_failed(uow: UnitOfWork) -> None:
        store.consumers.ack("projector", 2, uow=uow)
        raise RuntimeError("the projector's own write failed")

    with pytest.raises(RuntimeError):
        store.run_in_unit_of_work(handled_then_failed)
    assert store.consumers.get("projector").position == 0

    def handled(uow: UnitOfWork) -> None:
        store.consumers.ack("projector", 2, uow=uow)
        uow.commit()

    store.run_in_unit_of_work(handled)
    assert store.consumers.get("projector").position == 2


def test_a_reset_moves_back_or_forward_within_the_log(store: Store) -> None:
    log_of(store, 6)
    store.consumers.register("projector", start=4)
    assert store.consumers.reset("projector", to=1).position == 1
    assert store.consumers.reset("projector", to="now").position == 6
    assert store.consumers.reset("projector", to="beginning").position == 0
    with pytest.raises(CursorAhead):
        store.consumers.reset("projector", to=7)
    store.events.prune(through_seq=2, force=True)  # past the consumer at 0
    with pytest.raises(CursorExpired):
        store.consumers.reset("projector", to=1)
    assert store.consumers.reset("projector", to=0).position == 2
    with pytest.raises(ConsumerNotFound):
        store.consumers.reset("nobody", to=0)


def test_remove(store: Store) -> None:
    log_of(store, 1)
    store.consumers.register("projector")
    store.consumers.remove("projector")
    assert store.consumers.list() == []
    with pytest.raises(ConsumerNotFound):
        store.consumers.get("projector")
    with pytest.raises(ConsumerNotFound):
        store.consumers.remove("projector")


def test_the_first_register_raises_the_minimum_compatible_level(store: Store) -> None:
    log_of(store, 1)
    before = minimum_level(store)
    assert before < 12
    store.consumers.register("projector")
    assert minimum_level(store) == 12
    store.consumers.remove("projector")
    assert minimum_level(store) == 12  # the database has known consumers: it stays


def test_a_refused_ack_in_a_unit_of_work_leaves_the_callers_transaction_usable(
    store: Store,
) -> None:
    """An ack with `uow=` is one statement, run without a savepoint: a refusal (no row matched)
    wrote nothing, and the caller's transaction goes on."""
    log_of(store, 3)
    store.consumers.register("projector")

    def work(uow: UnitOfWork) -> None:
        with pytest.raises(ConsumerNotFound):
            store.consumers.ack("nobody", 1, uow=uow)
        with pytest.raises(InvalidRecord, match="above the frontier 3"):
            store.consumers.ack("projector", 9, uow=uow)
        store.consumers.ack("projector", 2, uow=uow)
        assert store.consumers.get("projector", uow=uow).position == 2
        uow.commit()

    store.run_in_unit_of_work(work)
    assert store.consumers.get("projector").position == 2


@pytest.mark.sync_api
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_bound_transaction_an_ack_s_error_aborted_refuses_to_commit(store: Store) -> None:
    """PostgreSQL: an ack given `uow=` runs without a savepoint, so its database error (here a
    lock timeout: another store holds the consumer's row) aborts the caller's transaction.
    Committing it then raises, rather than committing nothing without a word (PostgreSQL
    answers such a COMMIT with a rollback)."""
    log_of(store, 3)
    store.consumers.register("projector")
    other = Store.open(store.url)
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE read_model (x INTEGER)")
        with other.unit_of_work() as holder:
            other.consumers.ack("projector", 1, uow=holder)  # the consumer's row, locked
            with engine.connect() as connection:
                connection.begin()
                connection.exec_driver_sql("INSERT INTO read_model VALUES (1)")
                connection.exec_driver_sql("SET LOCAL lock_timeout = '100ms'")
                uow = store.bind(connection)
                with pytest.raises(TransientStorageError):
                    store.consumers.ack("projector", 2, uow=uow)
                with pytest.raises(StorageError, match="aborted it"):
                    connection.commit()
            holder.commit()
        with engine.connect() as connection:
            count = connection.exec_driver_sql("SELECT count(*) FROM read_model").scalar()
        assert count == 0
        assert store.consumers.position("projector") == 1
    finally:
        engine.dispose()
        other.close()


def age(store: Store, name: str, seconds: int) -> None:
    """Make the consumer's last ack (or registration) `seconds` older, in its stored row."""
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "UPDATE consumers SET registered_at_ms = registered_at_ms - :ms, "
                    "last_ack_at_ms = last_ack_at_ms - :ms WHERE name = :name"
                ),
                {"ms": seconds * 1000, "name": name},
            )
    finally:
        engine.dispose()


def test_a_consumer_is_stuck_while_events_wait_and_it_has_not_acked_for_stuck_after_s(
    store: Store,
) -> None:
    log_of(store, 3)
    status = store.consumers.register("projector")
    assert (status.stuck_after_s, status.stuck) == (300.0, False)
    age(store, "projector", 299)
    assert not store.consumers.get("projector").stuck
    age(store, "projector", 2)  # 301 s without an ack (since it registered), events waiting
    assert store.consumers.get("projector").stuck
    assert [status.stuck for status in store.consumers.list()] == [True]

    store.consumers.ack("projector", 2)
    assert not store.consumers.get("projector").stuck  # it acked just now
    age(store, "projector", 600)
    assert store.consumers.get("projector").stuck  # seq 3 still waits
    store.consumers.ack("projector", 3)
    age(store, "projector", 600)
    assert not store.consumers.get("projector").stuck  # nothing waits for it: idle, not stuck
    store.consumers.reset("projector", to=1)
    age(store, "projector", 600)
    assert store.consumers.get("projector").stuck

    quick = store.consumers.register("quick", stuck_after_s=1)
    assert quick.stuck_after_s == 1.0
    age(store, "quick", 2)
    assert store.consumers.get("quick").stuck
    again = store.consumers.register("quick", stuck_after_s=60)  # registered: unchanged
    assert again.stuck_after_s == 1.0
    for bad in (0.5, 366 * 86_400 + 1, float("nan"), "60"):
        with pytest.raises(InvalidRecord):
            store.consumers.register("bad", stuck_after_s=bad)  # type: ignore[arg-type]
    assert [status.name for status in store.consumers.list()] == ["projector", "quick"]
