"""The connection options of `StoreOptions`: `reader_pool_size` (both backends), and on
PostgreSQL `connect_timeout_s` and `statement_timeout_s`, which reach the store's reader and
writer connections only: never the migrations' connections nor the `LISTEN` connection."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

import session_journal.migrations
import session_journal.storage.database
import session_journal.storage.engines
from session_journal import StorageError, Store, StoreOptions, TransientStorageError
from session_journal.follow.wakeups import PostgresListener
from session_journal.storage.unit_of_work import UnitOfWork
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import bodies

LONG_S = 60.0
TIMEOUTS = StoreOptions(connect_timeout_s=5, statement_timeout_s=1.5)


def show(connection: sa.Connection, setting: str = "statement_timeout") -> str:
    return str(connection.exec_driver_sql(f"SHOW {setting}").scalar_one())


def libpq_connect_timeout(connection: sa.Connection) -> str | None:
    """The `connect_timeout` the connection was made with (psycopg lists the parameters that
    differ from libpq's defaults)."""
    driver = connection.connection.driver_connection
    assert driver is not None
    parameters: dict[str, str] = driver.info.get_parameters()
    return parameters.get("connect_timeout")


def select_one(connection: sa.Connection) -> int:
    return int(connection.exec_driver_sql("SELECT 1").scalar_one())


def test_the_reader_pool_keeps_reader_pool_size_connections(migrated_url: str) -> None:
    with Store.open(migrated_url, options=StoreOptions(reader_pool_size=2)) as store:
        reader = store._database.reader
        assert reader.pool.size() == 2  # type: ignore[attr-defined]
        with ExitStack() as held:  # four readers at once: two pooled, two overflow
            connections = [held.enter_context(reader.connect()) for _ in range(4)]
            assert [select_one(connection) for connection in connections] == [1, 1, 1, 1]
        assert reader.pool.checkedin() == 2  # type: ignore[attr-defined]
        assert store.events.latest_seq() == 0  # the store reads through it


def test_the_default_reader_pool_is_sqlalchemys_five(migrated_url: str) -> None:
    with Store.open(migrated_url, options=StoreOptions()) as store:
        assert store._database.reader.pool.size() == 5  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_reader_and_writer_connections_have_the_timeouts_and_keep_the_urls_options(
    store: Store,
) -> None:
    schema = sa.make_url(store.url).query["options"].removeprefix("-csearch_path=")
    with Store.open(store.url, options=TIMEOUTS) as timed:
        with timed._database.reader.connect() as reader:
            assert (show(reader), show(reader, "search_path")) == ("1500ms", schema)
            assert libpq_connect_timeout(reader) == "5"

        def settings(uow: UnitOfWork) -> tuple[str, str, str | None]:
            connection = uow.connection
            return (
                show(connection),
                show(connection, "search_path"),
                libpq_connect_timeout(uow.connection),
            )

        assert timed.run_in_unit_of_work(settings) == ("1500ms", schema, "5")
    with store._database.reader.connect() as untimed:  # the default: the server's
        assert (show(untimed), libpq_connect_timeout(untimed)) == ("0", None)


def sleep_then_fault(uow: UnitOfWork) -> None:
    uow.connection.exec_driver_sql("SELECT pg_sleep(2)")
    uow.faults.record_startup_fault("a", "never")
    uow.commit()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_statement_past_the_statement_timeout_fails_clearly_and_commits_nothing(
    migrated_url: str,
) -> None:
    with Store.open(migrated_url, options=StoreOptions(statement_timeout_s=0.2)) as store:
        store.sessions.save(SessionFactory(id="a"))
        expired = (
            r"the statement timeout expired \(StoreOptions\.statement_timeout_s\) "
            r"\(canceling statement due to statement timeout\)$"
        )
        with pytest.raises(TransientStorageError, match=r"^sleep_then_fault failed: " + expired):
            store.run_in_unit_of_work(sleep_then_fault)
        with (
            pytest.raises(TransientStorageError, match=r"^slow read failed: " + expired),
            store._database.reading("slow read") as read,
        ):
            read.connection.exec_driver_sql("SELECT pg_sleep(2)")
        # Nothing of the call was committed; the write path and the readers work on.
        assert store.faults.record_startup_fault("a", "after")
        assert bodies(store) == [SessionFaultFactory(message="after")]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_migrations_never_get_the_stores_connection_options(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every engine made while a store opens and upgrades an empty database, by role, with
    # what its connections get. The environment asks for the options too: Alembic's env.py
    # builds its options from it. No "inspector": the store reads the revision on its reader
    # and hands it to the upgrade (`migrations.upgrade_from`), which makes no engine to read it.
    seen: dict[str, set[tuple[str, str | None, int]]] = {}
    real = session_journal.storage.engines.create_engine

    def spy(url: str, options: StoreOptions, *, role: str) -> Engine:
        engine = real(url, options, role=role)
        with engine.connect() as connection:
            pool_size = getattr(engine.pool, "size", lambda: 0)()
            seen.setdefault(role, set()).add(
                (show(connection), libpq_connect_timeout(connection), pool_size)
            )
        return engine

    monkeypatch.setattr(
        session_journal.storage.engines, "create_engine", spy
    )  # env.py imports it here
    monkeypatch.setattr(session_journal.migrations, "create_engine", spy)
    monkeypatch.setattr(session_journal.storage.database, "create_engine", spy)
    monkeypatch.setenv("SESSION_JOURNAL_STATEMENT_TIMEOUT_S", "1.5")
    monkeypatch.setenv("SESSION_JOURNAL_CONNECT_TIMEOUT_S", "5")
    monkeypatch.setenv("SESSION_JOURNAL_READER_POOL_SIZE", "3")
    options = StoreOptions(connect_timeout_s=5, statement_timeout_s=1.5, reader_pool_size=3)
    with Store.open(url, upgrade=True, options=options) as store:
        assert store.schema.usable
    assert seen == {
        "migrator": {("0", None, 5)},
        "writer": {("1500ms", "5", 2)},
        "reader": {("1500ms", "5", 3)},
    }


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_the_listen_connection_has_no_statement_timeout(migrated_url: str) -> None:
    options = StoreOptions(statement_timeout_s=0.2, connect_timeout_s=5)
    with Store.open(migrated_url, options=options) as store:
        store.sessions.save(SessionFactory(id="a"))
        handed: list[tuple[str, str, str | None]] = []
        dedicated: Callable[[], Any] = store._database.dedicated_connection

        def recorded() -> Any:
            connection = dedicated()
            row = connection.execute("SHOW statement_timeout").fetchone()
            status = connection.info.transaction_status.name
            handed.append((row[0], status, connection.info.get_parameters().get("connect_timeout")))
            return connection

        store._database.dedicated_connection = recorded  # type: ignore[method-assign]
        store.events.wait(timeout=0)  # starts the listener
        listener = store.following.source
        assert isinstance(listener, PostgresListener)
        assert listener.listening.wait(LONG_S)
        # Autocommit and no statement timeout; each connection attempt (its reconnections
        # too) is bounded by the connect timeout.
        assert handed == [("0", "IDLE", "5")]
        time.sleep(0.5)  # idle past the readers' statement timeout: still listening
        with Store.open(migrated_url) as other:
            other.faults.record_startup_fault("a", "woken")
        page = store.events.wait(after_seq=0, timeout=LONG_S)
        assert [event.event for event in page.events] == [SessionFaultFactory(message="woken")]
        assert (listener.connections, listener.listening.is_set()) == (1, True)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A PostgreSQL URL of a port that accepts TCP connections and never answers (the kernel
    queues them; nothing reads): a connection attempt waits until its timeout."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        port = listening.getsockname()[1]
        yield f"postgresql+psycopg://nobody@127.0.0.1:{port}/nothing"


def test_a_connect_past_the_connect_timeout_fails_clearly(silent_server: str) -> None:
    started = time.monotonic()
    with pytest.raises(TransientStorageError) as raised:
        Store.open(silent_server, options=StoreOptions(connect_timeout_s=2))
    assert 2 <= time.monotonic() - started < 10
    assert str(raised.value) == (
        "read the schema revision failed: the connect timeout expired "
        "(StoreOptions.connect_timeout_s) (connection timeout expired)"
    )
    assert isinstance(raised.value, StorageError)


def hold_a_write_lock(url: str, seconds: float) -> threading.Timer:
    """Switch the file out of WAL mode (as a database another tool made), then hold a write
    transaction on it for `seconds` from a plain sqlite3 connection, as a host application's
    own Alembic would; the returned timer commits it."""
    path = sa.make_url(url).database
    assert path is not None
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    assert other.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE event_sequences SET last_seq = last_seq WHERE name = 'api_events'")

    def commit() -> None:
        other.execute("COMMIT")
        other.close()

    timer = threading.Timer(seconds, commit)
    timer.start()
    return timer


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_store_waits_for_a_writer_of_a_file_not_yet_in_wal_mode(migrated_url: str) -> None:
    timer = hold_a_write_lock(migrated_url, 0.5)
    try:
        with Store.open(migrated_url) as store:  # the WAL switch waits for the writer's commit
            assert store.events.latest_seq() == 0
    finally:
        timer.join()
    path = sa.make_url(migrated_url).database
    assert path is not None
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_store_gives_up_on_the_wal_switch_after_its_busy_timeout(migrated_url: str) -> None:
    timer = hold_a_write_lock(migrated_url, 3.0)
    try:
        started = time.monotonic()
        with (
            pytest.raises(TransientStorageError, match="database is locked"),
            Store.open(migrated_url, options=StoreOptions(busy_timeout_s=0.2)) as store,
        ):
            store.events.latest_seq()
        assert time.monotonic() - started < 2.5
    finally:
        timer.join()
