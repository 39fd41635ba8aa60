"""Recovery racing the owner's finish: the owner's outcome stands, whichever commits first.

Two stores on one database stand for two controllers. A third connection holds the write order
(SQLite: the write lock; PostgreSQL: the `event_sequences` row that every append locks at
commit) while the finish and the recovery start. On PostgreSQL the finish is made to commit first
while the recovery waits for its session row: the recovery must then see the finished checkpoint
and leave it (before the fix it found the operation through its statement's old snapshot and
overwrote the owner's outcome). On SQLite either may win; each outcome is checked whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from session_journal import (
    CommandEnded,
    CommandResultKind,
    NotOperationOwner,
    OutcomeReason,
    SessionRecord,
    SessionState,
    Store,
)
from tests.factories import CheckpointMetadataFactory, CommandEndedFactory, SessionFactory
from tests.helpers import bodies
from tests.integration.test_checkpoints import checkpointing

NOTE = "checkpoint interrupted by controller restart at 2026-09-27T12:00:00Z"


class WriteOrderBlocker:
    """A raw connection holding what every writer of the store must wait for."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url)
        self.connection = self.engine.connect()
        self.postgres = self.engine.dialect.name == "postgresql"
        self.pid = None
        if self.postgres:
            self.pid = self.connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            self.connection.execute(
                sa.text("SELECT last_seq FROM event_sequences FOR UPDATE")
            ).all()
        else:
            driver = self.connection.connection.driver_connection
            driver.isolation_level = None  # type: ignore[union-attr]
            driver.execute("BEGIN IMMEDIATE")  # type: ignore[union-attr]

    def wait_for_waiter(self, blocked_by: int | None) -> int | None:
        """PostgreSQL: the pid of a backend waiting on `blocked_by`, once there is one."""
        if not self.postgres:
            time.sleep(0.3)  # SQLite gives no view of its busy handler; either order is checked
            return None
        observer = self.engine.connect()
        try:
            for _ in range(600):
                waiter = observer.execute(
                    sa.text(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE :blocker = ANY(pg_blocking_pids(pid))"
                    ),
                    {"blocker": blocked_by},
                ).scalar()
                if waiter is not None:
                    return int(waiter)
                observer.rollback()
                time.sleep(0.05)
        finally:
            observer.close()
        raise AssertionError(f"nothing came to wait on backend {blocked_by}")

    def release(self) -> None:
        if self.postgres:
            self.connection.rollback()
        else:
            self.connection.connection.driver_connection.execute("ROLLBACK")  # type: ignore[union-attr]
        self.connection.close()
        self.engine.dispose()


@contextmanager
def two_controllers(url: str) -> Iterator[tuple[Store, Store]]:
    with Store.open(url, upgrade=True) as owner, Store.open(url) as restarted:
        yield owner, restarted


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run `call` on a thread; the list receives what it returned or raised."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as error:
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def finished(owner: Store, record: SessionRecord, outcome: str) -> Callable[[], object]:
    if outcome == "failed":
        done = record.model_copy(
            update={"state": SessionState.RUNNING, "last_checkpoint_error": "disk full"}
        )
        return lambda: owner.checkpoints.finish_failed(
            done, "attempt-1", deferred=False, message="disk full"
        )
    done = record.model_copy(
        update={"state": SessionState.RUNNING, "checkpoint": CheckpointMetadataFactory(name="new")}
    )
    return lambda: owner.checkpoints.save_requested(done, "attempt-1")


@pytest.mark.parametrize("outcome", ["failed", "succeeded"])
def test_recovery_racing_a_finish_leaves_the_owners_outcome(
    migrated_url: str, outcome: str
) -> None:
    with two_controllers(migrated_url) as (owner, restarted):
        record = SessionFactory(
            id="session-1", checkpoint=CheckpointMetadataFactory(name="previous")
        )
        started = checkpointing(owner, record, "attempt-1")

        blocker = WriteOrderBlocker(migrated_url)
        try:
            finish, finish_result = in_thread(finished(owner, started, outcome))
            finisher = blocker.wait_for_waiter(blocker.pid)
            recovery, recovered = in_thread(
                lambda: restarted.checkpoints.recover_interrupted("2026-09-27T12:00:00Z")
            )
            blocker.wait_for_waiter(finisher)  # PostgreSQL: the recovery waits on the finish
        finally:
            blocker.release()
        finish.join(60)
        recovery.join(60)

        session = owner.sessions.get("session-1")
        assert session is not None
        log = bodies(owner)
        if recovered == [0]:  # the owner committed first (always, on PostgreSQL)
            assert finish_result == ([True] if outcome == "failed" else [None])
            assert session.state == SessionState.RUNNING
            if outcome == "failed":
                assert session.last_checkpoint_error == "disk full"
                assert session.checkpoint == CheckpointMetadataFactory(name="previous")
                assert log[-1] == CommandEndedFactory(
                    command_id="attempt-1",
                    outcome=CommandResultKind.FAILED,
                    reason=OutcomeReason.CHECKPOINT_FAILED,
                    message="disk full",
                )
            else:
                assert session.last_checkpoint_error is None
                assert session.checkpoint == CheckpointMetadataFactory(name="new")
                assert log[-1] == CommandEndedFactory(
                    command_id="attempt-1", outcome=CommandResultKind.SUCCEEDED
                )
        else:  # SQLite only: the recovery committed first, the finish found no operation
            assert blocker.postgres is False
            assert recovered == [1]
            if outcome == "failed":
                assert finish_result == [False]
            else:
                assert [type(error) for error in finish_result] == [NotOperationOwner]
            assert session.last_checkpoint_error == NOTE
            assert session.checkpoint == CheckpointMetadataFactory(name="previous")
            assert log[-1] == CommandEndedFactory(
                command_id="attempt-1",
                outcome=CommandResultKind.CANCELLED,
                reason=OutcomeReason.CONTROLLER_RESTARTED,
                message=NOTE,
            )
        assert sum(isinstance(body, CommandEnded) for body in log) == 1
        assert owner.checkpoints.get("session-1") is None
