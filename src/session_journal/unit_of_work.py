"""What a service works in: a read context, a write context (the unit of work), and the
`Transactions` that hand them out.

The services see only the protocols here (as cosmicpython's services see an abstract unit of
work): the repositories' methods they call, a `WriteContext` whose `commit()` keeps the work of a
function the write path runs, a `ReadContext` without `commit()`, and `Transactions`, which a
store's `Database` is and an in-memory fake can be (`tests/fakes.py`), so that the service rules
have unit tests without a database. `UnitOfWork` and `ReadUnitOfWork` are the SQL
implementations; mypy checks that they, and their repositories, satisfy the protocols (a
`Database` is passed to the services as `Transactions`).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import NamedTuple, Protocol, TypeVar, cast

import sqlalchemy as sa

from . import driver
from .api_events import ApiEventFilter, StoredRow
from .config import StoreOptions
from .db import translate_errors
from .errors import CallerCommits, UnitOfWorkEnded
from .records import CheckpointMetadata, CheckpointOperation, SessionRecord, SessionState
from .relay.state import TranscriptItem
from .repositories import (
    ActivityRepository,
    CheckpointRepository,
    EventRepository,
    ProjectEventRepository,
    ProjectionRepository,
    SessionRepository,
    StoredLifecycle,
    StoredProjection,
)
from .repositories.events import EMPTY_MARK, LogVersion, PendingMark
from .wakeups import CommitSignal

T = TypeVar("T")

_log = logging.getLogger("session_journal")

# --- The repositories as the services use them ------------------------------------------------


class SessionReads(Protocol):
    """Reading sessions."""

    def get(self, session_id: str) -> SessionRecord | None:
        """The session, or `None`."""
        ...

    def list(self, *, workspace_id: str | None, project_id: str | None) -> list[SessionRecord]:
        """Sessions matching both optional filters, by id."""
        ...

    def ids_in_states(
        self,
        states: Collection[SessionState],
        *,
        updated_before: datetime | None,
        after_id: str | None,
        limit: int,
    ) -> builtins.list[str]:
        """Ids of sessions in `states`, by id, after `after_id`, last saved before
        `updated_before` (timezone-aware), at most `limit`."""
        ...


class SessionWrites(SessionReads, Protocol):
    """Sessions in a write transaction: rows are locked before they are decided on."""

    def lock(self, session_id: str) -> StoredLifecycle | None:
        """The stored state and `last_error`, the row locked; `None` if absent."""
        ...

    def lock_existing(self, session_ids: Collection[str]) -> set[str]:
        """Which of the sessions exist, their rows locked in id order."""
        ...

    def insert_if_absent(self, record: SessionRecord) -> bool:
        """Insert the session row unless it exists; whether it was inserted."""
        ...

    def upsert(self, record: SessionRecord) -> None:
        """Insert or update the session, its context and checkpoint metadata in place."""
        ...

    def replace_checkpoint(self, session_id: str, checkpoint: CheckpointMetadata | None) -> None:
        """Store the checkpoint metadata; `None` removes it."""
        ...

    def set_native_session_id(self, session_id: str, native_session_id: str | None) -> None:
        """Store the runtime's own id for the session."""
        ...

    def update_lifecycle(self, record: SessionRecord) -> None:
        """Update `state`, `last_error` and `last_checkpoint_error`."""
        ...

    def delete(self, session_id: str) -> bool:
        """Delete the session and everything that belongs to it; whether it existed."""
        ...


