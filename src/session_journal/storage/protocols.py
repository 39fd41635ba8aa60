"""What the services see of storage: the repositories' methods they call, the contexts they work
in and `Transactions`, which hands the contexts out (as cosmicpython's services see an abstract
unit of work).

A `WriteContext`'s `commit()` keeps the work of a function the write path runs; a `ReadContext`
has no `commit()`. A store's `Database` is a `Transactions`, and so is the in-memory fake of
`tests/fakes.py`, on which the service rules have unit tests without a database. The SQL
implementations are in `unit_of_work.py` (`UnitOfWork`, `ReadUnitOfWork`) and `repositories/`;
mypy checks that they satisfy these protocols.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ..api_events import ApiEventFilter, StoredRow
from ..config import StoreOptions
from ..journal.search import IndexRow, SearchHit, SearchTerm
from ..records import (
    CheckpointMetadata,
    CheckpointOperation,
    SessionRecord,
    SessionState,
    SessionSummary,
)
from ..relay.state import TranscriptItem
from .counters import StoreCounters
from .repositories import (
    LeaseHolder,
    LeaseTaken,
    StoredConsumer,
    StoredLifecycle,
    StoredProjection,
)
from .repositories.events import LogVersion

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


# --- The repositories as the services use them ------------------------------------------------


class SessionReads(Protocol):
    """Reading sessions."""

    def get(self, session_id: str) -> SessionRecord | None:
        """The session, or `None`."""
        ...

    def list(self, *, workspace_id: str | None, project_id: str | None) -> list[SessionRecord]:
        """Sessions matching both optional filters, by id."""
        ...

    def page(
        self,
        *,
        workspace_id: str | None,
        state: SessionState | None,
        before: tuple[str, str] | None,
        limit: int,
    ) -> builtins.list[tuple[SessionSummary, tuple[str, str]]]:
        """Sessions matching both optional filters, newest first (`created_at`, then id), below
        the keyset `before`, at most `limit`, with activity and open operation; each with its
        keyset `(created key, id)`."""
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

    def count_by_state(self, workspace_id: str | None = None) -> dict[str, int]:
        """How many sessions are in each state (states without a session left out), of one
        workspace when `workspace_id` is given."""
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

    def page_rows_before(
        self, event_filter: ApiEventFilter, before_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        """`page_rows` of the newest `limit` matching events below `before_seq` (the rows
        ascending)."""
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

    def recorded_at_after(self, after_seq: int) -> int | None:
        """The `recorded_at_ms` of the first stored event after `after_seq`, or `None`."""
        ...

    def minute_counts(
        self, since_ms: int, until_ms: int, workspace_id: str | None
    ) -> tuple[int, dict[int, int]]:
        """The frontier, and how many of the events stored through it were recorded in each
        minute of `[since_ms, until_ms)`, by the minute's index; of one workspace's sessions
        when `workspace_id` is given."""
        ...


class EventWrites(EventReads, Protocol):
    """Appending to the ordered log (seqs are assigned at commit)."""

    def append_encoded(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        """Queue one event whose body the services encoded (`validation.encode_json`)."""
        ...

    def append_if_session_exists(self, session_id: str, recorded_at_ms: int, body: str) -> bool:
        """Queue one event if its session exists; whether it did."""
        ...

    def append_if_sessions_exist(self, events: Sequence[tuple[str, int, str]]) -> list[bool]:
        """`append_if_session_exists` of each `(session_id, recorded_at_ms, body)`, in order,
        the sessions checked together (one statement); whether each was queued."""
        ...

    def lock_log(self) -> tuple[int, int]:
        """The frontier and the floor, the log's row locked until the transaction ends."""
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

    def transcript_before(
        self, session_id: str, before_position: int | None, limit: int
    ) -> list[TranscriptItem]:
        """The session's newest `limit` transcript items below `before_position` (`None`: of
        the whole transcript), newest first."""
        ...


