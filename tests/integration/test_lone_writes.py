"""Lone writes (`storage/lone.py`): a caller alone on the write path runs its append by itself on
the short path; with others writing, it joins their batch. Either way the same rows, seqs,
wake-ups and errors."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEvent,
    AsyncStore,
    InvalidRecord,
    SessionState,
    StorageError,
    Store,
    StoreClosed,
    WriteInsideUnitOfWork,
)
from session_journal._validation import encode_json
from session_journal.storage.driver import Prepared
from session_journal.storage.lone import AppendIfSessionExists
from session_journal.storage.loop_writes import LoopWrites
from session_journal.storage.repositories import events as events_repository
from session_journal.storage.write_path import WritePath
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import bodies

ROW = sa.text(
    "SELECT seq, session_id, recorded_at_ms, body, body_canonical FROM api_events ORDER BY seq"
)


def rows(store: Store) -> list[tuple[Any, ...]]:
    with store._database.reader.connect() as connection:
        return [tuple(row) for row in connection.execute(ROW)]


def write_path(store: Store) -> WritePath:
    return store._database.write_path


def fault_append(session_id: str, message: str, at: int = 1_765_000_000_000) -> Any:
    body = encode_json(SessionFaultFactory(message=message), "fault", 1 << 20)
    return AppendIfSessionExists(session_id, at, body)


# PostgreSQL's row locks and round trips (SQLite writers never overlap: one write lock).
POSTGRESQL_ONLY = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


def test_a_lone_append_runs_by_itself_and_writes_what_a_batch_writes(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    path, signal = write_path(store), store.following.signal
    alone, batches, generation = path.alone, path.batches, signal.generation

    assert path.submit_lone(fault_append("s", "boom"), "lone") is True  # the short path
    assert (path.alone, path.batches, signal.generation) == (alone + 1, batches + 1, generation + 1)
    assert path.submit(fault_append("s", "boom").run, "batch") is True  # the batch path
    assert (path.alone, path.batches, signal.generation) == (alone + 1, batches + 2, generation + 2)

    short, batched = rows(store)
    assert short[0] + 1 == batched[0]  # consecutive seqs
    assert short[1:] == batched[1:] == ("s", 1_765_000_000_000, short[3], True)
    assert bodies(store) == [SessionFaultFactory(message="boom")] * 2


def test_a_missing_session_writes_nothing_and_takes_no_seq_either_way(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    path = write_path(store)
    assert path.submit_lone(fault_append("nope", "x"), "lone") is False
    assert path.submit(fault_append("nope", "x").run, "batch") is False
    assert store.faults.record_startup_fault("nope", "x") is False
    assert store.faults.record_startup_fault("s", "after") is True
    assert [row[0] for row in rows(store)] == [1]  # the first seq: none was used up
    assert path.alone >= 2


def test_a_lone_append_waits_for_a_write_in_progress_and_joins_the_next_batch(
    store: Store,
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    path = write_path(store)
    results: list[bool] = []
    with store.unit_of_work() as uow:  # holds the write path
        alone = path.alone
        caller = threading.Thread(
            target=lambda: results.append(store.faults.record_startup_fault("s", "queued"))
        )
        caller.start()
        deadline = time.monotonic() + 10
        while path.queued() == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert path.queued() == 1  # not run beside the block: queued behind it
        uow.events.append(
            "s", 1, encode_json(SessionFaultFactory(message="block"), "fault", 1 << 20)
        )
        uow.commit()
    caller.join(10)
    assert results == [True]
    assert path.alone == alone  # ran in a batch
    assert bodies(store) == [
        SessionFaultFactory(message="block"),
        SessionFaultFactory(message="queued"),
    ]


def test_a_lone_append_inside_a_unit_of_work_commits_and_rolls_back_with_it(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.unit_of_work() as uow:
        assert store.faults.record_startup_fault("s", "undone", uow=uow) is True
        # no commit: rolled back
    with store.unit_of_work() as uow:
        assert store.faults.record_startup_fault("s", "kept", uow=uow) is True
        with pytest.raises(WriteInsideUnitOfWork):
            store.faults.record_startup_fault("s", "without uow=")
        uow.commit()
    assert bodies(store) == [SessionFaultFactory(message="kept")]


def test_a_closed_store_refuses_a_lone_append(migrated_url: str) -> None:
    store = Store.open(migrated_url)
    store.sessions.save(SessionFactory(id="s"))
    store.close()
    with pytest.raises(StoreClosed):
        store.faults.record_startup_fault("s", "late")
    with pytest.raises(StoreClosed):
        write_path(store).submit_lone(fault_append("s", "late"), "lone")


def test_a_failed_lone_append_discards_its_connection_and_the_next_one_writes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    path = write_path(store)

    def broken(self: AppendIfSessionExists, statements: Any, dbapi: Any) -> bool:
        statements.session_exists_or_call(dbapi)  # no such attribute: fails midway
        return True

    monkeypatch.setattr(AppendIfSessionExists, "run_alone", broken)
    with pytest.raises(AttributeError):
        store.faults.record_startup_fault("s", "lost")
    monkeypatch.undo()
    assert store.faults.record_startup_fault("s", "written") is True
    assert bodies(store) == [SessionFaultFactory(message="written")]
    assert path.queued() == 0


def test_lone_appends_of_many_threads_share_batches_and_keep_every_seq(store: Store) -> None:
    names = [f"s{n}" for n in range(8)]
    for name in names:
        store.sessions.save(SessionFactory(id=name))
    path = write_path(store)
    batches = path.batches
    start = threading.Barrier(len(names))

    def append(name: str) -> None:
        start.wait()
        for n in range(25):
            assert store.faults.record_startup_fault(name, str(n))

    threads = [threading.Thread(target=append, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    logged = store.events.load(after_seq=0, limit=1000).events
    assert [event.seq for event in logged] == list(range(1, 201))
    for name in names:  # each thread's appends in its own order
        assert [e.event for e in logged if e.session_id == name] == [
            SessionFaultFactory(message=str(n)) for n in range(25)
        ]
    assert path.batches - batches <= 200


def test_another_store_is_woken_by_a_lone_append(migrated_url: str) -> None:
    with Store.open(migrated_url) as writer, Store.open(migrated_url) as follower:
        writer.sessions.save(SessionFactory(id="s"))
        signal = follower.following.watched_signal()  # PostgreSQL LISTEN / SQLite data_version
        for path in ("lone", "batch"):
            generation = signal.generation
            woken = threading.Event()

            def wait(seen: int = generation, done: threading.Event = woken) -> None:
                if signal.wait_past(seen, 10):
                    done.set()

            waiter = threading.Thread(target=wait)
            waiter.start()
            append = fault_append("s", path)
            if path == "lone":
                write_path(writer).submit_lone(append, path)
            else:
                write_path(writer).submit(append.run, path)
            waiter.join(10)
            assert woken.is_set(), path


# PostgreSQL: one round trip, the same lock order.


@contextmanager
def raw(url: str) -> Iterator[psycopg.Connection[Any]]:
    parsed = sa.make_url(url).set(drivername="postgresql")
    with closing(psycopg.connect(parsed.render_as_string(hide_password=False))) as connection:
        yield connection


@POSTGRESQL_ONLY
def test_a_lone_append_is_one_round_trip(migrated_url: str, tmp_path: Any) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="s"))
        assert store.faults.record_startup_fault("s", "warm")
        kept = write_path(store)._connection
        assert kept is not None
        dbapi = kept.connection.dbapi_connection
        assert dbapi is not None
        with open(tmp_path / "trace", "w+") as trace:  # libpq's trace of the protocol
            dbapi.pgconn.trace(trace.fileno())
            dbapi.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                assert store.faults.record_startup_fault("s", "one trip")
            finally:
                dbapi.pgconn.untrace()
            trace.seek(0)
            sent = [line.split("\t") for line in trace.read().splitlines()]
        trips = [fields for fields in sent if fields[0] == "F" and fields[2] in ("Sync", "Query")]
        assert len(trips) == 1  # one statement, no BEGIN nor COMMIT: autocommit
        assert any("session_journal_append_event" in "".join(fields) for fields in sent)
        assert dbapi.autocommit is True  # left so for the next lone write
        store.sessions.save(SessionFactory(id="t"))  # a batch: a transaction again
        assert dbapi.autocommit is False
        with store.unit_of_work() as uow:  # rolled back: nothing of it stays
            uow.sessions.delete("t")
        assert store.sessions.get("t") is not None
        assert bodies(store)[-1] == SessionFaultFactory(message="one trip")


@POSTGRESQL_ONLY
def test_a_session_locked_by_another_writer_holds_up_only_its_own_appends(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url) as store, raw(migrated_url) as holder:
        store.sessions.save(SessionFactory(id="S"))
        store.sessions.save(SessionFactory(id="T"))
        assert store.faults.record_startup_fault("T", "warm")
        holder.execute("SELECT 1 FROM sessions WHERE session_id = 'S' FOR UPDATE")
        started = time.monotonic()
        assert store.faults.record_startup_fault("T", "not held up")
        assert time.monotonic() - started < 0.1
        blocked: list[bool] = []
        waiter = threading.Thread(
            target=lambda: blocked.append(store.faults.record_startup_fault("S", "waited"))
        )
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()  # waits for the session's lock, as a batch would
        holder.rollback()
        waiter.join(10)
        assert blocked == [True]


@POSTGRESQL_ONLY
def test_a_deadlock_victim_on_the_short_path_runs_again(migrated_url: str) -> None:
    with Store.open(migrated_url) as store, raw(migrated_url) as other:
        store.sessions.save(SessionFactory(id="S"))
        assert store.faults.record_startup_fault("S", "warm")
        path = write_path(store)
        retried = path.retried
        # The other transaction holds the seq row, then asks for the session the lone append
        # holds (FOR KEY SHARE) while it waits for the seq row: a deadlock. The other side
        # waits longer before it checks, so the lone append is the victim.
        other.execute("SET deadlock_timeout = '5s'")
        other.execute("UPDATE event_sequences SET last_seq = last_seq WHERE name = 'api_events'")
        results: list[bool] = []
        caller = threading.Thread(
            target=lambda: results.append(store.faults.record_startup_fault("S", "victim"))
        )
        caller.start()
        deadline = time.monotonic() + 10
        with raw(migrated_url) as watcher:
            while time.monotonic() < deadline:  # until the lone append waits for the seq row
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE '%session_journal_append_event%'"
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.01)
        other.execute("SELECT 1 FROM sessions WHERE session_id = 'S' FOR UPDATE")
        other.commit()
        caller.join(30)
        assert results == [True]
        assert path.retried == retried + 1
        assert bodies(store)[-1] == SessionFaultFactory(message="victim")


def test_lone_appends_racing_a_delete_are_written_or_refused_and_leave_no_hole(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url) as appender, Store.open(migrated_url) as deleter:
        appender.sessions.save(SessionFactory(id="T"))
        appended, appended_to_t = 0, 0
        for round_ in range(20):
            appender.sessions.save(SessionFactory(id="S"))
            stop = threading.Event()

            def delete_soon(stop: threading.Event = stop) -> None:
                time.sleep(0.002)
                deleter.sessions.delete("S")
                stop.set()

            thread = threading.Thread(target=delete_soon)
            thread.start()
            while not stop.is_set():
                appended += appender.faults.record_startup_fault("S", str(round_))
                added = appender.faults.record_startup_fault("T", str(round_))
                appended, appended_to_t = appended + added, appended_to_t + added
            thread.join()
            assert appender.faults.record_startup_fault("S", "gone") is False
        # Every seq taken is an event that was appended (True); those of S went with S.
        assert appender.events.latest_seq() == appended
        assert [row[1] for row in rows(appender)] == ["T"] * appended_to_t


def lone_append(store: Store, round_: int) -> list[Callable[[], object]]:
    return [lambda: store.faults.record_startup_fault("S", "lone")]


def lifecycle(store: Store, round_: int) -> list[Callable[[], object]]:
    """A checkpoint begun and failed, and a lifecycle save: each locks S first."""
    command = f"op-{round_}"
    return [
        lambda: store.checkpoints.begin(
            SessionFactory(id="S", state=SessionState.CHECKPOINTING), command
        ),
        lambda: store.checkpoints.finish_failed(
            SessionFactory(id="S", state=SessionState.RUNNING),
            command,
            deferred=False,
            message="no space",
        ),
        lambda: store.sessions.save_lifecycle(
            SessionFactory(id="S", state=SessionState.RUNNING, last_error=f"e{round_}")
        ),
    ]


RACERS = {"lone": lone_append, "lifecycle": lifecycle}


def race(url: str, kind: str, seconds: float, out: Any) -> None:
    """A process making the calls of `kind` in rounds for `seconds`: its slowest call, its
    errors and its rounds."""
    slowest, errors, rounds = 0.0, [], 0
    with Store.open(url) as store:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for call in RACERS[kind](store, rounds):
                started = time.monotonic()
                try:
                    call()
                except StorageError as error:
                    errors.append(repr(error))
                slowest = max(slowest, time.monotonic() - started)
            rounds += 1
    out.put((kind, slowest, errors, rounds))


@POSTGRESQL_ONLY
def test_lone_appends_racing_lifecycle_writers_of_another_process_never_deadlock(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="S", state=SessionState.RUNNING))
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = [
        context.Process(target=race, args=(migrated_url, kind, 3.0, out)) for kind in RACERS
    ]
    for process in processes:
        process.start()
    reports = [out.get(timeout=120) for _ in processes]
    results = {kind: (slowest, errors, count) for kind, slowest, errors, count in reports}
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    for kind, (slowest, errors, count) in results.items():
        assert errors == [], kind
        assert count > 10, kind
        # Each waits for the other's lock on S at most one short transaction at a time.
        assert slowest < 0.2, (kind, slowest)


def test_an_interrupt_on_the_short_path_hands_the_write_path_over(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionFactory(id="s"))

    def interrupted(self: WritePath, write: Any, action: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(WritePath, "_run_alone", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.faults.record_startup_fault("s", "interrupted")
    monkeypatch.undo()
    path = write_path(store)
    assert (path._leading, path._running_thread) == (False, None)
    store.sessions.save(SessionFactory(id="t"))  # a batch: the write path is free
    assert store.faults.record_startup_fault("s", "after") is True
    assert bodies(store) == [SessionFaultFactory(message="after")]


@POSTGRESQL_ONLY
def test_lone_appends_run_in_read_committed_whatever_the_servers_default(
    migrated_url: str,
) -> None:
    # A stricter default (of the server, the database, the role or, here, the URL) would make
    # concurrent lone appends fail to serialize on the seq row.
    url = sa.make_url(migrated_url)
    given = url.query.get("options", "")
    strict = url.update_query_dict(
        {"options": f"{given} -c default_transaction_isolation=serializable".strip()}
    ).render_as_string(hide_password=False)
    stores = [Store.open(strict) for _ in range(3)]
    try:
        stores[0].sessions.save(SessionFactory(id="s"))
        errors: list[BaseException] = []
        start = threading.Barrier(len(stores))

        def append(store: Store) -> None:
            start.wait()
            for n in range(60):
                try:
                    store.faults.record_startup_fault("s", str(n))
                except StorageError as error:
                    errors.append(error)

        threads = [threading.Thread(target=append, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert stores[0].events.latest_seq() == 180
        assert sum(write_path(store).retried for store in stores) == 0
        with stores[0]._database.writer.connect() as connection:
            shown = connection.execute(sa.text("SHOW default_transaction_isolation")).scalar()
        assert shown == "read committed"
    finally:
        for store in stores:
            store.close()


def test_a_lone_append_that_cannot_connect_is_a_storage_error(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    path, writer = write_path(store), store._database.writer
    kept = path._connection
    assert kept is not None
    path._connection = None  # no connection kept: the next write connects
    path._forget_lone_cursor()
    kept.invalidate()
    kept.close()
    writer.dispose()  # and none pooled
    refused = (
        sqlite3.OperationalError if writer.dialect.name == "sqlite" else psycopg.OperationalError
    )

    def refuse(*_: Any) -> None:
        raise refused("the server is not accepting connections")

    sa.event.listen(writer, "do_connect", refuse)
    try:
        with pytest.raises(StorageError, match="record startup fault of 's' failed: the server"):
            store.faults.record_startup_fault("s", "no connection")
    finally:
        sa.event.remove(writer, "do_connect", refuse)
    assert store.faults.record_startup_fault("s", "connected") is True
    assert bodies(store) == [SessionFaultFactory(message="connected")]


def test_a_cancelled_async_lone_append_on_the_short_path_may_still_commit(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a cancelled call already in a batch (test_async_api): once it runs, it is not withdrawn.
    # (On PostgreSQL an async lone append alone runs on the event loop, test_loop_writes: here
    # it is sent to a worker, as one made while the process writes is, to reach the short path.)
    monkeypatch.setattr(LoopWrites, "start", lambda self, write, action: None)
    running, finish = threading.Event(), threading.Event()
    original = AppendIfSessionExists.run_alone

    def slow(self: AppendIfSessionExists, statements: Any, cursor: Any) -> bool:
        running.set()
        finish.wait(10)
        return original(self, statements, cursor)

    async def scenario() -> list[ApiEvent]:
        async with await AsyncStore.open(migrated_url) as store:
            await store.sessions.save(SessionFactory(id="s"))
            monkeypatch.setattr(AppendIfSessionExists, "run_alone", slow)
            task = asyncio.create_task(store.faults.record_startup_fault("s", "kept"))
            await asyncio.to_thread(running.wait, 10)
            task.cancel()
            finish.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with asyncio.timeout(10):  # the write goes on without its caller
                while not (page := await store.events.load(after_seq=0)).events:
                    await asyncio.sleep(0.01)
            return list(page.events)

    logged = asyncio.run(scenario())
    assert [event.event for event in logged] == [SessionFaultFactory(message="kept")]


def test_a_lone_statement_takes_its_arguments_in_the_order_of_its_parameters(
    store: Store,
) -> None:
    """`driver.Prepared` passes the arguments as they are: a statement whose parameters are not
    exactly the arguments, in order (one missing, one more, another order), is refused when it
    is made, never sent with a value in the wrong place or a NULL."""
    dialect = store._database.write_path._engine.dialect
    statement = sa.select(sa.bindparam("a", type_=sa.Text), sa.bindparam("b", type_=sa.Integer))
    prepared = Prepared(dialect, statement, ("a", "b"))
    with store._database.write_path._engine.connect() as connection:
        cursor = connection.connection.dbapi_connection.cursor()
        assert tuple(cursor.execute(prepared.sql, ("x", 2)).fetchone()) == ("x", 2)
    for order in [("b", "a"), ("a",), ("a", "b", "c")]:
        with pytest.raises(ValueError, match=r"the parameters of .* are \('a', 'b'\), not"):
            Prepared(dialect, statement, order)
    with pytest.raises(ValueError, match="not"):  # a constant bound is a parameter too
        Prepared(dialect, sa.select(sa.literal(1), sa.bindparam("a", type_=sa.Text)), ("a",))


def run_queued_behind_a_block(store: Store, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls`, each in a thread of its own, queued in this order while a unit-of-work
    block holds the write path: one batch takes them all once the block ends. Each call's
    result, or the exception it raised."""
    path = write_path(store)
    outcomes: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except BaseException as error:  # the test reads it (an interrupt given to this call too)
            outcomes[index] = error

    threads = []
    with store.unit_of_work():  # holds the write path; ends without a commit
        for index in range(len(calls)):
            threads.append(threading.Thread(target=run, args=(index,)))
            threads[-1].start()
            deadline = time.monotonic() + 10
            while path.queued() <= index and time.monotonic() < deadline:
                time.sleep(0.001)
            assert path.queued() == index + 1
    for thread in threads:
        thread.join(10)
    return outcomes


