"""The `StorageError` subclasses of failures provoked for real, on both backends: a constraint
the caller's own statements break, a lock held past the waiter's timeout, a damaged schema, a
connection the server ended."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import (
    IntegrityViolation,
    PermanentStorageError,
    StorageError,
    Store,
    StoreOptions,
    TransientStorageError,
)
from session_journal.storage.unit_of_work import UnitOfWork
from tests.backends import postgres_base_url
from tests.factories import ActivityFactory, SessionFactory, SessionFaultFactory
from tests.helpers import bodies


def test_a_foreign_key_broken_in_a_unit_of_work_is_an_integrity_violation(store: Store) -> None:
    with (
        pytest.raises(IntegrityViolation, match=r"^unit of work failed: ") as raised,
        store.unit_of_work() as uow,
    ):
        uow.activity.put("ghost", ActivityFactory().model_dump_json())
    assert isinstance(raised.value.__cause__, sa.exc.IntegrityError)
    store.sessions.save(SessionFactory(id="a"))  # the write path is sound again
    assert store.sessions.get("a") is not None


def test_a_unique_key_broken_in_a_unit_of_work_is_an_integrity_violation(store: Store) -> None:
    with pytest.raises(IntegrityViolation), store.unit_of_work() as uow:
        uow.connection.exec_driver_sql(
            "INSERT INTO event_sequences (name, last_seq) VALUES ('api_events', 0)"
        )
        uow.commit()


def test_a_constraint_broken_by_a_function_on_the_write_path_is_its_integrity_violation(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def put_for_ghost(uow: UnitOfWork) -> None:
        uow.activity.put("ghost", ActivityFactory().model_dump_json())
        uow.commit()

    with pytest.raises(IntegrityViolation, match=r"^put_for_ghost failed: "):
        store.run_in_unit_of_work(put_for_ghost)
    assert store.faults.record_startup_fault("a", "after")


def defer_a_violation_to_the_commit(uow: UnitOfWork) -> None:
    """A violation only the commit finds: SQLite's deferred foreign keys; on PostgreSQL a
    deferred unique constraint of a temporary table."""
    if uow.connection.dialect.name == "sqlite":
        uow.connection.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
        uow.connection.exec_driver_sql(
            "INSERT INTO session_contexts (session_id, workspace_id) VALUES ('ghost', 'w')"
        )
    else:
        uow.connection.exec_driver_sql(
            "CREATE TEMP TABLE doomed (x INTEGER UNIQUE DEFERRABLE INITIALLY DEFERRED)"
        )
        uow.connection.exec_driver_sql("INSERT INTO doomed VALUES (1), (1)")
    uow.commit()


def test_a_violation_found_by_the_commit_of_a_lone_call_is_its_own(store: Store) -> None:
    # A batch of several calls gives each a plain StorageError instead (no one call's own: see
    # test_group_commit.py); a lone call's batch holds only its own work.
    with pytest.raises(IntegrityViolation):
        store.run_in_unit_of_work(defer_a_violation_to_the_commit)
    with pytest.raises(IntegrityViolation), store.unit_of_work() as uow:
        defer_a_violation_to_the_commit(uow)


def with_lock_timeout(url: str, milliseconds: int) -> str:
    """`url` with PostgreSQL's `lock_timeout` set on its connections."""
    parsed = sa.make_url(url)
    options = f"{parsed.query.get('options', '')} -c lock_timeout={milliseconds}".strip()
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


def test_a_writer_locked_out_past_its_timeout_gets_a_transient_error(url: str) -> None:
    # SQLite: the other store's write lock (BEGIN IMMEDIATE), past the busy timeout.
    # PostgreSQL: the row lock on `event_sequences`, past `lock_timeout`.
    waiter_url = url if url.startswith("sqlite") else with_lock_timeout(url, 200)
    with (
        Store.open(url, upgrade=True) as holder,
        Store.open(waiter_url, options=StoreOptions(busy_timeout_s=0.2)) as waiter,
    ):
        holder.sessions.save(SessionFactory(id="s"))
        with holder.unit_of_work() as uow:
            uow.connection.exec_driver_sql("UPDATE event_sequences SET last_seq = last_seq")
            with pytest.raises(TransientStorageError, match=r"^record startup fault of 's'"):
                waiter.faults.record_startup_fault("s", "locked out")
        assert waiter.faults.record_startup_fault("s", "retried")
        assert bodies(waiter) == [SessionFaultFactory(message="retried")]