class ProjectionWrites(ProjectionReads, Protocol):
    """Advancing materialized sessions."""

    def put(self, session_id: str, stored: StoredProjection) -> None:
        """Replace the frontier and state."""
        ...

    def add_items(self, session_id: str, items: list[TranscriptItem]) -> None:
        """Append transcript items."""
        ...


class ConsumerReads(Protocol):
    """Reading durable consumers."""

    def get(self, name: str) -> StoredConsumer | None:
        """The consumer, or `None`."""
        ...

    def list(self) -> builtins.list[StoredConsumer]:
        """Every consumer, by name."""
        ...

    def list_with_next(self) -> builtins.list[tuple[StoredConsumer, int | None]]:
        """Every consumer, by name, with the `recorded_at_ms` of the first stored event after
        its position (`None`: none), by one statement."""
        ...

    def lowest_live(self, floor: int, now_ms: int) -> tuple[int, str] | None:
        """The lowest position of the consumers holding retention back, and whose it is."""
        ...

    def holder_of(self, name: str) -> LeaseHolder | None:
        """Who holds the consumer's lease until when, and the database's time; `None` if the
        consumer does not exist."""
        ...


class ConsumerWrites(ConsumerReads, Protocol):
    """Registering, moving and removing durable consumers."""

    def lock(self, name: str) -> StoredConsumer | None:
        """Like `get`, the row locked until the transaction ends."""
        ...

    def insert(self, consumer: StoredConsumer) -> bool:
        """Add a consumer unless one of its name exists (raising the minimum compatible
        level); whether it was added."""
        ...

    def delete(self, name: str) -> bool:
        """Remove the consumer; whether it existed."""
        ...

    def notify_moved(self) -> None:
        """Tell other processes' waiters that a position moved (PostgreSQL; at commit)."""
        ...

    def set_position(self, name: str, position: int, now_ms: int) -> None:
        """Move the consumer to `position`, back or forward."""
        ...

    def ack(
        self, name: str, seq: int, now_ms: int, lease: tuple[str, int] | None = None
    ) -> bool | None:
        """Move the position up to `seq` (never down) if the lease (holder, generation) allows
        it: `True`; `False` when the lease refused it (nothing changed); `None` when the consumer
        does not exist or `seq` is above the frontier."""
        ...

    def acquire(self, name: str, holder: str, ttl_ms: int) -> LeaseTaken | None:
        """Take the consumer's lease for `holder` (a new generation) unless another holder's is
        live; `None` if it is, or the consumer does not exist (`holder_of` says which)."""
        ...

    def renew(self, name: str, holder: str, generation: int, ttl_ms: int) -> int | None:
        """Extend a live lease to `ttl_ms` from now: its new expiry, or `None` if not live."""
        ...

    def release(self, name: str, holder: str, generation: int) -> bool:
        """End a lease that is still the consumer's; whether it was."""
        ...


# --- The contexts ----------------------------------------------------------------------------


class ProjectEventReads(Protocol):
    """Searching the project index."""

    def search(
        self,
        terms: list[SearchTerm],
        session_id: str | None,
        limit: int,
        workspace_id: str | None = None,
    ) -> list[SearchHit]:
        """Events whose text contains every term (its words as a phrase), best first; with
        `workspace_id`, of that workspace's sessions only."""
        ...


class ProjectEventWrites(ProjectEventReads, Protocol):
    """Inserting and deleting index rows."""

    def insert(self, rows: Sequence[IndexRow]) -> None:
        """Insert rows, skipping any (session_id, seq) already indexed."""
        ...

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

    @property
    def project_events(self) -> ProjectEventReads:
        """The project index."""
        ...

    @property
    def consumers(self) -> ConsumerReads:
        """Durable consumers."""
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

    @property
    def consumers(self) -> ConsumerWrites:
        """Durable consumers."""
        ...

    def commit(self) -> None:
        """Keep this function's work: it commits with the write path's transaction."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback()` once the work done so far has committed, and never if it is
        undone (see `UnitOfWork.after_commit`)."""
        ...

    def refuse_commit(self, error: Exception) -> None:
        """From now on its commit raises `error` and commits nothing (see
        `UnitOfWork.refuse_commit`)."""
        ...


