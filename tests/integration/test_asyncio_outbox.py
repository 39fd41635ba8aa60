"""The transactional outbox of an asyncio application: `store.bind(sync_session)` inside
`await async_session.run_sync(...)` on PostgreSQL (psycopg's `AsyncConnection`, driven through
SQLAlchemy's adapter), and the refusal, before anything is written, of a connection whose
driver connection the store cannot drive."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from session_journal import (
    InvalidRecord,
    OutcomeReason,
    SessionFault,
    SessionNotFound,
    SessionState,
    Store,
    UnitOfWork,
    UnitOfWorkEnded,
)
from tests.factories import SessionFactory

ORDERS = sa.Table(
    "asyncio_orders",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
)


def fault(message: str) -> str:
    return SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=message).model_dump_json()


def feed(store: Store) -> list[tuple[int, str, str]]:
    return [
        (event.seq, event.session_id, event.event.type)
        for event in store.events.load(after_seq=0, limit=100).events
    ]


def orders(store: Store) -> list[str]:
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            return list(connection.scalars(sa.select(ORDERS.c.order_id).order_by("order_id")))
    finally:
        engine.dispose()


POSTGRESQL_ONLY = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
"""psycopg's AsyncConnection is a PostgreSQL driver (SQLite's aiosqlite is another driver than
the store's, refused as such)."""


@pytest.fixture
def pg_store(store: Store) -> Store:
    engine = sa.create_engine(store.url)
    ORDERS.metadata.create_all(engine)
    engine.dispose()
    store.sessions.save(SessionFactory(id="s-1"))
    return store


def in_async_session(store: Store, work: Callable[[AsyncSession], Any]) -> Any:
    """Run `work(session)` (a coroutine function) on an `AsyncSession` of the store's database,
    made as an asyncio application makes one, and dispose of its engine."""

    async def scenario() -> Any:
        engine = create_async_engine(store.url)
        try:
            async with AsyncSession(engine) as session:
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(scenario())


@POSTGRESQL_ONLY
def test_an_asyncio_session_commits_the_events_with_its_rows(pg_store: Store) -> None:
    def outbox(session: Session) -> UnitOfWork:
        uow = pg_store.bind(session)
        session.execute(ORDERS.insert().values(order_id="order-1"))
        pg_store.sessions.save(SessionFactory(id="s-2"), uow=uow)
        uow.events.append("s-1", 1_700_000_000_000, fault("order placed"))
        assert pg_store.faults.record_startup_fault("s-2", "pull failed", uow=uow) is True
        return uow

    async def work(session: AsyncSession) -> None:
        uow = await session.run_sync(outbox)
        assert feed(pg_store) == []  # nothing before the commit
        await session.commit()
        with pytest.raises(UnitOfWorkEnded, match="has ended"):
            uow.events.append("s-1", 1, fault("after the commit"))

    in_async_session(pg_store, work)
    assert orders(pg_store) == ["order-1"]
    assert feed(pg_store) == [(1, "s-1", "session_fault"), (2, "s-2", "session_fault")]
    assert pg_store.sessions.get("s-2") is not None


@POSTGRESQL_ONLY
def test_an_asyncio_session_rolled_back_writes_nothing_and_takes_no_seq(pg_store: Store) -> None:
    def outbox(session: Session) -> None:
        uow = pg_store.bind(session)
        session.execute(ORDERS.insert().values(order_id="order-1"))
        uow.events.append("s-1", 1, fault("never"))
        pg_store.sessions.save(SessionFactory(id="s-2"), uow=uow)

    async def work(session: AsyncSession) -> None:
        await session.run_sync(outbox)
        await session.rollback()

    in_async_session(pg_store, work)
    assert (orders(pg_store), feed(pg_store), pg_store.sessions.get("s-2")) == ([], [], None)
    pg_store.faults.record_startup_fault("s-1", "next")
    assert feed(pg_store) == [(1, "s-1", "session_fault")]


