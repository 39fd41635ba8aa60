"""An in-memory store for the services' unit tests: `FakeTransactions` is a
`unit_of_work.Transactions` whose repositories hold dicts and lists.

The fakes implement the protocols the SQL repositories satisfy (`make lint` runs mypy on this
file: `FakeServices` hands a `FakeTransactions` to the real services, so a fake that drifts from
a protocol is a type error). They keep the rules the services rely on: a function `submit`ted
keeps its work only if it calls `commit()` and returns (what it left for after the commit runs
then); seqs are assigned at commit, from one frontier that deleting never lowers; deleting a
session removes what belongs to it.
"""

from __future__ import annotations

import builtins
import copy
import re
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from session_journal import (
    ApiEventFilter,
    CheckpointMetadata,
    IntegrityViolation,
    SessionRecord,
    SessionState,
    StoreOptions,
)
from session_journal.api_events import EVENT_DATA, ApiActivityState, ApiEventData, StoredRow
from session_journal.follow.following import Following
from session_journal.journal.search import IndexRow, SearchHit, SearchTerm
from session_journal.records import CheckpointOperation, SessionSummary
from session_journal.relay.state import TranscriptItem
from session_journal.services.activity import ActivityService
from session_journal.services.checkpoints import CheckpointService
from session_journal.services.consumers import ConsumerService
from session_journal.services.events import EventService
from session_journal.services.faults import FaultService
from session_journal.services.index import ProjectIndex
from session_journal.services.projection import ProjectionService
from session_journal.services.sessions import SessionService
from session_journal.storage.clock import DATABASE_CLOCK
from session_journal.storage.counters import StoreCounters
from session_journal.storage.protocols import LoneWrite, ReadContext, Transactions, WriteContext
from session_journal.storage.repositories import (
    LeaseHolder,
    LeaseTaken,
    LogVersion,
    StoredConsumer,
    StoredLifecycle,
    StoredProjection,
)
from session_journal.storage.unit_of_work import run_after_commit

T = TypeVar("T")


@dataclass(frozen=True)
class StoredEvent:
    """One committed event of the fake log, its body decoded."""

    seq: int
    session_id: str
    recorded_at_ms: int
    body: ApiEventData


@dataclass
class FakeState:
    """Everything the fake store holds; a write works on a copy that replaces it at commit."""

    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    saved_at: dict[str, datetime] = field(default_factory=dict)  # the rows' `updated_at`
    created: dict[str, tuple[int, datetime]] = field(default_factory=dict)  # order, `created_at`
    sessions_made: int = 0  # the creation counter behind `created`
    events: list[StoredEvent] = field(default_factory=list)
    latest_seq: int = 0
    deletions: int = 0  # the database's trigger-kept counter of deleted events
    activity: dict[str, str] = field(default_factory=dict)
    operations: dict[str, CheckpointOperation] = field(default_factory=dict)
    projections: dict[str, StoredProjection] = field(default_factory=dict)
    transcripts: dict[str, list[TranscriptItem]] = field(default_factory=dict)
    index: dict[tuple[str, int], IndexRow] = field(default_factory=dict)  # by (session, seq)
    consumers: dict[str, StoredConsumer] = field(default_factory=dict)


def require_session(state: FakeState, session_id: str) -> None:
    """The foreign key every session-owned row has: the database refuses the row (at the
    latest at commit) when its session does not exist, and so does the fake, at once."""
    if session_id not in state.sessions:
        raise IntegrityViolation(f"FOREIGN KEY: session {session_id!r} does not exist")


