"""The SQL implementations of what a service works in (the protocols of `protocols.py`): the
unit of work of a write transaction (`UnitOfWork`), the read context (`ReadUnitOfWork`), and
what runs after a commit. mypy checks that they, and their repositories, satisfy the protocols
(a `Database` is passed to the services as `Transactions`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar, cast

import sqlalchemy as sa

from ..config import StoreOptions
from ..errors import CallerCommits, UnitOfWorkEnded
from . import driver
from .engines import translate_errors
from .protocols import (
    ActivityReads,
    CheckpointReads,
    ConsumerReads,
    EventReads,
    LoneWrite,
    ProjectionReads,
    SessionReads,
)
from .repositories import (
    ActivityRepository,
    CheckpointRepository,
    ConsumerRepository,
    EventRepository,
    ProjectEventRepository,
    ProjectionRepository,
    SessionRepository,
)
from .repositories.events import EMPTY_MARK, PendingMark

T = TypeVar("T")

_log = logging.getLogger("session_journal")


class UnitOfWork:
    """One database transaction with repositories bound to it: the write path's (a batch or a
    `store.unit_of_work()` block), or a transaction the caller owns (`store.bind`).

    `commit()` asks the write path to commit (in a batch: keeps the function's work); a unit of
    work bound to the caller's transaction has no `commit()` of its own: the caller commits.
    Once its transaction ends, a unit of work refuses further appends and service calls
    (`UnitOfWorkEnded`): an event queued then would never receive a seq."""

    def __init__(
        self,
        connection: sa.Connection,
        options: StoreOptions | None = None,
        committer: Callable[[UnitOfWork], None] | None = None,
        *,
        owner: object = None,
    ) -> None:
        options = options or StoreOptions()
        self.connection = connection
        self.events = EventRepository(connection, options.max_body_bytes)
        self.sessions = SessionRepository(connection, on_delete=self.events.discard_session)
        self.activity = ActivityRepository(connection, options.max_body_bytes)
        self.checkpoints = CheckpointRepository(connection)
        self.projection = ProjectionRepository(connection)
        self.project_events = ProjectEventRepository(connection)
        self.consumers = ConsumerRepository(connection)
        self.owner = owner  # the store's `Database`: a service takes only its own store's
        self._committer = committer
        self._after_commit: list[Callable[[], None]] = []  # waiting for the commit
        self.refusal: Exception | None = None  # why it may not commit (`refuse_commit`)

    def commit(self) -> None:
        """Commit what this unit of work wrote (its appended events receive their seqs then).
        In `store.unit_of_work()` it commits now; in a function the write path runs
        (`submit`), the function's work commits with its batch, before the call returns; in a
        service call made with `uow=`, the call's work is kept in this unit of work. Raises
        the error a refusal left (`refuse_commit`), committing nothing."""
        self.check_commit()
        if self._committer is None:
            raise CallerCommits(
                "commit(): this unit of work is bound to a transaction of the caller, who "
                "commits it (Session.commit() or Connection.commit())"
            )
        self._committer(self)

    def refuse_commit(self, error: Exception) -> None:
        """From now on `commit()` (and the caller's commit of a bound transaction) raises
        `error` and commits nothing: for a refusal the caller's own writes must not outlive
        (an ack its consumer's lease refused: `LeaseLost`), even if the caller catches it."""
        self.refusal = error

    def check_commit(self) -> None:
        """Raise the error of `refuse_commit`, if any (a new one of its kind and message)."""
        refusal = self.refusal
        if refusal is not None:
            raise type(refusal)(*refusal.args)

    def take_refusal(self) -> Exception | None:
        """The error of `refuse_commit` (a new one of its kind and message), handed over: for
        the write path, whose batch shares one unit of work among calls that each commit or
        not on their own (a call that was refused is undone, the others are not)."""
        refusal, self.refusal = self.refusal, None
        return None if refusal is None else type(refusal)(*refusal.args)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback()` once the work done so far has committed: after the `commit()` of a
        `unit_of_work()` block, after the commit of the batch of a function the write path runs
        (in the thread of the call that submitted it, before the call returns), or after the
        caller's commit of a transaction bound with `store.bind`. Never if that work is undone:
        a rollback, a savepoint rolled back (a service call that raised, a function of a batch
        that failed or returned without `commit()`, the caller's `begin_nested()` undone), a
        commit that failed. For work outside the database that must not happen unless the rows
        are gone for good (deleting files); an exception of `callback` is logged as a warning,
        never raised into the commit, which has happened by then."""
        self.events.check_open("run after the commit")
        self._after_commit.append(callback)

    def take_after_commit(self) -> Sequence[Callable[[], None]]:
        """The callbacks waiting for the commit, handed over (the unit of work forgets them):
        for whoever commits, to `run_after_commit` once the commit succeeded."""
        if not self._after_commit:  # the usual case, on the write path's hot path
            return ()
        waiting, self._after_commit = self._after_commit, []
        return waiting

    def mark(self) -> WorkMark:
        """The queued events and the callbacks waiting for the commit as they are now, to go
        back to with `restore` when what follows is undone (a savepoint rolled back)."""
        return WorkMark(self.events.mark(), len(self._after_commit))

    def restore(self, mark: WorkMark) -> None:
        """Undo back to `mark`: events and callbacks added since are forgotten (see
        `EventRepository.restore`)."""
        self.events.restore(mark.events)
        del self._after_commit[mark.after_commit :]

    def end(self, reason: str) -> None:
        """Its transaction is over (`reason` says how): appends, service calls and its
        repositories' reads and writes are refused from now on (`UnitOfWorkEnded`), rather
        than run outside the transaction they were given for; events still queued and callbacks
        still waiting for a commit are dropped (their transaction did not commit)."""
        self.events.end(reason)
        self._after_commit = []
        ended = cast(sa.Connection, _EndedConnection(reason))
        for repository in (
            self.sessions,
            self.events,
            self.activity,
            self.checkpoints,
            self.projection,
            self.project_events,
            self.consumers,
        ):
            repository._connection = ended

    def run_nested(self, fn: Callable[[UnitOfWork], T], action: str) -> T:
        """Run a service's function inside this unit of work (`uow=`), atomically: in a
        savepoint, kept only if `fn` calls `commit()` (which then keeps it here, committing
        nothing) and returns; an exception of `fn` undoes its work and is raised, a database
        error as a `StorageError` naming `action`."""
        self.events.check_open(action)
        kept = False

        def keep(_: UnitOfWork) -> None:
            nonlocal kept
            kept = True

        outer, self._committer = self._committer, keep
        mark = self.mark()
        try:
            with translate_errors(action):
                driver.nested_savepoint(self.connection)
            try:
                with translate_errors(action):
                    result = fn(self)
                    if kept:  # PostgreSQL: an error fn caught aborted the transaction
                        driver.check_transaction(self.connection)
                        driver.release_nested(self.connection)
                        return result
            except BaseException:
                self._undo(mark, action)
                raise
            self._undo(mark, action)
            return result
        finally:
            self._committer = outer

    def run_lone(self, write: LoneWrite[T], action: str) -> T:
        """Run a lone write inside this unit of work (`uow=`), without a savepoint: its work is
        one statement (and events queued only once it succeeded), atomic by itself, and a
        refusal writes nothing (`LoneWrite.run_together`). A database error is raised as a
        `StorageError` naming `action`; on PostgreSQL it aborts the transaction, as an error of
        the caller's own statements does (roll it back)."""
        self.events.check_open(action)
        with translate_errors(action):
            return write.run_together([write], self)[0]

    def _undo(self, mark: WorkMark, action: str) -> None:
        self.restore(mark)
        with translate_errors(f"undo {action}"):
            driver.rollback_nested(self.connection)


class WorkMark(NamedTuple):
    """What a unit of work holds for its commit at one moment (`UnitOfWork.mark`)."""

    events: PendingMark
    after_commit: int  # how many callbacks were waiting for the commit


NOTHING_DONE = WorkMark(EMPTY_MARK, 0)
"""The mark of a unit of work that has queued nothing."""


def run_after_commit(callbacks: Sequence[Callable[[], None]]) -> None:
    """Run the callbacks of a transaction that committed (`UnitOfWork.take_after_commit`), in
    the order given. The commit has happened: an exception of one is logged as a warning and
    the others still run; none reaches whoever committed."""
    for callback in callbacks:
        try:
            callback()
        except Exception:
            _log.warning("work to do after a commit failed: %r", callback, exc_info=True)


class _EndedConnection:
    """What the repositories of an ended unit of work have for a connection: any use of it is
    refused, naming how the unit of work ended."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> object:
        raise UnitOfWorkEnded(
            f"this unit of work has ended ({self._reason}); its repositories no longer read or "
            "write, and nothing was written; use a new one (store.unit_of_work(), or "
            "store.bind of the next transaction)"
        )


class LogRead:
    """A one-statement read of the log (`Database.reading_one_statement`): the event
    repository on the reader's pooled driver connection (`driver.Pooled`)."""

    def __init__(self, connection: sa.Connection, options: StoreOptions) -> None:
        self.events: EventReads = EventRepository(connection, options.max_body_bytes)


class ReadUnitOfWork:
    """A read on a reader connection (`Database.reading`): the repositories typed by what a
    read may do, and no `commit()`, so that committing a read is a type error."""

    def __init__(self, connection: sa.Connection, options: StoreOptions | None = None) -> None:
        options = options or StoreOptions()
        self.connection = connection
        self.sessions: SessionReads = SessionRepository(connection)
        self.events: EventReads = EventRepository(connection, options.max_body_bytes)
        self.activity: ActivityReads = ActivityRepository(connection, options.max_body_bytes)
        self.checkpoints: CheckpointReads = CheckpointRepository(connection)
        self.projection: ProjectionReads = ProjectionRepository(connection)
        # The project index's searches (`store.index`), typed by their own module.
        self.project_events = ProjectEventRepository(connection)
        self.consumers: ConsumerReads = ConsumerRepository(connection)
