"""The write path under contention: busy timeouts, nested units of work, concurrent saves."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import (
    OutcomeReason,
    SessionFault,
    SessionJournalError,
    StorageError,
    Store,
    StoreOptions,
)
from tests.factories import ActivityFactory, SessionFactory
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
    with store.unit_of_work() as uow, pytest.raises(SessionJournalError, match="inside a unit"):
        store.faults.record_startup_fault("s", "boom")
    del uow
    assert store.faults.record_startup_fault("s", "after")


def test_an_activity_batch_that_fails_midway_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionFactory(id="a"))
    store.sessions.save(SessionFactory(id="b"))
    from session_journal.repositories import ActivityRepository

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


def test_two_controllers_saving_the_same_new_failed_session_emit_one_fault(url: str) -> None:
    with Store.open(url, upgrade=True) as first, Store.open(url) as second:
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
    idle = store._database._idle_writer
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
    store: Store, url: str
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    assert store.faults.record_startup_fault("s", "before")
    drop_writer_connection(store, url)

    with pytest.raises(StorageError, match="record startup fault of 's' failed"):
        store.faults.record_startup_fault("s", "lost")
    assert store.faults.record_startup_fault("s", "after")
    faults = [
        SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=m) for m in ("before", "after")
    ]
    assert bodies(store) == faults
