"""The write path under contention: busy timeouts, nested units of work, concurrent saves."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import (
    CallWithdrawn,
    OutcomeReason,
    SessionFault,
    StorageError,
    Store,
    StoreOptions,
    WriteInsideUnitOfWork,
)
from session_journal.storage.calls import WITHDRAWAL, Withdrawal
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import ActivityFactory, SessionFactory, SessionFaultFactory
from tests.helpers import bodies


def test_a_sqlite_writer_that_waits_past_the_busy_timeout_gets_a_storage_error(
    tmp_path: Path,
) -> None:
    # SQLite only: PostgreSQL writers wait on row locks without a timeout of ours.
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    with (
        Store.open(url, upgrade=True) as holder,
        Store.open(url, options=StoreOptions(busy_timeout_s=0.2)) as waiter,
    ):
        holder.sessions.save(SessionFactory(id="s"))
        with (
            holder.unit_of_work(),  # holds the database's write lock (BEGIN IMMEDIATE)
            pytest.raises(StorageError, match="database is locked"),
        ):
            waiter.faults.record_startup_fault("s", "boom")
        assert waiter.faults.record_startup_fault("s", "boom")


def test_a_service_called_inside_a_unit_of_work_is_refused(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.unit_of_work() as uow, pytest.raises(WriteInsideUnitOfWork, match="inside a unit"):
        store.faults.record_startup_fault("s", "boom")
    del uow
    assert store.faults.record_startup_fault("s", "after")


def test_an_activity_batch_that_fails_midway_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionFactory(id="a"))
    store.sessions.save(SessionFactory(id="b"))
    from session_journal.storage.repositories import ActivityRepository

    original, calls = ActivityRepository.put, []

    def put_then_fail(self: ActivityRepository, session_id: str, body: str) -> None:
        calls.append(session_id)
        if len(calls) == 2:
            raise RuntimeError("disk went away")
        original(self, session_id, body)

    monkeypatch.setattr(ActivityRepository, "put", put_then_fail)
    with pytest.raises(RuntimeError, match="disk went away"):
        store.activity.record([("a", ActivityFactory()), ("b", ActivityFactory())], 1)
    monkeypatch.undo()
    assert store.events.latest_seq() == 0
    assert store.activity.get("a") is None


def test_two_controllers_saving_the_same_new_failed_session_emit_one_fault(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url, upgrade=True) as first, Store.open(migrated_url) as second:
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def save(store: Store) -> None:
            try:
                for n in range(15):
                    barrier.wait()
                    store.sessions.save(SessionFactory(id=f"s-{n}", last_error="boot failed"))
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=save, args=(store,)) for store in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert (
            bodies(first)
            == [SessionFault(reason=OutcomeReason.LIFECYCLE_FAILED, message="boot failed")] * 15
        )


def drop_writer_connection(store: Store, url: str) -> None:
    """Break the connection the store keeps for writes, as a server restart would."""
    idle = store._database.write_path._connection
    assert idle is not None
    driver = idle.connection.driver_connection
    if store._database.writer.dialect.name == "sqlite":
        driver.close()  # type: ignore[union-attr]
        return
    pid = driver.info.backend_pid  # type: ignore[union-attr]
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        assert connection.scalar(sa.text(f"SELECT pg_terminate_backend({pid}, 5000)"))
    admin.dispose()


def test_a_write_on_a_dropped_connection_fails_once_then_writes_reconnect(
    store: Store, migrated_url: str
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    assert store.faults.record_startup_fault("s", "before")
    drop_writer_connection(store, migrated_url)

    with pytest.raises(StorageError, match="record startup fault of 's' failed"):
        store.faults.record_startup_fault("s", "lost")
    assert store.faults.record_startup_fault("s", "after")
    assert bodies(store) == [
        SessionFaultFactory(message="before"),
        SessionFaultFactory(message="after"),
    ]


def append_fault(uow: UnitOfWork, message: str) -> bool:
    return uow.events.append_if_session_exists(
        "s", 1, SessionFaultFactory(message=message).model_dump_json()
    )


def test_an_append_after_commit_that_is_never_committed_is_not_written(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.unit_of_work() as uow:
        uow.commit()
        assert uow.events.append_if_session_exists(
            "s", 1, SessionFaultFactory(message="never committed").model_dump_json()
        )
    assert store.faults.record_startup_fault("s", "later")
    assert bodies(store) == [SessionFaultFactory(message="later")]


def test_what_a_unit_of_work_does_to_its_connection_stays_in_it(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.unit_of_work() as uow:
        uow.commit()
        uow.connection.execution_options(isolation_level="AUTOCOMMIT")
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        assert uow.events.append_if_session_exists(
            "s", 1, SessionFaultFactory(message="rolled back").model_dump_json()
        )
        raise RuntimeError("the caller gives up before commit()")
    with store.unit_of_work() as uow:
        uow.connection.close()
    assert store.faults.record_startup_fault("s", "after")
    assert bodies(store) == [SessionFaultFactory(message="after")]


def test_closing_the_store_during_a_write_waits_for_it_and_keeps_no_connection(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    inside, release = threading.Event(), threading.Event()

    def write() -> None:
        with store.unit_of_work() as uow:
            inside.set()
            release.wait(10)
            uow.events.append_if_session_exists(
                "s", 1, SessionFaultFactory(message="in flight").model_dump_json()
            )
            uow.commit()

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waits for the write in progress
    release.set()
    writer.join(10)
    closer.join(10)
    assert not closer.is_alive()
    assert store._database.write_path._connection is None


def test_a_call_withdrawn_before_it_is_queued_is_never_written(migrated_url: str) -> None:
    # The check of the withdrawal and its attachment to the queued call are one step: a cancel
    # either refuses the call before it is queued or withdraws it from the queue.
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s1"))
        before = store.events.latest_seq()
        withdrawal = Withdrawal()
        assert withdrawal.cancel() is True  # nothing queued yet: sure never to be written
        token = WITHDRAWAL.set(withdrawal)
        try:
            with pytest.raises(CallWithdrawn, match="withdrawn before it was queued"):
                store.faults.record_startup_fault("s1", "never")
        finally:
            WITHDRAWAL.reset(token)
        assert store.events.latest_seq() == before
        assert withdrawal.attach(lambda: True) is False


def test_a_withdrawal_attached_first_withdraws_through_the_write_path() -> None:
    withdrawn: list[str] = []
    withdrawal = Withdrawal()
    assert withdrawal.attach(lambda: withdrawn.append("queued call") is None) is True
    assert withdrawal.cancel() is True
    assert withdrawn == ["queued call"]