class EventReads(Protocol):
    """Reading the ordered log."""

    def latest_seq(self) -> int:
        """The frontier: the largest seq ever assigned."""
        ...

    def pruned_through(self) -> int:
        """The floor of the pruned log: the highest seq pruned (0: never pruned)."""
        ...

    def version(self) -> LogVersion:
        """The log's version: frontier, floor and counter of deletions, by one statement."""
        ...

    def page_rows(
        self, event_filter: ApiEventFilter, after_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        """The frontier, the floor of the pruned log and the stored rows of the matching
        events after `after_seq`, ascending, at most `limit`, from one snapshot, undecoded."""
        ...

    def rows_after(self, after_seq: int, limit: int) -> tuple[int, int, list[StoredRow]]:
        """The frontier, the floor of the pruned log and the stored rows (`StoredRow`) of the
        events after `after_seq`, ascending, at most `limit`, from one snapshot."""
        ...

    def stored_types(self, seqs: list[int]) -> dict[int, object]:
        """The type tag of each stored event of `seqs`, as the database's type filter reads
        it."""
        ...

    def prune_horizon(self, older_than_ms: int) -> int:
        """The end of the longest prefix whose retained events were all recorded before
        `older_than_ms` (never below the floor)."""
        ...

    def count_through(self, through_seq: int) -> int:
        """How many events are stored with `seq <= through_seq`."""
        ...

    def present_after(self, after_seq: int, through_seq: int) -> set[int]:
        """The seqs of the events stored with `after_seq < seq <= through_seq`."""
        ...

    def count_between(self, after_seq: int, through_seq: int) -> int:
        """How many events are stored with `after_seq < seq <= through_seq`."""
        ...


class EventWrites(EventReads, Protocol):
    """Appending to the ordered log (seqs are assigned at commit)."""

    def append_encoded(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        """Queue one event whose body the services encoded (`validation.encode_json`)."""
        ...

    def append_if_session_exists(self, session_id: str, recorded_at_ms: int, body: str) -> bool:
        """Queue one event if its session exists; whether it did."""
        ...

    def raise_floor(self, through_seq: int) -> bool:
        """Record `pruned_through = through_seq` if above the floor and not above the
        frontier (raising the minimum compatible level); whether the floor moved."""
        ...

    def delete_pruned(self, through_seq: int, limit: int) -> int:
        """Delete at most `limit` events with `seq <= through_seq`, oldest first; how many."""
        ...


class ActivityReads(Protocol):
    """Reading activity snapshots."""

    def get(self, session_id: str) -> str | None:
        """The stored snapshot's JSON text, or `None`."""
        ...


class ActivityWrites(ActivityReads, Protocol):
    """Replacing activity snapshots."""

    def put(self, session_id: str, body: str) -> None:
        """Insert or replace the snapshot."""
        ...


class CheckpointReads(Protocol):
    """Reading checkpoint operations."""

    def get(self, session_id: str) -> CheckpointOperation | None:
        """The session's open operation, or `None`."""
        ...


class CheckpointWrites(CheckpointReads, Protocol):
    """Opening, correlating and closing checkpoint operations."""

    def lock(self, session_id: str) -> CheckpointOperation | None:
        """Like `get`, the row locked until the transaction ends."""
        ...

    def insert(self, session_id: str, command_id: str) -> None:
        """Open an operation owned by `command_id`."""
        ...

    def set_related(self, session_id: str, related_command_ids: list[str]) -> None:
        """Replace the operation's related command ids."""
        ...

    def delete(self, session_id: str) -> None:
        """Close the session's operation."""
        ...

    def lock_interrupted(self) -> list[str]:
        """Sessions in `checkpointing` or with an open checkpoint operation, locked, by id."""
        ...

    def mark_recovered(self, session_id: str, last_checkpoint_error: str) -> None:
        """Back to `running` after an interrupted checkpoint, saying so."""
        ...


class ProjectionReads(Protocol):
    """Reading materialized sessions."""

    def get(self, session_id: str) -> StoredProjection | None:
        """The stored relay frontier and state, or `None`."""
        ...

    def transcript(self, session_id: str) -> list[TranscriptItem]:
        """The session's transcript, in order."""
        ...


class ProjectionWrites(ProjectionReads, Protocol):
    """Advancing materialized sessions."""

    def put(self, session_id: str, stored: StoredProjection) -> None:
        """Replace the frontier and state."""
        ...

    def add_items(self, session_id: str, items: list[TranscriptItem]) -> None:
        """Append transcript items."""
        ...


# --- The contexts ----------------------------------------------------------------------------


class ProjectEventWrites(Protocol):
    """The project index, as the sessions' removal uses it."""

    def delete_session(self, session_id: str) -> None:
        """Delete the session's index rows."""
        ...


class ReadContext(Protocol):
    """A read: the read repositories, and no `commit()`."""

    @property
    def sessions(self) -> SessionReads:
        """Sessions."""
        ...

    @property
    def events(self) -> EventReads:
        """The ordered log."""
        ...

    @property
    def activity(self) -> ActivityReads:
        """Activity snapshots."""
        ...

    @property
    def checkpoints(self) -> CheckpointReads:
        """Checkpoint operations."""
        ...

    @property
    def projection(self) -> ProjectionReads:
        """Materialized sessions."""
        ...


class LogReadContext(Protocol):
    """A read of the log made of one statement (`reading_one_statement`)."""

    @property
    def events(self) -> EventReads:
        """The ordered log."""
        ...


class WriteContext(Protocol):
    """A function's share of a write transaction: the repositories, and `commit()` to keep its
    work (leaving without it undoes the work)."""

    @property
    def sessions(self) -> SessionWrites:
        """Sessions."""
        ...

    @property
    def events(self) -> EventWrites:
        """The ordered log."""
        ...

    @property
    def activity(self) -> ActivityWrites:
        """Activity snapshots."""
        ...

    @property
    def checkpoints(self) -> CheckpointWrites:
        """Checkpoint operations."""
        ...

    @property
    def projection(self) -> ProjectionWrites:
        """Materialized sessions."""
        ...

    @property
    def project_events(self) -> ProjectEventWrites:
        """The project index."""
        ...

    def commit(self) -> None:
        """Keep this function's work: it commits with the write path's transaction."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback()` once the work done so far has committed, and never if it is
        undone (see `UnitOfWork.after_commit`)."""
        ...


class Transactions(Protocol):
    """What a service needs of a store: the write path and reads. `Database` is one."""

    @property
    def options(self) -> StoreOptions:
        """The store's options (the services read `max_body_bytes`)."""
        ...

    def submit(
        self, fn: Callable[[WriteContext], T], action: str = "write", uow: object = None
    ) -> T:
        """Run `fn` on the write path; its result once its work is committed (or its error).
        `action` names the call in errors. With `uow` (a service called with `uow=`), run it
        atomically inside that unit of work instead: it commits when the unit of work does."""
        ...

    def reading(
        self, action: str = "read", uow: object = None
    ) -> AbstractContextManager[ReadContext]:
        """A read whose queries all see one committed state; with `uow`, in that unit of work."""
        ...

    def reading_one_statement(
        self, action: str = "read", uow: object = None
    ) -> AbstractContextManager[LogReadContext]:
        """A read of the log made of one statement (no transaction around it); with `uow`, in
        that unit of work."""
        ...

    def commit_signal(self) -> CommitSignal:
        """The wake-up signal of followers: it moves when events may have committed (in this
        process or another); its sources start on first use."""
        ...


# --- The SQL implementations -------------------------------------------------------------------


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
        self.owner = owner  # the store's `Database`: a service takes only its own store's
        self._committer = committer
        self._after_commit: list[Callable[[], None]] = []  # waiting for the commit

    def commit(self) -> None:
        """Commit what this unit of work wrote (its appended events receive their seqs then).
        In `store.unit_of_work()` it commits now; in a function the write path runs
        (`submit`), the function's work commits with its batch, before the call returns; in a
        service call made with `uow=`, the call's work is kept in this unit of work."""
        if self._committer is None:
            raise CallerCommits(
                "commit(): this unit of work is bound to a transaction of the caller, who "
                "commits it (Session.commit() or Connection.commit())"
            )
        self._committer(self)

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
