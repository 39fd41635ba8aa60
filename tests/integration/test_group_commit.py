"""Group commit: concurrent calls of one store share a transaction, each in its own savepoint.

A unit-of-work block holds the write path while the calls queue, so that they form one batch
when it ends: the batch is then exactly the calls queued, in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    LifecycleConflict,
    SessionNotFound,
    SessionState,
    StorageError,
    Store,
    StoreClosed,
    UnitOfWork,
    WriteInsideUnitOfWork,
)
from session_journal.storage import write_path as write_path_module
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import bodies, left_for_the_collector


class Caller(threading.Thread):
    """A thread making one store call; `outcome` is what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__()
        self.call = call
        self.outcome: Any = None

    def run(self) -> None:
        try:
            self.outcome = self.call()
        except Exception as error:
            self.outcome = error


def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the condition never held")


@contextmanager
def one_batch(store: Store, calls: list[Callable[[], Any]]) -> Iterator[list[Caller]]:
    """Start the calls while a unit of work holds the write path; they run as one batch when
    the block ends. Yields the callers, finished."""
    write_path = store._database.write_path
    callers = [Caller(call) for call in calls]
    with store.unit_of_work():
        for caller in callers:  # one at a time, so the queue keeps their order
            queued = write_path.queued()
            caller.start()
            wait_until(lambda queued=queued: write_path.queued() == queued + 1)
        batches = write_path.batches
    for caller in callers:
        caller.join(30)
    assert write_path.batches - batches == 1  # after the block, the whole queue at once
    yield callers


def test_queued_calls_commit_together_in_queue_order(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.sessions.save(SessionFactory(id=name))
    calls = [
        lambda name=name: store.faults.record_startup_fault(name, f"{name} failed")
        for name in ("a", "b", "c")
    ]
    with one_batch(store, calls) as callers:
        assert [caller.outcome for caller in callers] == [True, True, True]
    assert bodies(store) == [
        SessionFaultFactory(message="a failed"),
        SessionFaultFactory(message="b failed"),
        SessionFaultFactory(message="c failed"),
    ]
    assert [event.seq for event in store.events.load(after_seq=0).events] == [1, 2, 3]


def test_a_failing_call_raises_in_its_own_caller_and_the_rest_commit(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))
    busy = SessionFactory(id="busy", state=SessionState.CHECKPOINTING)
    store.sessions.save(busy)
    calls = [
        lambda: store.faults.record_startup_fault("a", "first"),
        lambda: store.sessions.save_lifecycle(SessionFactory(id="ghost")),
        lambda: store.checkpoints.begin(busy, "attempt-1"),
        lambda: store.faults.record_startup_fault("a", "last"),
    ]
    with one_batch(store, calls) as callers:
        outcomes = [caller.outcome for caller in callers]
    assert outcomes[0] is True and outcomes[3] is True
    assert isinstance(outcomes[1], SessionNotFound)
    assert str(outcomes[1]) == "session 'ghost' does not exist"
    assert isinstance(outcomes[2], LifecycleConflict)
    assert bodies(store) == [
        SessionFaultFactory(message="first"),
        SessionFaultFactory(message="last"),
    ]
    assert store.sessions.get("ghost") is None
    assert store.checkpoints.get("busy") is None


def test_a_refusal_against_earlier_members_work_is_released_after_the_commit(
    store: Store, migrated_url: str
) -> None:
    store.sessions.save(SessionFactory(id="a"))
    observer = sa.create_engine(migrated_url)
    seen: list[Any] = []

    def fault_then_look() -> bool:
        appended = store.faults.record_startup_fault("a", "too late")
        with observer.connect() as connection:  # another connection: committed state only
            seen.append(
                connection.execute(
                    sa.text("SELECT COUNT(*) FROM sessions WHERE session_id = 'a'")
                ).scalar_one()
            )
        return appended

    with one_batch(store, [lambda: store.sessions.delete("a"), fault_then_look]) as callers:
        assert [caller.outcome for caller in callers] == [True, False]
    observer.dispose()
    assert seen == [0]  # the delete it was refused against had committed when it returned
    assert bodies(store) == []


