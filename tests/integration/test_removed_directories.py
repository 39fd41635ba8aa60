"""Retention: `remove_ended(..., sessions_dir=...)` deletes the sessions' directories only after
the commit that removed their rows, in whatever transaction it runs (its own on the write path,
a `unit_of_work()` block, a function of a batch, the caller's transaction under `store.bind`),
never for work that is rolled back; a deletion that fails then is a warning, and calling again
deletes what is left. On both backends and through both APIs."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from session_journal import (
    IntegrityViolation,
    LifecycleConflict,
    SessionState,
    StorageError,
    Store,
    UnitOfWork,
    UnitOfWorkEnded,
)
from tests.factories import SessionFactory

pytestmark = pytest.mark.both_apis


@pytest.fixture
def sessions_dir(tmp_path: Path) -> Path:
    """The directory holding one directory per session."""
    directory = tmp_path / "sessions"
    directory.mkdir()
    return directory


@pytest.fixture
def host_engine(store: Store, backend: str) -> Iterator[sa.Engine]:
    """The application's own engine on the store's database (SQLite: foreign keys on)."""
    engine = sa.create_engine(store.url)
    if backend == "sqlite":
        sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON"))
    yield engine
    engine.dispose()


def ended(store: Store, sessions_dir: Path, *session_ids: str) -> None:
    """Closed sessions, each with an event and a directory holding its event file."""
    for session_id in session_ids:
        store.sessions.save(SessionFactory(id=session_id, state=SessionState.RUNNING))
        store.faults.record_startup_fault(session_id, "m")
        store.sessions.save_lifecycle(SessionFactory(id=session_id, state=SessionState.CLOSED))
        (sessions_dir / session_id).mkdir()
        (sessions_dir / session_id / "events.jsonl").write_text("{}\n")


def stored(store: Store, session_id: str) -> tuple[bool, int]:
    """Whether the session's row is there, and how many events of it."""
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            count = connection.scalar(
                sa.text("SELECT count(*) FROM api_events WHERE session_id = :id"),
                {"id": session_id},
            )
    finally:
        engine.dispose()
    return store.sessions.get(session_id) is not None, int(count or 0)


def directories(sessions_dir: Path) -> list[str]:
    return sorted(path.name for path in sessions_dir.iterdir())


# --- a unit_of_work() block and a function of the write path --------------------------------


