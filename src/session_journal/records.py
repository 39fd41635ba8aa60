"""Session records: the rows a controller saves, as pydantic models."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ._validation import Id, Text
from .api_events import ApiActivityState, ApiEventFilter


class SessionState(StrEnum):
    """Lifecycle state of a session (the `sessions.state` CHECK lists these)."""

    PROVISIONING = "provisioning"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    CLOSING = "closing"
    CLOSED = "closed"
    DESTROYING = "destroying"
    ERROR = "error"
    STARTUP_CLEANUP = "startup-cleanup"


def _check_rfc3339(value: str) -> str:
    # Python 3.11's fromisoformat accepts RFC 3339 (with `Z`); require a date, time and offset.
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an RFC 3339 timestamp: {value[:64]!r}") from None
    if "T" not in value.upper() or parsed.tzinfo is None:
        raise ValueError(f"not an RFC 3339 timestamp with an offset: {value[:64]!r}")
    return value


class CheckpointMetadata(BaseModel):
    """Where a session's last checkpoint archive is and which events it covers."""

    # Records are mutable and `model_construct` skips validation: a service validates the
    # instance it receives again, nested ones included (see `validation.Given`).
    model_config = ConfigDict(validate_assignment=True, revalidate_instances="always")

    archive_path: Text
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    created_at: Annotated[Text, AfterValidator(_check_rfc3339)]
    event_frontier: Annotated[int, Field(ge=0, le=2**63 - 1)]


class SessionRecord(BaseModel):
    """One agent session: identity, lifecycle state, last errors, last checkpoint."""

    model_config = ConfigDict(validate_assignment=True, revalidate_instances="always")

    id: Id
    project_id: Id
    workspace_id: Id = "default"
    state: SessionState = SessionState.PROVISIONING
    native_session_id: Text | None = None
    last_error: Text | None = None
    last_checkpoint_error: Text | None = None
    checkpoint: CheckpointMetadata | None = None


class CheckpointOperation(BaseModel):
    """The checkpoint in flight for a session: its owning command and the barrier commands sent
    on its behalf."""

    session_id: str
    command_id: str
    related_command_ids: list[str] = Field(default_factory=list)


class SessionSummary(BaseModel):
    """One session as a list of sessions shows it (`sessions.page`): the record, when its row
    was created and last saved (UTC), its latest activity snapshot and its open checkpoint
    operation, read together."""

    session: SessionRecord
    created_at: datetime
    updated_at: datetime
    activity: ApiActivityState | None = None
    checkpoint_operation: CheckpointOperation | None = None


class SessionPage(BaseModel):
    """A page of sessions, newest first by `created_at` (then by id, descending); the next
    page is `before=next_before`, `None` when this one reaches the oldest."""

    sessions: list[SessionSummary]
    next_before: str | None


class ConsumerStatus(BaseModel):
    """A durable consumer as one read found it (`store.consumers`): its filter, the position
    through which it acked, and how far behind the log it is at that read."""

    model_config = ConfigDict(frozen=True)

    name: str
    filter: ApiEventFilter
    """The events it reads (`ApiEventFilter()`: every event)."""
    position: int
    """The seq through which it acked: it goes on after it."""
    latest_seq: int
    """The frontier at the read that made this status."""
    lag: int
    """`latest_seq - position`, in seqs (events of other filters and holes included)."""
    lag_seconds: float
    """How long ago the first event after `position` was recorded, whatever its type (0 when
    there is none): how stale what the consumer made is."""
    registered_at_ms: int
    last_ack_at_ms: int | None
    """When it last acked (or was reset); `None`: never since it registered."""
    max_idle_s: float | None
    """How long it may go without acking and still hold retention back (`None`: always)."""
    holder: str | None = None
    """The holder of its lease (`consumers.acquire`), expired or not; `None`: no lease was taken,
    or the last was released."""
    generation: int = 0
    """How many leases were taken (0: none ever); an ack must carry the latest while it is
    live."""
    lease_expires_at_ms: int | None = None
    """When `holder`'s lease expires (or expired), by the database's clock; `None` with no
    holder."""
    stuck_after_s: float = 300.0
    """How long it may go without acking while events wait for it before it is `stuck`."""
    stuck: bool = False
    """Whether it is stuck at this read: the frontier is past its position and it has not acked
    (nor registered or been reset) for longer than `stuck_after_s`."""