def test_events_of_a_session_deleted_later_in_the_batch_go_with_it(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))
    store.sessions.save(SessionFactory(id="b"))
    calls = [
        lambda: store.faults.record_startup_fault("a", "gone with a"),
        lambda: store.faults.record_startup_fault("b", "kept"),
        lambda: store.sessions.delete("a"),
    ]
    with one_batch(store, calls) as callers:
        assert [caller.outcome for caller in callers] == [True, True, True]
    assert bodies(store) == [SessionFaultFactory(message="kept")]


def fail_at_commit(uow: UnitOfWork) -> None:
    """Leave a violation that only the commit finds (a deferred check): SQLite's deferred
    foreign keys; on PostgreSQL a deferred unique constraint of a temporary table."""
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


def test_a_failed_commit_fails_every_call_of_the_batch_and_the_next_batch_works(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="a"))
    calls = [
        lambda: store.faults.record_startup_fault("a", "lost with the batch"),
        lambda: store.run_in_unit_of_work(fail_at_commit),
        lambda: store.sessions.save_lifecycle(SessionFactory(id="ghost")),
    ]
    with one_batch(store, calls) as callers:
        outcomes = [caller.outcome for caller in callers]
    assert [type(outcome) for outcome in outcomes] == [StorageError] * 3, outcomes
    assert str(outcomes[0]).startswith("record startup fault of 'a' failed: ")
    assert "FOREIGN KEY" in str(outcomes[0]).upper() or "doomed" in str(outcomes[0])
    assert bodies(store) == []
    assert store.faults.record_startup_fault("a", "next batch")
    assert bodies(store) == [SessionFaultFactory(message="next batch")]


def test_a_function_that_does_not_commit_leaves_nothing(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def append_without_commit(uow: UnitOfWork) -> str:
        uow.events.append("a", 1, SessionFaultFactory(message="never").model_dump_json())
        return "done"

    def append_and_commit(uow: UnitOfWork) -> int:
        uow.events.append("a", 1, SessionFaultFactory(message="kept").model_dump_json())
        uow.commit()
        return uow.events.pending_count()

    calls = [
        lambda: store.run_in_unit_of_work(append_without_commit),
        lambda: store.run_in_unit_of_work(append_and_commit),
    ]
    with one_batch(store, calls) as callers:
        assert [caller.outcome for caller in callers] == ["done", 1]
    assert store.run_in_unit_of_work(append_without_commit) == "done"  # alone, too
    assert bodies(store) == [SessionFaultFactory(message="kept")]


def test_closing_fails_the_queued_calls_and_refuses_new_ones(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))
    write_path = store._database.write_path
    callers = [Caller(lambda: store.faults.record_startup_fault("a", "queued")) for _ in range(3)]
    closer = threading.Thread(target=store.close)
    with store.unit_of_work() as uow:
        for caller in callers:
            caller.start()
        wait_until(lambda: write_path.queued() == 3)
        closer.start()
        wait_until(lambda: all(not caller.is_alive() for caller in callers))
        uow.events.append("a", 1, SessionFaultFactory(message="in the block").model_dump_json())
        uow.commit()
    closer.join(30)
    assert [type(caller.outcome) for caller in callers] == [StoreClosed] * 3
    assert str(callers[0].outcome) == "record startup fault of 'a': the store was closed"
    with pytest.raises(StoreClosed):
        store.faults.record_startup_fault("a", "after")
    with Store.open(store.url) as reopened:
        assert bodies(reopened) == [SessionFaultFactory(message="in the block")]


def test_a_full_queue_makes_a_caller_wait_then_fail_retryably(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_path_module, "MAX_QUEUED_CALLS", 1)
    from session_journal import StoreOptions

    with Store.open(migrated_url, upgrade=True, options=StoreOptions(busy_timeout_s=0.2)) as store:
        store.sessions.save(SessionFactory(id="a"))
        write_path = store._database.write_path
        first = Caller(lambda: store.faults.record_startup_fault("a", "queued"))
        second = Caller(lambda: store.faults.record_startup_fault("a", "no room"))
        with store.unit_of_work():
            first.start()
            wait_until(lambda: write_path.queued() == 1)
            second.start()
            second.join(30)
        first.join(30)
        assert isinstance(second.outcome, StorageError)
        assert str(second.outcome) == (
            "record startup fault of 'a': the write queue stayed full (1 calls) for the busy "
            "timeout (0.2 s); retry later"
        )
        assert first.outcome is True
        assert bodies(store) == [SessionFaultFactory(message="queued")]