class LoneWrite(Protocol[T_co]):
    """A write whose statements and arguments are fixed before its transaction (`lone.py`):
    what to run, as data, for the write path's two ways of running it."""

    appends: bool
    """Whether a true result is one event appended (what `store.metrics()` counts)."""

    def run(self, uow: WriteContext) -> T_co:
        """The work on a unit of work, committed with `uow.commit()` (a batch's, or a caller's
        unit of work)."""
        ...

    def run_alone(self, statements: Any, cursor: Any) -> T_co:
        """The same work by itself: the engine's `lone.LoneStatements` run on the write
        connection's `driver.LoneCursor`, in the transaction the write path began."""
        ...

    def run_together(self, writes: Sequence[Any], uow: WriteContext) -> Sequence[T_co]:
        """The work of `writes` (this one and the other writes of its type in a batch, in
        order) at once on the batch's unit of work, with fewer statements than one by one;
        their results, in order. Nothing is committed here."""
        ...


class LoopWrite(Protocol[T_co]):
    """A lone write that can also run as one statement on an event loop's connection
    (`loop_writes.py`)."""

    appends: bool
    """Whether a true result is one event appended (what `store.metrics()` counts)."""

    async def run_on_loop(self, statements: Any, connection: Any) -> T_co:
        """The work by itself: the engine's `lone.LoneStatements`, one statement in autocommit
        on a `driver.LoopConnection`."""
        ...


class LoopWriter(Protocol):
    """Where an async store runs lone writes on its event loop (`loop_writes.LoopWrites`)."""

    def start(self, write: LoopWrite[T], action: str) -> asyncio.Task[T] | None:
        """Start `write` there, as a task of the running loop whose result is the write's, if
        it may run there now; `None` otherwise (the caller goes to a worker)."""
        ...


class Transactions(Protocol):
    """What a service needs of a store: the write path and reads. `Database` is one."""

    @property
    def options(self) -> StoreOptions:
        """The store's options (the services read `max_body_bytes`)."""
        ...

    @property
    def counters(self) -> StoreCounters:
        """This process's counts of the store (`store.metrics()`), which the services add to
        (`CursorExpired` raised, prunes)."""
        ...

    def submit(
        self,
        fn: Callable[[WriteContext], T],
        action: str = "write",
        uow: object = None,
        *,
        solo: bool = False,
    ) -> T:
        """Run `fn` on the write path; its result once its work is committed (or its error).
        `action` names the call in errors. With `uow` (a service called with `uow=`), run it
        atomically inside that unit of work instead: it commits when the unit of work does.
        `solo`: in a transaction of its own, shared with no other call (work that locks the
        log's row before other rows: later calls of a shared transaction would take theirs
        after it, against the order every writer takes them in)."""
        ...

    def submit_lone(self, write: LoneWrite[T], action: str = "write", uow: object = None) -> T:
        """Run a lone write (see `lone.py`): its statements and arguments, fixed before its
        transaction, handed over as data; its result once committed (or its error). A caller
        alone on the write path runs it by itself, on the short path; otherwise it runs as
        `submit(write.run, action, uow)` would, in the next batch or inside `uow`."""
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

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside a write transaction of the store (where waiting for
        the write path would wait forever)."""
        ...

    @property
    def loop_writes(self) -> LoopWriter | None:
        """Where an async store runs lone writes on its event loop (PostgreSQL's
        `loop_writes.LoopWrites`); `None` where there is none (SQLite, a snapshot)."""
        ...

    def check_followable(self, action: str) -> None:
        """Refuse to wait for or follow the log when nothing can commit into these
        transactions' view of it: `StoreClosed` once the store closed, `ReadOnlySnapshot` for a
        snapshot (which sees one moment)."""
        ...