def test_lone_appends_queued_together_run_at_once_in_their_batch(store: Store) -> None:
    """The batch checks the sessions of its lone appends with one statement, at the place of
    the first; the other calls run in their turn. Same results and rows as one by one."""
    store.sessions.save(SessionFactory(id="s1"))
    store.sessions.save(SessionFactory(id="s2"))
    path = write_path(store)
    together, batches = path.together, path.batches
    fault = store.faults.record_startup_fault
    outcomes = run_queued_behind_a_block(
        store,
        [
            lambda: fault("s1", "a"),
            lambda: fault("nope", "b"),
            lambda: store.sessions.save(SessionFactory(id="s3")),
            lambda: fault("s2", "c"),
            lambda: fault("s1", "d"),
        ],
    )
    assert outcomes == [True, False, None, True, True]
    assert path.together - together == 4
    assert path.batches - batches == 2  # the block's transaction, then one batch of the five
    assert [(row[0], row[1]) for row in rows(store)] == [(1, "s1"), (2, "s2"), (3, "s1")]
    assert bodies(store) == [SessionFaultFactory(message=m) for m in ("a", "c", "d")]
    assert store.sessions.get("s3") is not None


def test_when_lone_appends_fail_together_each_runs_by_itself_and_gets_its_own_outcome(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group that fails is undone and run call by call: a bad call gets its error alone."""
    store.sessions.save(SessionFactory(id="s1"))
    path = write_path(store)
    failed, together = path.together_failed, path.together
    fault = store.faults.record_startup_fault
    not_json = AppendIfSessionExists("s1", 1, "not json")  # a body no service would give
    outcomes = run_queued_behind_a_block(
        store,
        [
            lambda: fault("s1", "a"),
            lambda: path.submit_lone(not_json, "append a bad body"),
            lambda: fault("s1", "c"),
        ],
    )
    assert outcomes[0] is True and outcomes[2] is True
    assert isinstance(outcomes[1], InvalidRecord)
    assert (path.together_failed - failed, path.together) == (1, together)
    assert bodies(store) == [SessionFaultFactory(message=m) for m in ("a", "c")]

    def broken(self: AppendIfSessionExists, writes: Any, uow: Any) -> Any:
        raise RuntimeError("the group statement failed")

    monkeypatch.setattr(AppendIfSessionExists, "run_together", broken)
    outcomes = run_queued_behind_a_block(
        store, [lambda: fault("s1", "e"), lambda: fault("nope", "f"), lambda: fault("s1", "g")]
    )
    assert outcomes == [True, False, True]
    assert path.together_failed - failed == 2
    assert bodies(store)[2:] == [SessionFaultFactory(message=m) for m in ("e", "g")]
    assert [row[0] for row in rows(store)] == [1, 2, 3, 4]


def test_an_interrupt_while_lone_appends_run_together_is_the_first_ones_and_the_batch_goes_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for a call that runs alone: the interrupt is raised in the caller of the call that was
    running (the group's first), whose work is undone; every other call of the batch commits."""
    store.sessions.save(SessionFactory(id="s1"))
    real = AppendIfSessionExists.run_together

    def interrupted(self: AppendIfSessionExists, writes: Any, uow: Any) -> Any:
        real(self, writes, uow)
        raise KeyboardInterrupt

    monkeypatch.setattr(AppendIfSessionExists, "run_together", interrupted)
    fault = store.faults.record_startup_fault
    outcomes = run_queued_behind_a_block(
        store,
        [
            lambda: store.sessions.save(SessionFactory(id="x")),
            lambda: fault("s1", "a"),
            lambda: store.sessions.save(SessionFactory(id="y")),
            lambda: fault("s1", "b"),
        ],
    )
    assert outcomes[0] is None and outcomes[2] is None and outcomes[3] is True
    assert isinstance(outcomes[1], KeyboardInterrupt)
    assert bodies(store) == [SessionFaultFactory(message="b")]
    assert [row[0] for row in rows(store)] == [1]
    assert store.sessions.get("x") is not None and store.sessions.get("y") is not None


def test_a_batch_s_events_go_in_chunks_of_bounded_size_with_consecutive_seqs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL sends a batch's events in statements of at most `APPEND_MANY_MAX_BYTES` of
    body text (a statement's parameters travel in one message, refused over 1 GB): the seqs
    stay consecutive and in order across them."""
    store.sessions.save(SessionFactory(id="s"))
    texts = [encode_json(SessionFaultFactory(message=str(n) * 200), "f", 1 << 20) for n in range(5)]
    monkeypatch.setattr(events_repository, "APPEND_MANY_MAX_BYTES", len(texts[0]) * 4 * 2)
    sizes: list[int] = []
    real = events_repository._chunks

    def chunks(rows: Any) -> Any:
        made = real(rows)
        sizes.extend(len(chunk) for chunk in made)
        return made

    monkeypatch.setattr(events_repository, "_chunks", chunks)
    with store.unit_of_work() as uow:
        for text in texts:
            uow.events.append_encoded("s", 1, text)
        uow.commit()
    postgresql = store._database.write_path._engine.dialect.name == "postgresql"
    assert sizes == ([2, 2, 1] if postgresql else [])
    assert [row[0] for row in rows(store)] == [1, 2, 3, 4, 5]
    assert bodies(store) == [SessionFaultFactory(message=str(n) * 200) for n in range(5)]
