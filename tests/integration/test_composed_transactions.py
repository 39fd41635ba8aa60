"""Composing transactions: service calls inside a unit of work (`uow=`), and a unit of work bound
to the caller's own Connection or Session (the transactional outbox)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from session_journal import (
    ApiEventFilter,
    BoundTransactionOpen,
    CallerCommits,
    IntegrityViolation,
    InvalidRecord,
    OutcomeReason,
    SessionFault,
    SessionJournalError,
    SessionNotFound,
    SessionRecord,
    SessionState,
    Store,
    UnitOfWork,
    UnitOfWorkEnded,
    WriteInsideUnitOfWork,
)
from tests.backends import database_url
from tests.factories import ActivityFactory, CheckpointMetadataFactory, SessionFactory

pytestmark = pytest.mark.both_apis


ORDERS = sa.Table(
    "host_orders",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False),
)


def feed(store: Store, after_seq: int = 0) -> list[tuple[int, str, str]]:
    """`(seq, session_id, type)` of every event after the cursor."""
    page = store.events.load(after_seq=after_seq, limit=1000)
    return [(event.seq, event.session_id, event.event.type) for event in page.events]


def fault(message: str) -> str:
    return SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=message).model_dump_json()


@pytest.fixture
def host_engine(store: Store, backend: str) -> Iterator[sa.Engine]:
    """The host application's own engine on the store's database, with its `host_orders`
    table, set up as the README says (SQLite: foreign keys on)."""
    engine = sa.create_engine(store.url)
    if backend == "sqlite":
        sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON"))
    ORDERS.metadata.create_all(engine)
    yield engine
    engine.dispose()


def orders(engine: sa.Engine) -> list[str]:
    with engine.connect() as connection:
        return list(connection.scalars(sa.select(ORDERS.c.order_id).order_by("order_id")))


# --- service calls inside a unit of work -----------------------------------------------------


def test_service_calls_in_a_unit_of_work_commit_together_with_the_same_events(
    store: Store,
) -> None:
    record = SessionFactory(id="s-1", last_error="bootstrap failed")
    with store.unit_of_work() as uow:
        store.sessions.save(record, uow=uow)
        assert store.faults.record_startup_fault("s-1", "image pull failed", uow=uow) is True
        assert store.activity.record([("s-1", ActivityFactory())], 100, uow=uow) == 1
        # reads in the unit of work see its work so far; other readers do not
        assert store.sessions.get("s-1", uow=uow) == record
        assert store.sessions.get("s-1") is None
        assert feed(store) == []
        uow.commit()
    assert feed(store) == [
        (1, "s-1", "session_fault"),
        (2, "s-1", "session_fault"),
        (3, "s-1", "activity_changed"),
    ]
    assert store.sessions.get("s-1") == record


def test_a_unit_of_work_left_without_commit_keeps_none_of_its_service_calls(
    store: Store,
) -> None:
    with store.unit_of_work() as uow:
        store.sessions.save(SessionFactory(id="s-1"), uow=uow)
        store.faults.record_startup_fault("s-1", "image pull failed", uow=uow)
    assert (store.sessions.get("s-1"), feed(store), store.events.latest_seq()) == (None, [], 0)
    store.sessions.save(SessionFactory(id="s-2"))
    store.faults.record_startup_fault("s-2", "next")
    assert feed(store) == [(1, "s-2", "session_fault")]  # no seq was used up


def test_a_refused_service_call_is_undone_alone_and_the_unit_of_work_goes_on(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="s-1", state=SessionState.RUNNING))
    checkpointing = SessionFactory(id="s-1", state=SessionState.CHECKPOINTING)
    with store.unit_of_work() as uow:
        store.faults.record_startup_fault("s-1", "kept", uow=uow)
        store.checkpoints.begin(checkpointing, "cmd-1", uow=uow)
        with pytest.raises(SessionNotFound):
            store.sessions.save_lifecycle(SessionFactory(id="ghost"), uow=uow)
        with pytest.raises(SessionJournalError, match="checkpointing"):
            store.checkpoints.begin(checkpointing, "cmd-2", uow=uow)  # LifecycleConflict
        uow.commit()
    assert feed(store) == [(1, "s-1", "session_fault")]
    operation = store.checkpoints.get("s-1")
    assert operation is not None and operation.command_id == "cmd-1"


def test_service_calls_inside_a_function_of_the_write_path(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    metadata = CheckpointMetadataFactory()

    def save_and_fault(uow: object) -> bool:
        store.sessions.save(SessionFactory(id="s-2", checkpoint=metadata), uow=uow)
        appended = store.faults.record_startup_fault("s-2", "sidecar missing", uow=uow)
        uow.commit()  # type: ignore[attr-defined]
        return appended

    assert store.run_in_unit_of_work(save_and_fault) is True
    assert feed(store) == [(1, "s-2", "session_fault")]
    saved = store.sessions.get("s-2")
    assert saved is not None and saved.checkpoint == metadata


def test_a_unit_of_work_of_another_store_or_no_unit_of_work_is_refused(
    store: Store, migrated_url: str
) -> None:
    with (
        Store.open(migrated_url) as other,
        other.unit_of_work() as foreign,
        pytest.raises(InvalidRecord, match="another store"),
    ):
        store.faults.record_startup_fault("s-1", "x", uow=foreign)
    with pytest.raises(InvalidRecord, match="uow must be a UnitOfWork"):
        store.sessions.get("s-1", uow="not a unit of work")
    assert feed(store) == []


def test_a_unit_of_work_that_has_ended_refuses_appends_and_service_calls(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with store.unit_of_work() as uow:
        uow.commit()
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        uow.events.append("s-1", 1, fault("late"))
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        store.faults.record_startup_fault("s-1", "late", uow=uow)
    kept: list[object] = []

    def keep(uow: object) -> None:
        kept.append(uow)

    store.run_in_unit_of_work(keep)
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        store.faults.record_startup_fault("s-1", "late", uow=kept[0])
    assert feed(store) == []


# --- the transactional outbox: a unit of work on the caller's transaction ---------------------


def test_outbox_with_the_callers_session_commits_its_rows_and_events_atomically(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(host_engine) as session:
        session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        uow = store.bind(session)
        assert store.bind(session) is uow  # one unit of work per transaction
        store.sessions.save(SessionFactory(id="s-2", last_error="pull failed"), uow=uow)
        uow.events.append("s-1", 1_700_000_000_000, fault("order placed"))
        assert store.events.latest_seq() == 0  # seqs are taken at commit, not before
        with pytest.raises(CallerCommits, match=r"Session.commit\(\) or Connection.commit\(\)"):
            uow.commit()  # the caller's transaction: the caller commits it
        session.commit()
    assert orders(host_engine) == ["order-1"]
    assert feed(store) == [(1, "s-2", "session_fault"), (2, "s-1", "session_fault")]
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        uow.events.append("s-1", 1, fault("after the commit"))


def test_outbox_rollback_writes_nothing_and_takes_no_seq(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with host_engine.connect() as connection:
        connection.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        uow = store.bind(connection)
        store.faults.record_startup_fault("s-1", "never", uow=uow)
        connection.rollback()
    assert (orders(host_engine), feed(store)) == ([], [])
    store.faults.record_startup_fault("s-1", "next")
    assert feed(store) == [(1, "s-1", "session_fault")]


def test_events_queued_in_a_rolled_back_savepoint_of_the_caller_go_with_it(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(host_engine) as session:
        uow = store.bind(session)
        uow.events.append("s-1", 1, fault("kept"))
        with session.begin_nested() as nested:
            session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
            store.faults.record_startup_fault("s-1", "undone", uow=uow)
            nested.rollback()
        with session.begin_nested():
            store.faults.record_startup_fault("s-1", "released", uow=uow)
        session.commit()
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == ["kept", "released"]
    assert orders(host_engine) == []


def test_undoing_a_session_delete_brings_back_the_events_queued_before_it(
    store: Store, host_engine: sa.Engine
) -> None:
    # The delete takes the session's queued events out of the queue (inserted, they would go
    # with it); the rolled-back savepoint undoes the delete, so they must come back.
    store.sessions.save(SessionFactory(id="s-1"))
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        store.faults.record_startup_fault("s-1", "before the delete", uow=uow)
        savepoint = connection.begin_nested()
        assert store.sessions.delete("s-1", uow=uow)
        store.faults.record_startup_fault("s-1", "after the delete", uow=uow)  # no session
        savepoint.rollback()
        store.faults.record_startup_fault("s-1", "after the rollback", uow=uow)
        connection.commit()
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == [
        "before the delete",
        "after the rollback",
    ]
    assert store.sessions.get("s-1") is not None


def test_a_call_of_a_batch_that_deletes_a_session_and_fails_loses_no_event(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s-1"))

    def record_delete_fail(uow: UnitOfWork) -> None:
        store.faults.record_startup_fault("s-1", "kept", uow=uow)
        uow.commit()

        def delete_and_fail(inner: UnitOfWork) -> None:
            store.sessions.delete("s-1", uow=inner)
            raise LookupError("changed its mind")

        with pytest.raises(LookupError):
            uow.run_nested(delete_and_fail, "delete and fail")

    store.run_in_unit_of_work(record_delete_fail)
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == ["kept"]
    assert store.sessions.get("s-1") is not None


def test_events_that_cannot_be_inserted_at_commit_fail_the_commit_and_nothing_commits(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(host_engine) as session:
        uow = store.bind(session)
        session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        uow.events.append("s-1", 1, fault("orphan"))
        # behind the store's back: the session goes, so the event's foreign key fails at commit
        session.execute(sa.text("DELETE FROM sessions WHERE session_id = 's-1'"))
        with pytest.raises(IntegrityViolation, match="commit the events of a unit of work"):
            session.commit()
        session.rollback()
    assert (orders(host_engine), feed(store), store.events.latest_seq()) == ([], [], 0)
    assert store.sessions.get("s-1") is not None
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        uow.events.append("s-1", 1, fault("retry"))


def test_an_event_for_an_unknown_session_is_refused_when_appended(
    store: Store, host_engine: sa.Engine
) -> None:
    with Session(host_engine) as session:
        uow = store.bind(session)
        with pytest.raises(SessionNotFound, match="ghost"):
            uow.events.append("ghost", 1, fault("lost"))
        assert store.faults.record_startup_fault("ghost", "lost", uow=uow) is False
        session.execute(ORDERS.insert().values(order_id="order-1", session_id="ghost"))
        session.commit()  # the caller's own work is not affected
    assert (orders(host_engine), feed(store)) == (["order-1"], [])


def test_the_callers_own_constraint_violation_is_its_own_driver_error(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(host_engine) as session:
        session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        session.commit()
    with Session(host_engine) as session:
        uow = store.bind(session)
        store.faults.record_startup_fault("s-1", "duplicate order", uow=uow)
        with pytest.raises(sa.exc.IntegrityError):  # the application's, not an outage
            session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        session.rollback()
    assert feed(store) == []


def test_a_follower_never_sees_an_uncommitted_or_skipped_outbox_event(
    store: Store, host_engine: sa.Engine, backend: str
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    store.sessions.save(SessionFactory(id="s-2"))
    seen: list[tuple[int, str]] = []
    follower = store.events.follow(after_seq=0)

    def follow() -> None:
        for page in follower:
            seen.extend((event.seq, event.event.message) for event in page.events)  # type: ignore[union-attr]
            if len(seen) >= 4:
                return

    reader = threading.Thread(target=follow)
    reader.start()
    session = Session(host_engine)
    uow = store.bind(session)
    uow.events.append("s-1", 1, fault("outbox 1"))
    uow.events.append("s-1", 2, fault("outbox 2"))
    # another writer meanwhile: on PostgreSQL it commits now; on SQLite it waits for the
    # outbox's write lock (BEGIN IMMEDIATE when bound)
    other = threading.Thread(target=store.faults.record_startup_fault, args=("s-2", "direct"))
    other.start()
    if backend == "postgresql":
        other.join()
    with session:
        second = store.bind(session)
        assert second is uow
        store.faults.record_startup_fault("s-1", "outbox 3", uow=uow)
        assert all(message.startswith("direct") for _, message in seen)
        session.commit()
    other.join()
    reader.join(timeout=30)
    follower.close()
    assert not reader.is_alive()
    assert [seq for seq, _ in seen] == [1, 2, 3, 4]
    messages = [message for _, message in seen]
    assert sorted(messages) == ["direct", "outbox 1", "outbox 2", "outbox 3"]
    outbox = [message for message in messages if message.startswith("outbox")]
    assert outbox == ["outbox 1", "outbox 2", "outbox 3"]  # one commit, consecutive seqs
    first_outbox = messages.index("outbox 1")
    assert messages[first_outbox : first_outbox + 3] == outbox


def test_binding_checks_the_connection(
    store: Store, host_engine: sa.Engine, backend: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidRecord, match="Connection or Session, got str"):
        store.bind("sqlite:///elsewhere.db")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="Session has no engine or connection"):
        store.bind(Session())
    (tmp_path / "other").mkdir()
    with database_url(backend, tmp_path / "other") as other_url:
        other = sa.create_engine(other_url)
        with (
            other.connect() as connection,
            pytest.raises(InvalidRecord, match=r"not the store|schema"),
        ):
            store.bind(connection)
        other.dispose()
    if backend == "sqlite":
        plain = sa.create_engine(store.url)  # foreign keys off, as SQLite's default
        with plain.connect() as connection, pytest.raises(InvalidRecord, match="foreign keys off"):
            store.bind(connection)
        plain.dispose()
    else:
        strict = host_engine.execution_options(isolation_level="REPEATABLE READ")
        with strict.connect() as connection, pytest.raises(InvalidRecord, match="READ COMMITTED"):
            store.bind(connection)
    store.close()
    with host_engine.connect() as connection, pytest.raises(SessionJournalError, match="closed"):
        store.bind(connection)


def test_saving_a_session_record_through_the_outbox_keeps_its_fault_rule(
    store: Store, host_engine: sa.Engine
) -> None:
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        store.sessions.save(SessionRecord(id="s-1", project_id="p", last_error="boom"), uow=uow)
        store.sessions.save(SessionRecord(id="s-1", project_id="p", last_error="boom"), uow=uow)
        connection.commit()
    page = store.events.load(ApiEventFilter(session_id="s-1"), after_seq=0)
    assert [event.event.message for event in page.events] == ["boom"]  # an unchanged re-save: none


# --- the outbox: what a failed commit, savepoints, threads and abandoned connections leave ----


def one_connection_engine(store: Store, backend: str) -> sa.Engine:
    """The host's engine with a pool of one connection: every transaction reuses it."""
    engine = sa.create_engine(store.url, pool_size=1, max_overflow=0, pool_timeout=5)
    if backend == "sqlite":
        sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON"))
    return engine