def test_many_threads_lose_nothing_and_share_commits(store: Store) -> None:
    names = [f"s{index}" for index in range(16)]
    for name in names:
        store.sessions.save(SessionFactory(id=name))
    write_path = store._database.write_path
    batches, calls = write_path.batches, write_path.calls
    callers = [
        Caller(
            lambda name=name: [store.faults.record_startup_fault(name, str(n)) for n in range(20)]
        )
        for name in names
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)
    assert [caller.outcome for caller in callers] == [[True] * 20] * 16
    assert write_path.calls - calls == 320
    events = store.events.load(after_seq=0, limit=1000).events
    assert [event.seq for event in events] == list(range(1, 321))
    for name in names:  # each thread's appends in its own order
        assert [e.event for e in events if e.session_id == name] == [
            SessionFaultFactory(message=str(n)) for n in range(20)
        ]
    assert write_path.batches - batches < 320  # 16 threads at once: some batches are shared


def test_a_store_used_in_a_forked_child_gets_its_own_connections(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))
    assert store.faults.record_startup_fault("a", "parent before")  # the kept write connection
    assert store.events.latest_seq() == 1  # a pooled reader connection
    pid = os.fork()
    if pid == 0:  # the child: write, read, close, and never touch the parent's connections
        code = 1
        try:
            store.faults.record_startup_fault("a", "child")
            code = 0 if store.events.latest_seq() == 2 else 2
            store.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.faults.record_startup_fault("a", "parent after")
    assert bodies(store) == [
        SessionFaultFactory(message="parent before"),
        SessionFaultFactory(message="child"),
        SessionFaultFactory(message="parent after"),
    ]


def test_batches_of_two_controllers_locking_in_crossed_order_both_commit(migrated_url: str) -> None:
    # PostgreSQL: each batch locks one session, then waits for the other batch to lock the
    # other, then asks for it: a deadlock. Its victim is rolled back to its savepoint and queued
    # again, so every call succeeds. (SQLite writers never overlap: the batches run in turn.)
    with Store.open(migrated_url, upgrade=True) as first, Store.open(migrated_url) as second:
        for name in ("s1", "s2"):
            first.sessions.save(SessionFactory(id=name))
        postgres = first._database.writer.dialect.name == "postgresql"
        met = threading.Barrier(2 if postgres else 1, timeout=30)

        def lock_then_meet(name: str) -> Callable[[UnitOfWork], str]:
            def fn(uow: UnitOfWork) -> str:
                uow.sessions.lock(name)
                met.wait()
                uow.commit()
                return name

            return fn

        def failed_by(store: Store, name: str, who: str) -> Callable[[], None]:
            record = SessionFactory(id=name, last_error=f"seen by {who}")
            return lambda: store.sessions.save_lifecycle(record)

        plans = [
            (
                first,
                [
                    lambda: first.run_in_unit_of_work(lock_then_meet("s1")),
                    failed_by(first, "s2", "first"),
                ],
            ),
            (
                second,
                [
                    lambda: second.run_in_unit_of_work(lock_then_meet("s2")),
                    failed_by(second, "s1", "second"),
                ],
            ),
        ]
        callers: list[Caller] = []
        if postgres:  # both batches at once
            with first.unit_of_work(), second.unit_of_work():
                for store, calls in plans:
                    for call in calls:
                        queued = store._database.write_path.queued()
                        callers.append(Caller(call))
                        callers[-1].start()
                        wait_until(
                            lambda s=store, q=queued: s._database.write_path.queued() == q + 1
                        )
        else:
            for store, calls in plans:
                with one_batch(store, calls) as done:
                    callers.extend(done)
        for caller in callers:
            caller.join(60)
        assert [caller.outcome for caller in callers] == ["s1", None, "s2", None]
        retried = first._database.write_path.retried + second._database.write_path.retried
        assert retried == (1 if postgres else 0)
        assert {record.id: record.last_error for record in first.sessions.list()} == {
            "s1": "seen by second",
            "s2": "seen by first",
        }