def drop_table(url: str, table: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE {table}")
    finally:
        engine.dispose()


def test_a_dropped_table_is_a_permanent_error_for_reads_and_writes(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    drop_table(store.url, "api_session_activity")
    with pytest.raises(PermanentStorageError, match=r"^get activity of 's' failed: "):
        store.activity.get("s")
    with pytest.raises(PermanentStorageError, match=r"^record activity failed: "):
        store.activity.record([("s", ActivityFactory())], 1)
    with pytest.raises(PermanentStorageError):  # the same again: nothing to retry
        store.activity.record([("s", ActivityFactory())], 1)
    assert store.faults.record_startup_fault("s", "elsewhere")  # the rest still works


def test_a_missing_frontier_row_is_a_permanent_error(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.unit_of_work() as uow:
        uow.connection.exec_driver_sql("DELETE FROM event_sequences")
        uow.commit()
    with pytest.raises(PermanentStorageError, match="the schema is damaged"):
        store.events.latest_seq()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_connection_the_server_ended_is_a_transient_error(store: Store) -> None:
    # PostgreSQL only: a SQLite connection has no server to lose.
    store.sessions.save(SessionFactory(id="s"))

    def backend_pid(uow: UnitOfWork) -> int:
        return int(uow.connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

    writer = store.run_in_unit_of_work(backend_pid)  # the write path keeps this connection
    admin = sa.create_engine(store.url)
    try:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"SELECT pg_terminate_backend({writer})")
    finally:
        admin.dispose()
    with pytest.raises(TransientStorageError) as raised:
        store.faults.record_startup_fault("s", "lost")
    assert isinstance(raised.value, StorageError)
    assert store.faults.record_startup_fault("s", "retried")  # a new connection
    assert bodies(store) == [SessionFaultFactory(message="retried")]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_database_that_does_not_exist_is_no_transient_error(backend: str) -> None:
    # The server refuses the connection for good: a caller told to retry would never stop.
    missing = sa.make_url(postgres_base_url()).set(database="sj_no_such_database")
    with pytest.raises(StorageError) as raised:
        Store.open(missing.render_as_string(hide_password=False))
    assert not isinstance(raised.value, TransientStorageError)
    assert 'database "sj_no_such_database" does not exist' in str(raised.value)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_reader_connection_the_server_ended_is_a_transient_error(store: Store) -> None:
    # PostgreSQL only, as above. A read of the log of one statement runs on the reader pool's
    # driver connection (`driver.pooled`): a dead one is invalidated, not given back.
    store.sessions.save(SessionFactory(id="s"))
    store.faults.record_startup_fault("s", "before")
    reader = store._database.reader  # white-box: the reader pool's connections, all of them
    held = [reader.raw_connection() for _ in range(reader.pool.size())]  # type: ignore[attr-defined]
    pids = [fairy.dbapi_connection.info.backend_pid for fairy in held]  # type: ignore[union-attr]
    for fairy in held:
        fairy.close()
    admin = sa.create_engine(store.url)
    try:
        with admin.begin() as connection:
            for pid in pids:
                connection.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
    finally:
        admin.dispose()
    failed = 0
    for _ in range(8):  # each dead pooled connection fails one read, then is replaced
        try:
            assert store.events.load(after_seq=0).latest_seq == 1
        except TransientStorageError:
            failed += 1
    assert failed >= 1
    for _ in range(8):
        assert [event.seq for event in store.events.load(after_seq=0).events] == [1]
    assert store.sessions.get("s") is not None  # a read in a transaction works too