def test_a_failed_outbox_commit_leaves_nothing_open_for_the_next_user_of_the_connection(
    store: Store, host_engine: sa.Engine, backend: str
) -> None:
    engine = one_connection_engine(store, backend)
    store.sessions.save(SessionFactory(id="s-1"))
    # a caller that neither rolls back nor retries: the Session just closes, then the
    # Connection just closes
    with Session(engine) as session:
        uow = store.bind(session)
        session.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        uow.events.append("s-1", 1, fault("orphan"))
        session.execute(sa.text("DELETE FROM sessions WHERE session_id = 's-1'"))
        with pytest.raises(IntegrityViolation, match="commit the events of a unit of work"):
            session.commit()
    with engine.connect() as connection:
        uow = store.bind(connection)
        connection.execute(ORDERS.insert().values(order_id="order-2", session_id="s-1"))
        uow.events.append("s-1", 1, fault("orphan"))
        connection.execute(sa.text("DELETE FROM sessions WHERE session_id = 's-1'"))
        with pytest.raises(IntegrityViolation, match="commit the events of a unit of work"):
            connection.commit()
        assert not connection.in_transaction()
    # the next transaction on the pooled connection commits its own row, and only it
    with engine.begin() as connection:
        connection.execute(ORDERS.insert().values(order_id="order-3", session_id="s-1"))
    assert orders(host_engine) == ["order-3"]
    assert store.sessions.get("s-1") is not None  # the deletes were rolled back
    assert (feed(store), store.events.latest_seq()) == ([], 0)
    store.faults.record_startup_fault("s-1", "next")  # no lock left held: does not wait
    assert feed(store) == [(1, "s-1", "session_fault")]
    engine.dispose()