def test_a_caller_interrupted_while_queued_withdraws_its_call(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.unit_of_work():
            inside.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(30)
    # Python's own handler, whatever the suite inherited (a shell's background job ignores
    # SIGINT, and Python then leaves it ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    interrupt.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            store.faults.record_startup_fault("a", "withdrawn")
    finally:
        interrupt.cancel()
        signal.signal(signal.SIGINT, previous)
        release.set()
        holder.join(30)
    assert store._database.write_path.queued() == 0
    assert store.faults.record_startup_fault("a", "after")
    assert bodies(store) == [SessionFaultFactory(message="after")]


def test_a_write_started_from_a_function_the_write_path_runs_is_refused(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def nested(uow: UnitOfWork) -> None:
        store.faults.record_startup_fault("a", "from inside")

    with pytest.raises(WriteInsideUnitOfWork, match="inside a unit of work of the same store"):
        store.run_in_unit_of_work(nested)
    calls = [
        lambda: store.run_in_unit_of_work(nested),
        lambda: store.faults.record_startup_fault("a", "ok"),
    ]
    with one_batch(store, calls) as callers:
        assert isinstance(callers[0].outcome, WriteInsideUnitOfWork)
        assert callers[1].outcome is True
    assert bodies(store) == [SessionFaultFactory(message="ok")]


def test_closing_the_store_from_a_function_the_write_path_runs_does_not_hang(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def close_and_append(uow: UnitOfWork) -> str:
        store.close()
        uow.events.append(
            "a", 1, SessionFaultFactory(message="committed before the close").model_dump_json()
        )
        uow.commit()
        return "closed"

    closer = Caller(lambda: store.run_in_unit_of_work(close_and_append))
    closer.start()
    closer.join(30)
    assert closer.outcome == "closed"
    # Its connection was closed, not left in the pool of the disposed engine for the garbage
    # collector (psycopg warns of a connection deleted while open: an error in this suite).
    assert left_for_the_collector() == []
    with Store.open(store.url) as reopened:
        assert bodies(reopened) == [SessionFaultFactory(message="committed before the close")]


def test_an_event_for_an_unknown_session_fails_only_its_own_call(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def append_to(session_id: str) -> Callable[[UnitOfWork], None]:
        def fn(uow: UnitOfWork) -> None:
            uow.events.append(
                session_id, 1, SessionFaultFactory(message=session_id).model_dump_json()
            )
            uow.commit()

        return fn

    calls = [
        lambda: store.run_in_unit_of_work(append_to("a")),
        lambda: store.run_in_unit_of_work(append_to("ghost")),
        lambda: store.run_in_unit_of_work(append_to("a")),
    ]
    with one_batch(store, calls) as callers:
        outcomes = [caller.outcome for caller in callers]
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], SessionNotFound)
    assert str(outcomes[1]) == "session 'ghost' does not exist"
    assert bodies(store) == [SessionFaultFactory(message="a"), SessionFaultFactory(message="a")]


def swallow_then_commit(uow: UnitOfWork) -> str:
    """A function that writes (a statement of its own, not a buffered event), catches its own
    database error and commits anyway."""
    uow.sessions.upsert(SessionFactory(id="swallowed"))
    with contextlib.suppress(sa.exc.SQLAlchemyError):
        uow.connection.exec_driver_sql("SELECT * FROM no_such_table")
    uow.commit()
    return "swallowed"


def check_swallowed(store: Store, outcome: Any) -> None:
    """On PostgreSQL the caught error aborted the function's work: it fails, and nothing of it
    commits; SQLite aborts nothing, so the function's work commits."""
    written = store.sessions.get("swallowed") is not None
    if store._database.writer.dialect.name == "postgresql":
        assert isinstance(outcome, StorageError)
        assert "current transaction is aborted" in str(outcome)
        assert not written
    else:
        assert outcome == "swallowed"
        assert written


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_function_that_swallows_its_database_error_fails_alone(
    store: Store, position: int
) -> None:
    # The first call of a batch runs without a savepoint (undoing it undoes the transaction):
    # each position is its own case.
    store.sessions.save(SessionFactory(id="a"))
    calls: list[Callable[[], Any]] = [
        lambda: store.faults.record_startup_fault("a", "before"),
        lambda: store.faults.record_startup_fault("a", "after"),
    ]
    calls.insert(position, lambda: store.run_in_unit_of_work(swallow_then_commit))
    with one_batch(store, calls) as callers:
        outcomes = [caller.outcome for caller in callers]
    assert outcomes[:position] + outcomes[position + 1 :] == [True, True]
    check_swallowed(store, outcomes[position])
    assert bodies(store) == [
        SessionFaultFactory(message="before"),
        SessionFaultFactory(message="after"),
    ]


def test_a_lone_function_that_swallows_its_database_error_is_not_acknowledged(
    store: Store,
) -> None:
    # PostgreSQL answers the COMMIT of an aborted transaction by rolling back, and psycopg
    # does not raise: the caller must not be told that its work committed.
    try:
        outcome: Any = store.run_in_unit_of_work(swallow_then_commit)
    except StorageError as error:
        outcome = error
    check_swallowed(store, outcome)


def test_a_unit_of_work_that_swallows_its_database_error_is_not_acknowledged(
    store: Store,
) -> None:
    try:
        with store.unit_of_work() as uow:
            outcome: Any = swallow_then_commit(uow)
    except StorageError as error:
        outcome = error
    check_swallowed(store, outcome)
    store.sessions.save(SessionFactory(id="a"))  # the write path is sound again
    assert store.sessions.get("a") is not None


def test_system_exit_from_a_function_is_raised_in_its_own_caller_only(store: Store) -> None:
    store.sessions.save(SessionFactory(id="a"))

    def exit_now(uow: UnitOfWork) -> None:
        raise SystemExit(3)

    calls = [
        lambda: store.faults.record_startup_fault("a", "first"),
        lambda: store.run_in_unit_of_work(exit_now),
        lambda: store.faults.record_startup_fault("a", "last"),
    ]
    results: list[Any] = []

    def catching(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            try:
                return call()
            except SystemExit as exited:
                results.append(exited.code)
                return "exited"

        return run

    with one_batch(store, [catching(call) for call in calls]) as callers:
        assert [caller.outcome for caller in callers] == [True, "exited", True]
    assert results == [3]
    assert bodies(store) == [
        SessionFaultFactory(message="first"),
        SessionFaultFactory(message="last"),
    ]


def test_a_failed_batch_leaves_no_lock_behind_for_other_writers(migrated_url: str) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a"))
        calls = [
            lambda: store.faults.record_startup_fault("a", "lost"),
            lambda: store.run_in_unit_of_work(fail_at_commit),
        ]
        with one_batch(store, calls) as callers:
            kept = [caller.outcome for caller in callers]  # the errors stay referenced
        assert [type(outcome) for outcome in kept] == [StorageError, StorageError]
        from session_journal import StoreOptions

        with Store.open(migrated_url, options=StoreOptions(busy_timeout_s=2)) as other:
            assert other.faults.record_startup_fault("a", "another writer")
        assert store.faults.record_startup_fault("a", "same store")
        assert bodies(store) == [
            SessionFaultFactory(message="another writer"),
            SessionFaultFactory(message="same store"),
        ]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_refused_first_call_keeps_the_sqlite_write_lock_for_the_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: undoing a batch's first call must not roll the transaction back, which would free
    # the write lock in the middle of the batch for another process to take (and hold past the
    # busy timeout, failing every call of the batch). Another connection tries to take the lock
    # whenever the write path rolls back while it runs a call's undo.
    store.sessions.save(SessionFactory(id="a"))
    database = store.url.removeprefix("sqlite:///")
    taken: list[str] = []
    real_rollback = write_path_module.driver.rollback

    def rollback_then_compete(connection: sa.Connection) -> None:
        real_rollback(connection)
        if store._database.write_path.writing_in_this_thread():  # in a batch, not between
            competitor = sqlite3.connect(database, timeout=0, isolation_level=None)
            try:
                competitor.execute("BEGIN IMMEDIATE")
                taken.append("the write lock was free mid-batch")
                competitor.execute("ROLLBACK")
            except sqlite3.OperationalError:
                pass
            finally:
                competitor.close()

    monkeypatch.setattr(write_path_module.driver, "rollback", rollback_then_compete)

    def refused(uow: UnitOfWork) -> None:
        uow.events.append("ghost", 1, SessionFaultFactory(message="x").model_dump_json())

    calls = [
        lambda: store.run_in_unit_of_work(refused),
        lambda: store.faults.record_startup_fault("a", "second"),
    ]
    with one_batch(store, calls) as callers:
        outcomes = [caller.outcome for caller in callers]
    assert isinstance(outcomes[0], SessionNotFound) and outcomes[1] is True
    assert taken == []
    assert bodies(store) == [SessionFaultFactory(message="second")]