class FakeSessions:
    """`SessionWrites` over `FakeState.sessions`."""

    def __init__(self, state: FakeState, pending: list[tuple[str, int, str]]) -> None:
        self._state = state
        self._pending = pending

    def get(self, session_id: str) -> SessionRecord | None:
        record = self._state.sessions.get(session_id)
        return None if record is None else record.model_copy(deep=True)

    def count_by_state(self, workspace_id: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self._state.sessions.values():
            if workspace_id is None or record.workspace_id == workspace_id:
                counts[record.state.value] = counts.get(record.state.value, 0) + 1
        return counts

    def list(self, *, workspace_id: str | None, project_id: str | None) -> list[SessionRecord]:
        return [
            record.model_copy(deep=True)
            for _, record in sorted(self._state.sessions.items())
            if workspace_id in (None, record.workspace_id)
            and project_id in (None, record.project_id)
        ]

    def page(
        self,
        *,
        workspace_id: str | None,
        state: SessionState | None,
        before: tuple[str, str] | None,
        limit: int,
    ) -> builtins.list[tuple[SessionSummary, tuple[str, str]]]:
        """Newest first by the fake's creation order (a counter: the databases' timestamps of
        one second tie and fall back to the id, which a unit test need not mimic)."""
        rows = []
        for record in self._state.sessions.values():
            if workspace_id not in (None, record.workspace_id) or state not in (None, record.state):
                continue
            created = self._state.created[record.id]
            summary = SessionSummary(
                session=record,
                created_at=created[1],
                updated_at=self._state.saved_at[record.id],
                activity=None,
                checkpoint_operation=self._state.operations.get(record.id),
            )
            activity = self._state.activity.get(record.id)
            if activity is not None:
                summary.activity = ApiActivityState.model_validate_json(activity)
            rows.append((summary, (f"{created[0]:020d}", record.id)))
        rows.sort(key=lambda row: row[1], reverse=True)
        return [row for row in rows if before is None or row[1] < before][:limit]

    def ids_in_states(
        self,
        states: Collection[SessionState],
        *,
        updated_before: datetime | None,
        after_id: str | None,
        limit: int,
    ) -> builtins.list[str]:
        found = [
            session_id
            for session_id, record in sorted(self._state.sessions.items())
            if record.state in states
            and (after_id is None or session_id > after_id)
            and (updated_before is None or self._state.saved_at[session_id] < updated_before)
        ]
        return found[:limit]

    def lock(self, session_id: str) -> StoredLifecycle | None:
        record = self._state.sessions.get(session_id)
        return None if record is None else StoredLifecycle(record.state, record.last_error)

    def lock_existing(self, session_ids: Collection[str]) -> set[str]:
        return {session_id for session_id in session_ids if session_id in self._state.sessions}

    def insert_if_absent(self, record: SessionRecord) -> bool:
        if record.id in self._state.sessions:
            return False
        self._state.sessions[record.id] = record.model_copy(deep=True, update={"checkpoint": None})
        self._state.saved_at[record.id] = datetime.now(UTC)
        self._state.sessions_made += 1
        self._state.created[record.id] = (self._state.sessions_made, datetime.now(UTC))
        return True

    def upsert(self, record: SessionRecord) -> None:
        self._state.sessions[record.id] = record.model_copy(deep=True)
        self._state.saved_at[record.id] = datetime.now(UTC)

    def replace_checkpoint(self, session_id: str, checkpoint: CheckpointMetadata | None) -> None:
        self._update(session_id, checkpoint=None if checkpoint is None else checkpoint.model_copy())

    def set_native_session_id(self, session_id: str, native_session_id: str | None) -> None:
        self._update(session_id, native_session_id=native_session_id)

    def update_lifecycle(self, record: SessionRecord) -> None:
        if record.id in self._state.sessions:
            self._state.saved_at[record.id] = datetime.now(UTC)
        self._update(
            record.id,
            state=record.state,
            last_error=record.last_error,
            last_checkpoint_error=record.last_checkpoint_error,
        )

    def delete(self, session_id: str) -> bool:
        state = self._state
        existed = state.sessions.pop(session_id, None) is not None
        state.saved_at.pop(session_id, None)
        state.created.pop(session_id, None)
        # What the foreign keys cascade to, and the events queued in this transaction.
        kept = [event for event in state.events if event.session_id != session_id]
        state.deletions += len(state.events) - len(kept)
        state.events = kept
        self._pending[:] = [row for row in self._pending if row[0] != session_id]
        for table in (state.activity, state.operations, state.projections, state.transcripts):
            table.pop(session_id, None)
        return existed

    def _update(self, session_id: str, **values: object) -> None:
        # An UPDATE of a row that does not exist changes nothing.
        record = self._state.sessions.get(session_id)
        if record is not None:
            self._state.sessions[session_id] = record.model_copy(update=values)


class FakeEvents:
    """`EventWrites` over `FakeState.events`: appends wait in `pending` for the commit."""

    def __init__(self, state: FakeState, pending: list[tuple[str, int, str]]) -> None:
        self._state = state
        self._pending = pending

    def append_encoded(self, session_id: str, recorded_at_ms: int, body: str) -> None:
        EVENT_DATA.validate_json(body)  # an API event body, or the test fails here
        require_session(self._state, session_id)
        self._pending.append((session_id, recorded_at_ms, body))

    def append_if_session_exists(self, session_id: str, recorded_at_ms: int, body: str) -> bool:
        if session_id not in self._state.sessions:
            return False
        self.append_encoded(session_id, recorded_at_ms, body)
        return True

    def append_if_sessions_exist(self, events: Sequence[tuple[str, int, str]]) -> list[bool]:
        return [self.append_if_session_exists(*event) for event in events]

    def latest_seq(self) -> int:
        return self._state.latest_seq

    def pruned_through(self) -> int:
        return 0

    def version(self) -> LogVersion:
        return LogVersion(self._state.latest_seq, 0, self._state.deletions)

    def prune_horizon(self, older_than_ms: int) -> int:
        raise NotImplementedError("pruning is tested on the databases")

    def count_through(self, through_seq: int) -> int:
        return sum(1 for event in self._state.events if event.seq <= through_seq)

    def lock_log(self) -> tuple[int, int]:
        return self._state.latest_seq, 0

    def recorded_at_after(self, after_seq: int) -> int | None:
        later = [event.recorded_at_ms for event in self._state.events if event.seq > after_seq]
        return later[0] if later else None

    def raise_floor(self, through_seq: int) -> bool:
        raise NotImplementedError("pruning is tested on the databases")

    def delete_pruned(self, through_seq: int, limit: int) -> int:
        raise NotImplementedError("pruning is tested on the databases")

    def page_rows(
        self, event_filter: ApiEventFilter, after_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        rows = [row for row in self._matching(event_filter) if row[0] > after_seq]
        return self._state.latest_seq, 0, rows[:limit]

    def page_rows_before(
        self, event_filter: ApiEventFilter, before_seq: int, limit: int
    ) -> tuple[int, int, list[StoredRow]]:
        rows = [row for row in self._matching(event_filter) if row[0] < before_seq]
        return self._state.latest_seq, 0, rows[-limit:] if limit else []

    def _matching(self, event_filter: ApiEventFilter) -> builtins.list[StoredRow]:
        sessions = self._state.sessions
        return [
            (event.seq, event.session_id, event.recorded_at_ms, event.body.model_dump_json(), True)
            for event in self._state.events
            if event_filter.session_id in (None, event.session_id)
            and event_filter.workspace_id in (None, sessions[event.session_id].workspace_id)
            and (event_filter.types is None or event.body.type in event_filter.types)
        ]

    def rows_after(self, after_seq: int, limit: int) -> tuple[int, int, list[StoredRow]]:
        return self.page_rows(ApiEventFilter(), after_seq, limit)

    def stored_types(self, seqs: list[int]) -> dict[int, object]:
        wanted = set(seqs)
        return {event.seq: event.body.type for event in self._state.events if event.seq in wanted}

    def present_after(self, after_seq: int, through_seq: int) -> set[int]:
        return {event.seq for event in self._state.events if after_seq < event.seq <= through_seq}

    def count_between(self, after_seq: int, through_seq: int) -> int:
        return len(self.present_after(after_seq, through_seq))

    def minute_counts(
        self, since_ms: int, until_ms: int, workspace_id: str | None
    ) -> tuple[int, dict[int, int]]:
        counts: dict[int, int] = {}
        for event in self._state.events:
            record = self._state.sessions.get(event.session_id)
            in_workspace = workspace_id is None or (
                record is not None and record.workspace_id == workspace_id
            )
            if since_ms <= event.recorded_at_ms < until_ms and in_workspace:
                minute = (event.recorded_at_ms - since_ms) // 60_000
                counts[minute] = counts.get(minute, 0) + 1
        return self._state.latest_seq, counts

    def flush(self) -> int:
        """At commit: the queued events get the next seqs, in order; how many."""
        appended = len(self._pending)
        for session_id, recorded_at_ms, body in self._pending:
            self._state.latest_seq += 1
            self._state.events.append(
                StoredEvent(
                    self._state.latest_seq,
                    session_id,
                    recorded_at_ms,
                    EVENT_DATA.validate_json(body),
                )
            )
        self._pending.clear()
        return appended


class FakeActivity:
    """`ActivityWrites` over `FakeState.activity`."""

    def __init__(self, state: FakeState) -> None:
        self._state = state

    def get(self, session_id: str) -> str | None:
        return self._state.activity.get(session_id)

    def put(self, session_id: str, body: str) -> None:
        require_session(self._state, session_id)
        self._state.activity[session_id] = body


class FakeCheckpoints:
    """`CheckpointWrites` over `FakeState.operations`."""

    def __init__(self, state: FakeState) -> None:
        self._state = state

    def get(self, session_id: str) -> CheckpointOperation | None:
        operation = self._state.operations.get(session_id)
        return None if operation is None else operation.model_copy(deep=True)

    def lock(self, session_id: str) -> CheckpointOperation | None:
        return self.get(session_id)

    def insert(self, session_id: str, command_id: str) -> None:
        # The primary key: one operation per session.
        assert session_id not in self._state.operations, f"{session_id}: operation open"
        require_session(self._state, session_id)
        self._state.operations[session_id] = CheckpointOperation(
            session_id=session_id, command_id=command_id
        )

    def set_related(self, session_id: str, related_command_ids: list[str]) -> None:
        operation = self._state.operations[session_id]
        self._state.operations[session_id] = operation.model_copy(
            update={"related_command_ids": list(related_command_ids)}
        )

    def delete(self, session_id: str) -> None:
        self._state.operations.pop(session_id, None)

    def lock_interrupted(self) -> list[str]:
        return sorted(
            session_id
            for session_id, record in self._state.sessions.items()
            if record.state is SessionState.CHECKPOINTING or session_id in self._state.operations
        )

    def mark_recovered(self, session_id: str, last_checkpoint_error: str) -> None:
        record = self._state.sessions.get(session_id)  # an UPDATE of no row changes nothing
        if record is not None:
            self._state.sessions[session_id] = record.model_copy(
                update={
                    "state": SessionState.RUNNING,
                    "last_checkpoint_error": last_checkpoint_error,
                }
            )


class FakeProjection:
    """`ProjectionWrites` over `FakeState.projections` and `transcripts`."""

    def __init__(self, state: FakeState) -> None:
        self._state = state

    def get(self, session_id: str) -> StoredProjection | None:
        return self._state.projections.get(session_id)

    def put(self, session_id: str, stored: StoredProjection) -> None:
        self._state.projections[session_id] = stored

    def add_items(self, session_id: str, items: list[TranscriptItem]) -> None:
        self._state.transcripts.setdefault(session_id, []).extend(items)

    def transcript(self, session_id: str) -> list[TranscriptItem]:
        return list(self._state.transcripts.get(session_id, []))

    def transcript_before(
        self, session_id: str, before_position: int | None, limit: int
    ) -> list[TranscriptItem]:
        items = self._state.transcripts.get(session_id, [])
        older = [
            item for item in items if before_position is None or item.position < before_position
        ]
        return list(reversed(older))[:limit]


class FakeProjectEvents:
    """`ProjectEventWrites`: the index rows by (session_id, seq). Its search keeps the rules a
    caller relies on (every term's words next to each other in `text_content`, any case; the
    session filter; the limit) but not the databases' ranking or snippets: hits come in
    (session_id, seq) order, each with its whole text as the snippet and rank 1."""

    def __init__(self, state: FakeState) -> None:
        self._state = state

    def insert(self, rows: Sequence[IndexRow]) -> None:
        for row in rows:
            self._state.index.setdefault((row.session_id, row.seq), row)

    def delete_session(self, session_id: str) -> None:
        for key in [key for key in self._state.index if key[0] == session_id]:
            del self._state.index[key]

    def search(
        self,
        terms: builtins.list[SearchTerm],
        session_id: str | None,
        limit: int,
        workspace_id: str | None = None,
    ) -> builtins.list[SearchHit]:
        hits = []
        for (row_session, seq), row in sorted(self._state.index.items()):
            words = [word.lower() for word in re.findall(r"\w+", row.text_content or "")]
            session = self._state.sessions.get(row_session)
            if workspace_id is not None and (
                session is None or session.workspace_id != workspace_id
            ):
                continue
            if session_id not in (None, row_session) or not all(
                _has_phrase(words, [word.lower() for word in term.words]) for term in terms
            ):
                continue
            snippet = row.text_content or ""
            hits.append(SearchHit(row_session, seq, row.kind, row.ts, snippet, 1.0))
        return hits[:limit]


def _has_phrase(words: builtins.list[str], phrase: builtins.list[str]) -> bool:
    return any(words[at : at + len(phrase)] == phrase for at in range(len(words)))


class FakeConsumers:
    """`ConsumerWrites` over `FakeState.consumers`."""

    def __init__(self, state: FakeState) -> None:
        self._state = state

    def get(self, name: str) -> StoredConsumer | None:
        return self._state.consumers.get(name)

    lock = get

    def list(self) -> builtins.list[StoredConsumer]:
        return [self._state.consumers[name] for name in sorted(self._state.consumers)]

    def list_with_next(self) -> builtins.list[tuple[StoredConsumer, int | None]]:
        return [
            (consumer, FakeEvents(self._state, []).recorded_at_after(consumer.position))
            for consumer in self.list()
        ]

    def lowest_live(self, floor: int, now_ms: int) -> tuple[int, str] | None:
        live = [
            (consumer.position, consumer.name)
            for consumer in self._state.consumers.values()
            if consumer.position >= floor
            and (
                consumer.max_idle_ms is None
                or (consumer.last_ack_at_ms or consumer.registered_at_ms) + consumer.max_idle_ms
                >= now_ms
            )
        ]
        return min(live) if live else None

    def insert(self, consumer: StoredConsumer) -> bool:
        if consumer.name in self._state.consumers:
            return False
        self._state.consumers[consumer.name] = consumer
        return True

    def delete(self, name: str) -> bool:
        return self._state.consumers.pop(name, None) is not None

    def notify_moved(self) -> None:
        pass

    def set_position(self, name: str, position: int, now_ms: int) -> None:
        consumer = self._state.consumers[name]
        self._state.consumers[name] = consumer._replace(position=position, last_ack_at_ms=now_ms)

    def ack(
        self, name: str, seq: int, now_ms: int, lease: tuple[str, int] | None = None
    ) -> bool | None:
        consumer = self._state.consumers.get(name)
        if consumer is None or seq > self._state.latest_seq:
            return None
        if lease is None:
            if _live(consumer):
                return False
        elif (consumer.holder, consumer.generation) != lease or not _live(consumer):
            return False
        position = max(consumer.position, seq)
        self._state.consumers[name] = consumer._replace(position=position, last_ack_at_ms=now_ms)
        return True

    def acquire(self, name: str, holder: str, ttl_ms: int) -> LeaseTaken | None:
        consumer = self._state.consumers.get(name)
        if consumer is None or (_live(consumer) and consumer.holder != holder):
            return None
        taken = LeaseTaken(consumer.generation + 1, _clock_ms() + ttl_ms)
        self._state.consumers[name] = consumer._replace(
            holder=holder, generation=taken.generation, lease_expires_at_ms=taken.expires_at_ms
        )
        return taken

    def holder_of(self, name: str) -> LeaseHolder | None:
        consumer = self._state.consumers.get(name)
        if consumer is None:
            return None
        return LeaseHolder(
            consumer.holder, consumer.generation, consumer.lease_expires_at_ms, _clock_ms()
        )

    def renew(self, name: str, holder: str, generation: int, ttl_ms: int) -> int | None:
        consumer = self._state.consumers.get(name)
        if (
            consumer is None
            or (consumer.holder, consumer.generation) != (holder, generation)
            or not _live(consumer)
        ):
            return None
        expires = _clock_ms() + ttl_ms
        self._state.consumers[name] = consumer._replace(lease_expires_at_ms=expires)
        return expires

    def release(self, name: str, holder: str, generation: int) -> bool:
        consumer = self._state.consumers.get(name)
        if consumer is None or (consumer.holder, consumer.generation) != (holder, generation):
            return False
        self._state.consumers[name] = consumer._replace(holder=None, lease_expires_at_ms=None)
        return True


def _clock_ms() -> int:
    """The database's clock in memory: the pinned time, else the host's."""
    pinned = DATABASE_CLOCK.argument()
    return int(time.time() * 1000) if pinned is None else pinned


def _live(consumer: StoredConsumer) -> bool:
    expires = consumer.lease_expires_at_ms
    return consumer.holder is not None and expires is not None and expires > _clock_ms()


class FakeUnitOfWork:
    """`WriteContext` (and, in a read, `ReadContext`) over one copy of the state."""

    def __init__(self, state: FakeState) -> None:
        self.state = state
        self.pending: list[tuple[str, int, str]] = []
        self.sessions = FakeSessions(state, self.pending)
        self.events = FakeEvents(state, self.pending)
        self.activity = FakeActivity(state)
        self.checkpoints = FakeCheckpoints(state)
        self.projection = FakeProjection(state)
        self.project_events = FakeProjectEvents(state)
        self.consumers = FakeConsumers(state)
        self.committed = False
        self.waiting: list[Callable[[], None]] = []  # run after the commit (`after_commit`)
        self.refusal: Exception | None = None  # why it may not commit (`refuse_commit`)

    def commit(self) -> None:
        if self.refusal is not None:
            raise type(self.refusal)(*self.refusal.args)
        self.committed = True

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.waiting.append(callback)

    def refuse_commit(self, error: Exception) -> None:
        self.refusal = error


class FakeTransactions:
    """`Transactions` in memory: `submit` runs a function on a copy of the state, which
    replaces the state only if the function called `commit()` and returned (seqs are assigned
    then); an exception, or no commit, leaves the state as it was."""

    def __init__(self, options: StoreOptions | None = None) -> None:
        self.options = options or StoreOptions()
        self.state = FakeState()
        self.actions: list[str] = []  # the `action` of every write submitted, in order
        self._after_commit: Callable[[], None] | None = None  # the followers' (`on_commit`)
        self.counters = StoreCounters()  # counted as the write path counts

    def submit(
        self,
        fn: Callable[[WriteContext], T],
        action: str = "write",
        uow: object = None,
        *,
        solo: bool = False,
    ) -> T:
        self.actions.append(action)  # every call is solo here
        if uow is not None:  # inside a unit of work: its work commits when the uow does
            assert isinstance(uow, FakeUnitOfWork)
            return fn(uow)
        started = time.perf_counter()
        try:
            return self._run(fn)
        finally:
            self.counters.write_call(time.perf_counter() - started)

    def _run(self, fn: Callable[[WriteContext], T]) -> T:
        uow = FakeUnitOfWork(copy.deepcopy(self.state))
        result = fn(uow)
        if uow.refusal is not None:  # refused (and caught): undone, as the write path does
            raise uow.refusal
        if uow.committed:
            appended = uow.events.flush()
            self.counters.committed(appended)
            self.state = uow.state
            if self._after_commit is not None:
                self._after_commit()
            run_after_commit(uow.waiting)
        return result

    def submit_lone(self, write: LoneWrite[T], action: str = "write", uow: object = None) -> T:
        # No short path in memory: a lone write is its work on a unit of work.
        return self.submit(write.run, action, uow)

    def check_followable(self, action: str) -> None:
        pass  # never closed

    loop_writes = None  # no event loop's connection in memory: an async twin uses its workers

    # What `Following` needs besides (`follow.following.FollowedDatabase`): in memory, no
    # other process commits, so there is no wake-up source.
    dialect_name = "memory"

    def dedicated_connection(self) -> Any:
        raise AssertionError("no wake-up source in memory")

    def on_commit(self, listener: Callable[[], None]) -> None:
        self._after_commit = listener

    def writing_in_this_thread(self) -> bool:
        return False  # a submitted function runs to its end before `submit` returns

    @contextmanager
    def reading(self, action: str = "read", uow: object = None) -> Iterator[ReadContext]:
        if uow is not None:
            assert isinstance(uow, FakeUnitOfWork)
            yield uow
            return
        yield FakeUnitOfWork(copy.deepcopy(self.state))  # whatever a read does is dropped

    def reading_one_statement(
        self, action: str = "read", uow: object = None
    ) -> AbstractContextManager[ReadContext]:
        return self.reading(action, uow)

    def events(self) -> list[tuple[str, ApiEventData]]:
        """Every committed event as `(session_id, body)`, in seq order."""
        return [(event.session_id, event.body) for event in self.state.events]


class FakeServices:
    """The real services over one `FakeTransactions`, as a `Store` builds them."""

    def __init__(self, transactions: FakeTransactions | None = None) -> None:
        self.fake = transactions or FakeTransactions()
        store: Transactions = self.fake  # mypy: the fake satisfies the services' protocol
        self.following = Following(self.fake)  # and `Following`'s
        self.sessions = SessionService(store)
        self.events = EventService(store, self.following)
        self.activity = ActivityService(store)
        self.faults = FaultService(store)
        self.checkpoints = CheckpointService(store)
        self.projection = ProjectionService(store)
        self.index = ProjectIndex(store)
        self.consumers = ConsumerService(store, self.events.load, self.following)