def test_a_session_savepoint_rolled_back_undoes_the_service_calls_made_in_it(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(host_engine) as session:
        uow = store.bind(session)
        store.faults.record_startup_fault("s-1", "kept", uow=uow)
        # no statement goes through the Session inside the savepoint: only service calls
        with pytest.raises(ValueError, match="step aborted"), session.begin_nested():
            store.sessions.save(SessionFactory(id="s-9", last_error="boom"), uow=uow)
            store.faults.record_startup_fault("s-1", "undone", uow=uow)
            raise ValueError("step aborted")
        with session.begin_nested():
            uow.events.append("s-1", 2, fault("released"))
        session.commit()
    assert store.sessions.get("s-9") is None
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == ["kept", "released"]


def test_a_savepoint_opened_before_binding_and_rolled_back_takes_the_events_with_it(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with host_engine.connect() as connection:
        connection.begin()
        savepoint = connection.begin_nested()
        uow = store.bind(connection)
        uow.events.append("s-1", 1, fault("connection: undone"))
        savepoint.rollback()
        uow.events.append("s-1", 2, fault("connection: kept"))
        connection.commit()
    with Session(host_engine) as session:
        savepoint_of_session = session.begin_nested()
        uow = store.bind(session)
        store.faults.record_startup_fault("s-1", "session: undone", uow=uow)
        savepoint_of_session.rollback()
        store.faults.record_startup_fault("s-1", "session: kept", uow=uow)
        session.commit()
    page = store.events.load(after_seq=0)
    messages = [event.event.message for event in page.events]
    assert messages == ["connection: kept", "session: kept"]


def test_rolling_back_an_outer_savepoint_drops_the_events_of_the_inner_ones_too(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        uow.events.append("s-1", 1, fault("before"))
        outer = connection.begin_nested()
        connection.execute(ORDERS.insert().values(order_id="order-1", session_id="s-1"))
        uow.events.append("s-1", 2, fault("in the outer savepoint"))
        connection.begin_nested()  # the inner one, still open when the outer is rolled back
        uow.events.append("s-1", 3, fault("in the inner savepoint"))
        with pytest.warns(sa.exc.SAWarning, match="already deassociated"):
            outer.rollback()
        uow.events.append("s-1", 4, fault("after"))
        connection.commit()
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == ["before", "after"]
    assert orders(host_engine) == []


def test_binding_refuses_an_autocommit_connection(
    store: Store, host_engine: sa.Engine, backend: str
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    engine_level = sa.create_engine(store.url, isolation_level="AUTOCOMMIT")
    if backend == "sqlite":
        sa.event.listen(
            engine_level, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON")
        )
    for engine in (host_engine.execution_options(isolation_level="AUTOCOMMIT"), engine_level):
        with engine.connect() as connection, pytest.raises(InvalidRecord, match="AUTOCOMMIT"):
            store.bind(connection)
        with Session(engine) as session, pytest.raises(InvalidRecord, match="AUTOCOMMIT"):
            store.bind(session)
    engine_level.dispose()
    store.faults.record_startup_fault("s-1", "next")
    assert feed(store) == [(1, "s-1", "session_fault")]


@pytest.mark.sync_api  # the async API runs each call on a worker thread, which binds nothing
def test_a_write_without_uow_from_the_thread_holding_a_bound_transaction_is_refused(
    store: Store, host_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        store.sessions.save(SessionFactory(id="s-1", last_error="locked by the outbox"), uow=uow)
        with pytest.raises(BoundTransactionOpen, match=r"holds a transaction bound .*uow="):
            store.faults.record_startup_fault("s-1", "forgot uow=")
        with (
            pytest.raises(BoundTransactionOpen, match="holds a transaction bound"),
            store.unit_of_work(),
        ):
            pass
        assert store.sessions.get("s-1") is not None  # reads do not wait: allowed
        connection.commit()
        store.faults.record_startup_fault("s-1", "after the commit")  # the thread is free
    # a transaction bound here and committed by another thread frees this one too
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        store.faults.record_startup_fault("s-1", "outbox", uow=uow)
        committer = threading.Thread(target=connection.commit)
        committer.start()
        committer.join()
        store.faults.record_startup_fault("s-1", "after the other thread's commit")
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == [
        "locked by the outbox",
        "after the commit",
        "outbox",
        "after the other thread's commit",
    ]


@pytest.mark.sync_api  # the same thread binds and then writes
def test_an_abandoned_bound_connection_is_collected_and_returned_to_its_pool(
    store: Store, backend: str
) -> None:
    engine = one_connection_engine(store, backend)
    store.sessions.save(SessionFactory(id="s-1"))

    def handler() -> None:
        connection = engine.connect()  # never closed: the error path forgets it
        uow = store.bind(connection)
        uow.events.append("s-1", 1, fault("abandoned"))
        raise RuntimeError("request failed")

    with pytest.raises(RuntimeError, match="request failed"):
        handler()
    gc.collect()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    store.faults.record_startup_fault("s-1", "next")  # no lock held, nor this thread marked
    assert feed(store) == [(1, "s-1", "session_fault")]
    page = store.events.load(after_seq=0)
    assert [event.event.message for event in page.events] == ["next"]
    engine.dispose()


def test_the_repositories_of_an_ended_bound_unit_of_work_refuse_to_write(
    store: Store, host_engine: sa.Engine
) -> None:
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        connection.commit()
        with pytest.raises(UnitOfWorkEnded, match="has ended \\(its transaction committed\\)"):
            uow.sessions.upsert(SessionFactory(id="late"))
        with pytest.raises(UnitOfWorkEnded, match="has ended"):
            uow.activity.put("late", ActivityFactory().model_dump_json())
        connection.commit()
    assert store.sessions.get("late") is None


def test_a_journal_writer_indexing_into_the_store_refuses_to_flush_inside_a_bound_transaction(
    store: Store, host_engine: sa.Engine, tmp_path: Path
) -> None:
    # Its index inserts go through the store's write path, which waits for this transaction.
    from session_journal.journal.writer import JournalWriter
    from tests.factories import JournalEnvelopeFactory

    store.sessions.save(SessionFactory(id="s-1"))
    writer = JournalWriter(tmp_path / "s-1", index=store.index, session_id="s-1")
    try:
        writer.send(JournalEnvelopeFactory(seq=1))
        with host_engine.connect() as connection:
            store.bind(connection)
            with pytest.raises(WriteInsideUnitOfWork, match=r"flush\(\) of a journal writer"):
                writer.flush()
            connection.rollback()
        assert writer.flush().persisted
    finally:
        writer.close()