class Histogram(BaseModel):
    """Observations counted by bucket (`store.metrics()`): `counts[i]` were at most
    `bounds_s[i]` seconds and above the bound before it; the last count is of those above every
    bound (Prometheus's `+Inf` bucket). Not cumulative: `cumulative()` gives Prometheus's
    form."""

    model_config = ConfigDict(frozen=True)

    bounds_s: tuple[float, ...]
    counts: tuple[int, ...]
    """One more than `bounds_s`."""
    sum_s: float
    """The observations' total, in seconds."""

    @property
    def count(self) -> int:
        """How many observations."""
        return sum(self.counts)

    def cumulative(self) -> tuple[int, ...]:
        """Each bucket's count with those of the buckets below it (the last: `count`)."""
        total, out = 0, []
        for count in self.counts:
            total += count
            out.append(total)
        return tuple(out)


class EventRate(BaseModel):
    """Events recorded per minute (`store.events.rate()`): `counts[i]` were recorded in the
    minute that starts `i` minutes after `start_ms` (ms since the epoch, a whole minute); the
    last is the current minute, still running. `as_of_seq` is the frontier of the read (the
    events stored through it are counted), `as_of_ms` the time of the count."""

    model_config = ConfigDict(frozen=True)

    MAX_MINUTES: ClassVar[int] = 60
    """The longest window `rate` counts."""

    as_of_seq: int
    as_of_ms: int
    """The clock of the process that counted, when it did (a client may be set apart)."""
    start_ms: int
    counts: tuple[int, ...]
    minute_ms: int = 60_000
    """A bucket's width (ms)."""


class StoreMetrics(BaseModel):
    """The store at one moment (`store.metrics()`): the database's part from one read (the
    frontier, the floor, sessions by state, every consumer's status), and this process's
    counts since the store opened (they start at 0 in each process and after `fork`: sum them
    across processes, as Prometheus does with `sum()`)."""

    model_config = ConfigDict(frozen=True)

    as_of_ms: int
    """When the database was read."""
    latest_seq: int
    """The frontier: the largest seq ever assigned."""
    pruned_through: int
    """The floor of the pruned log (0: never pruned)."""
    events_retained_max: int
    """`latest_seq - pruned_through`: at most this many events are stored (the seqs of deleted
    sessions' events are holes in it; `session-journal db stats` counts them exactly)."""
    sessions_by_state: dict[str, int]
    """How many sessions are in each state (every `SessionState`, 0 included)."""
    consumers: tuple[ConsumerStatus, ...]
    """Every durable consumer's status, by name (lag is `latest_seq - position`: no count)."""
    opened_at_ms: int
    """When this process opened the store (the counts below start there)."""
    write_calls: int
    """Write calls answered (committed, refused or failed), by this process: each transaction
    a service call without `uow=` hands the write path (a prune hands it one per batch)."""
    write_seconds: Histogram
    """Each write call's latency, from the call to its answer (waiting for the write path and
    the commit included)."""
    events_appended: int
    """Events this process's committed transactions appended."""
    commits: int
    """Write transactions this process committed (a batch of calls is one)."""
    wakeups: int
    """Times this process's commit signal woke its followers: once for each of its own
    commits, and, once a follower waits, once more for each commit the store's wake-up source
    sees (other processes' and its own again)."""
    followers_started: int
    """Followers started by this process, sync and async: `events.follow`, consumers'
    `follow`, and each `wait` and `wait_json` (which follow until they answer)."""
    followers_waiting: int
    """Followers waiting for a commit now (a web server's streams count as one)."""
    cursor_expired: int
    """`CursorExpired` errors raised in this process (a cursor or position below the floor)."""
    prunes: int
    """`events.prune` calls this process ran to their end."""
    prune_seconds: Histogram
    """Each prune's duration."""