@POSTGRESQL_ONLY
def test_an_asyncio_session_is_refused_an_event_of_an_unknown_session(pg_store: Store) -> None:
    def outbox(session: Session) -> None:
        uow = pg_store.bind(session)
        with pytest.raises(SessionNotFound, match="ghost"):
            uow.events.append("ghost", 1, fault("lost"))
        session.execute(ORDERS.insert().values(order_id="order-1"))

    async def work(session: AsyncSession) -> None:
        await session.run_sync(outbox)
        await session.commit()  # the caller's own work is not affected

    in_async_session(pg_store, work)
    assert (orders(pg_store), feed(pg_store)) == (["order-1"], [])


@POSTGRESQL_ONLY
# SQLAlchemy's own warning: the Session, not inside run_sync, began to connect and could not;
# SQLAlchemy's `await_` closes the coroutine around psycopg's connect, not psycopg's own, which
# warns when that close frees it.
@pytest.mark.filterwarnings(
    r"ignore:coroutine 'AsyncConnection.connect' was never awaited\Z:RuntimeWarning"
    r":sqlalchemy\.util\.concurrency\Z"
)
def test_an_asyncio_binding_used_outside_run_sync_is_refused_and_writes_nothing(
    pg_store: Store,
) -> None:
    async def work(session: AsyncSession) -> None:
        with pytest.raises(InvalidRecord, match=r"run_sync"):
            pg_store.bind(session.sync_session)  # not inside run_sync: no way to drive it
        uow = await session.run_sync(pg_store.bind)
        with pytest.raises(InvalidRecord, match=r"run_sync"):
            uow.events.append("s-1", 1, fault("outside"))
        with pytest.raises(InvalidRecord, match=r"run_sync"):
            pg_store.sessions.save(SessionFactory(id="s-2"), uow=uow)
        await session.run_sync(lambda _: uow.events.append("s-1", 2, fault("inside")))
        await session.commit()

    in_async_session(pg_store, work)
    assert feed(pg_store) == [(1, "s-1", "session_fault")]
    assert pg_store.sessions.get("s-2") is None


@POSTGRESQL_ONLY
def test_an_asyncio_session_removes_the_directories_only_when_it_commits(
    pg_store: Store, tmp_path: Path
) -> None:
    pg_store.sessions.save_lifecycle(SessionFactory(id="s-1", state=SessionState.CLOSED))
    (tmp_path / "s-1").mkdir()

    def remove(session: Session) -> list[str]:
        uow = pg_store.bind(session)
        return pg_store.sessions.remove_ended(["s-1"], sessions_dir=tmp_path, uow=uow)

    async def work(session: AsyncSession) -> None:
        for commit in (False, True):
            assert await session.run_sync(remove) == ["s-1"]
            assert (tmp_path / "s-1").exists()  # not before the commit
            await (session.commit() if commit else session.rollback())
            assert (tmp_path / "s-1").exists() is not commit

    in_async_session(pg_store, work)
    assert pg_store.sessions.get("s-1") is None


class Wrapped:
    """A driver connection behind a wrapper (a tracing proxy, say): SQLAlchemy drives it through
    its attributes, the store cannot."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


@pytest.fixture
def wrapped_engine(store: Store, backend: str) -> Iterator[sa.Engine]:
    url = sa.make_url(store.url)
    if backend == "sqlite":

        def connect() -> Any:
            assert url.database is not None
            connection = sqlite3.connect(url.database, check_same_thread=False)
            connection.execute("PRAGMA foreign_keys=ON")
            return Wrapped(connection)

    else:
        import psycopg

        from tests.backends import pg_conninfo

        made = 0

        def connect() -> Any:  # the dialect reads the server's types on the first connection
            nonlocal made
            made += 1
            connection = psycopg.connect(pg_conninfo(store.url))
            return connection if made == 1 else Wrapped(connection)

    engine = sa.create_engine(url, creator=connect, pool_size=1, max_overflow=1)
    if backend == "postgresql":
        with engine.connect():  # the first connection, unwrapped, initialises the dialect
            pass
        engine.pool.dispose()  # the pool then makes wrapped ones
    yield engine
    engine.dispose()


def test_a_connection_the_store_cannot_drive_is_refused_before_anything_is_written(
    store: Store, wrapped_engine: sa.Engine
) -> None:
    store.sessions.save(SessionFactory(id="s-1"))
    with Session(wrapped_engine) as session:
        with pytest.raises(InvalidRecord, match=r"bind: .*Wrapped.* cannot drive"):
            store.bind(session)
        session.commit()
    assert feed(store) == []