def test_a_rolled_back_unit_of_work_keeps_the_sessions_and_their_directories(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1")
    with (
        pytest.raises(RuntimeError, match="the caller's own step failed"),
        store.unit_of_work() as uow,
    ):
        removed = store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
        assert removed == ["s-1"]
        raise RuntimeError("the caller's own step failed")
    assert stored(store, "s-1") == (True, 1)
    assert (sessions_dir / "s-1" / "events.jsonl").read_text() == "{}\n"
    with store.unit_of_work() as uow:  # left without commit: rolled back too
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
    assert stored(store, "s-1") == (True, 1)
    assert directories(sessions_dir) == ["s-1"]


def test_a_unit_of_work_deletes_the_directories_at_its_commit_and_not_before(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1", "s-2")
    with store.unit_of_work() as uow:
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
        assert directories(sessions_dir) == ["s-1", "s-2"]  # the rows may still come back
        uow.commit()
        assert directories(sessions_dir) == ["s-2"]  # right after the commit
        # the block goes on in a new transaction: its removal waits for its own commit
        store.sessions.remove_ended(["s-2"], sessions_dir=sessions_dir, uow=uow)
        assert directories(sessions_dir) == ["s-2"]
    assert (stored(store, "s-1"), stored(store, "s-2")) == ((False, 0), (True, 1))
    assert directories(sessions_dir) == ["s-2"]  # the second removal was rolled back


def test_a_function_of_the_write_path_deletes_directories_only_if_its_work_is_kept(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1", "s-2")

    def without_commit(uow: Any) -> None:
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)

    def with_commit(uow: Any) -> list[str]:
        removed = store.sessions.remove_ended(["s-2"], sessions_dir=sessions_dir, uow=uow)
        assert directories(sessions_dir) == ["s-1", "s-2"]
        uow.commit()
        return removed

    store.run_in_unit_of_work(without_commit)  # undone: its savepoint is rolled back
    assert (stored(store, "s-1"), directories(sessions_dir)) == ((True, 1), ["s-1", "s-2"])
    assert store.run_in_unit_of_work(with_commit) == ["s-2"]
    assert (stored(store, "s-2"), directories(sessions_dir)) == ((False, 0), ["s-1"])


def test_a_refused_removal_deletes_no_directory_and_the_unit_of_work_goes_on(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1")
    store.sessions.save(SessionFactory(id="running-1", state=SessionState.RUNNING))
    (sessions_dir / "running-1").mkdir()
    (sessions_dir / "never-stored").mkdir()
    with store.unit_of_work() as uow:
        with pytest.raises(LifecycleConflict, match="running-1"):
            store.sessions.remove_ended(
                ["never-stored", "running-1", "s-1"], sessions_dir=sessions_dir, uow=uow
            )
        uow.commit()
    assert directories(sessions_dir) == ["never-stored", "running-1", "s-1"]
    assert stored(store, "s-1") == (True, 1)


class Caller(threading.Thread):
    """A thread making one store call; `outcome` is what it returned or raised, and `seen`
    the directories there were when it came back."""

    def __init__(self, call: Callable[[], Any], sessions_dir: Path) -> None:
        super().__init__()
        self.call, self.sessions_dir = call, sessions_dir
        self.outcome: Any = None
        self.seen: list[str] = []

    def run(self) -> None:
        try:
            self.outcome = self.call()
        except Exception as error:
            self.outcome = error
        self.seen = directories(self.sessions_dir)


@pytest.mark.sync_api  # it holds the write path to make one batch (internals)
def test_in_a_batch_of_several_calls_only_the_kept_calls_delete_directories(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-undone", "s-kept")

    def undone(uow: UnitOfWork) -> None:
        store.sessions.remove_ended(["s-undone"], sessions_dir=sessions_dir, uow=uow)
        uow.commit()
        raise RuntimeError("undone after all")

    callers = [
        Caller(lambda: store.run_in_unit_of_work(undone), sessions_dir),
        Caller(
            lambda: store.sessions.remove_ended(["s-kept"], sessions_dir=sessions_dir), sessions_dir
        ),
    ]
    write_path = store._database.write_path
    with store.unit_of_work():  # the calls queue meanwhile, then run as one batch
        for caller in callers:
            queued = write_path.queued()
            caller.start()
            for _ in range(1000):
                if write_path.queued() == queued + 1:
                    break
                time.sleep(0.01)
        batches = write_path.batches
    for caller in callers:
        caller.join(30)
    assert write_path.batches - batches == 1
    assert isinstance(callers[0].outcome, RuntimeError)
    assert callers[1].outcome == ["s-kept"]
    assert callers[1].seen == ["s-undone"]  # gone by the time its own call returned
    assert (stored(store, "s-undone"), directories(sessions_dir)) == ((True, 1), ["s-undone"])


@pytest.mark.sync_api  # service functions run with `uow=` (internals)
def test_work_after_the_commit_goes_with_a_service_call_that_is_undone(store: Store) -> None:
    ran: list[str] = []

    def undone(uow: UnitOfWork) -> None:
        uow.after_commit(lambda: ran.append("undone"))
        uow.commit()
        raise RuntimeError("undone after all")

    def kept(uow: UnitOfWork) -> None:
        uow.after_commit(lambda: ran.append("kept"))
        uow.commit()

    with store.unit_of_work() as uow:
        with pytest.raises(RuntimeError, match="undone after all"):
            store._database.submit(undone, "undone", uow)
        store._database.submit(kept, "kept", uow)
        uow.after_commit(lambda: ran.append("own"))
        assert ran == []
        uow.commit()
        assert ran == ["kept", "own"]


# --- the caller's transaction (store.bind) ----------------------------------------------------


@pytest.mark.parametrize("target", ["session", "connection"])
def test_a_bound_transaction_deletes_the_directories_only_when_the_caller_commits(
    store: Store, host_engine: sa.Engine, sessions_dir: Path, target: str
) -> None:
    ended(store, sessions_dir, "s-1")
    for commit in (False, True):
        caller = Session(host_engine) if target == "session" else host_engine.connect()
        with caller:
            uow = store.bind(caller)
            removed = store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
            assert removed == ["s-1"]
            assert directories(sessions_dir) == ["s-1"]  # not before the caller commits
            if commit:
                caller.commit()
                assert directories(sessions_dir) == []  # by the time commit() returns
            else:
                caller.rollback()
                assert stored(store, "s-1") == (True, 1)
                assert directories(sessions_dir) == ["s-1"]
    assert stored(store, "s-1") == (False, 0)


def test_a_rolled_back_savepoint_keeps_its_directories_in_a_committed_transaction(
    store: Store, host_engine: sa.Engine, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-undone", "s-released", "s-outside")
    with Session(host_engine) as session:
        uow = store.bind(session)
        with pytest.raises(RuntimeError, match="step aborted"), session.begin_nested():
            store.sessions.remove_ended(["s-undone"], sessions_dir=sessions_dir, uow=uow)
            raise RuntimeError("step aborted")
        with session.begin_nested():
            store.sessions.remove_ended(["s-released"], sessions_dir=sessions_dir, uow=uow)
        store.sessions.remove_ended(["s-outside"], sessions_dir=sessions_dir, uow=uow)
        assert len(directories(sessions_dir)) == 3
        session.commit()
    assert directories(sessions_dir) == ["s-undone"]
    assert stored(store, "s-undone") == (True, 1)
    assert stored(store, "s-released") == stored(store, "s-outside") == (False, 0)


def test_a_savepoint_opened_before_binding_and_rolled_back_keeps_the_directories(
    store: Store, host_engine: sa.Engine, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1")
    with host_engine.connect() as connection:
        connection.begin()
        savepoint = connection.begin_nested()
        uow = store.bind(connection)
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
        savepoint.rollback()
        connection.commit()
    assert (stored(store, "s-1"), directories(sessions_dir)) == ((True, 1), ["s-1"])


def test_a_bound_commit_that_fails_deletes_no_directory(
    store: Store, host_engine: sa.Engine, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1")
    store.sessions.save(SessionFactory(id="s-orphan"))
    with Session(host_engine) as session:
        uow = store.bind(session)
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
        store.faults.record_startup_fault("s-orphan", "orphan", uow=uow)
        # behind the store's back: the event's session goes, so its insert fails at commit
        session.execute(sa.text("DELETE FROM sessions WHERE session_id = 's-orphan'"))
        with pytest.raises(IntegrityViolation, match="commit the events of a unit of work"):
            session.commit()
        session.rollback()
    assert (stored(store, "s-1"), directories(sessions_dir)) == ((True, 1), ["s-1"])


def test_a_bound_transaction_that_commits_nothing_deletes_nothing(
    store: Store, host_engine: sa.Engine, sessions_dir: Path, backend: str
) -> None:
    # On PostgreSQL an error the caller caught aborts the transaction: the COMMIT that follows
    # rolls back (psycopg does not say so). The directory goes exactly when the rows do.
    ended(store, sessions_dir, "s-1")
    with host_engine.connect() as connection:
        uow = store.bind(connection)
        store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir, uow=uow)
        with pytest.raises(sa.exc.DBAPIError):
            connection.execute(sa.text("SELECT * FROM no_such_table"))
        if backend == "postgresql":
            with pytest.raises(StorageError, match="aborted"):
                connection.commit()
            connection.rollback()
        else:
            connection.commit()
    rows_gone = stored(store, "s-1") == (False, 0)
    assert rows_gone is (backend == "sqlite")
    assert directories(sessions_dir) == ([] if rows_gone else ["s-1"])


# --- after the commit: failures and leftovers -------------------------------------------------


def fail_for(monkeypatch: pytest.MonkeyPatch, failing: Path) -> None:
    """`rmtree` fails for the one directory, as on a busy or read-only file system."""
    real: Callable[..., None] = shutil.rmtree

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path) == failing:
            raise PermissionError(13, "Permission denied", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)  # as `services.sessions` calls it


@pytest.mark.parametrize("how", ["own", "unit_of_work", "bind"])
def test_a_directory_that_cannot_be_deleted_after_the_commit_is_a_warning_naming_it(
    store: Store,
    host_engine: sa.Engine,
    sessions_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="session_journal")
    ended(store, sessions_dir, "s-1", "s-2")
    fail_for(monkeypatch, (sessions_dir / "s-1").absolute())
    ids = ["s-1", "s-2"]
    if how == "own":
        assert store.sessions.remove_ended(ids, sessions_dir=sessions_dir) == ids
    elif how == "unit_of_work":
        with store.unit_of_work() as uow:
            store.sessions.remove_ended(ids, sessions_dir=sessions_dir, uow=uow)
            uow.commit()  # does not raise
    else:
        with Session(host_engine) as session:
            store.sessions.remove_ended(ids, sessions_dir=sessions_dir, uow=store.bind(session))
            session.commit()  # does not raise
    assert stored(store, "s-1") == stored(store, "s-2") == (False, 0)
    assert directories(sessions_dir) == ["s-1"]  # the others are deleted all the same
    warnings = [r for r in caplog.records if r.name == "session_journal"]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert warnings[0].levelno == logging.WARNING
    assert str((sessions_dir / "s-1").absolute()) in warnings[0].getMessage()
    assert "Permission denied" in warnings[0].getMessage()


def test_calling_again_deletes_the_directories_of_sessions_already_removed(
    store: Store,
    sessions_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="session_journal")
    ended(store, sessions_dir, "s-1", "s-2")
    fail_for(monkeypatch, (sessions_dir / "s-1").absolute())  # a crash after the commit
    assert store.sessions.remove_ended(["s-1", "s-2"], sessions_dir=sessions_dir) == [
        "s-1",
        "s-2",
    ]
    assert directories(sessions_dir) == ["s-1"]
    monkeypatch.undo()
    (sessions_dir / "never-stored").mkdir()  # no row ever: a leftover too
    ended(store, sessions_dir, "s-3")
    ids = ["never-stored", "s-1", "s-3"]
    removed = store.sessions.remove_ended(ids, sessions_dir=sessions_dir)
    assert removed == ["s-3"]  # the ids removed from the database by this call
    assert directories(sessions_dir) == []
    assert store.sessions.remove_ended(["s-1"], sessions_dir=sessions_dir) == []  # no error


def test_removing_without_sessions_dir_deletes_no_directory(
    store: Store, sessions_dir: Path
) -> None:
    ended(store, sessions_dir, "s-1")
    with store.unit_of_work() as uow:
        store.sessions.remove_ended(["s-1"], uow=uow)
        uow.commit()
    assert (stored(store, "s-1"), directories(sessions_dir)) == ((False, 0), ["s-1"])
    with pytest.raises(UnitOfWorkEnded, match="has ended"):
        uow.after_commit(lambda: None)
