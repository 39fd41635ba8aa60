"""API event bodies, activity snapshots and event pages: the stored JSON contract (spec/api.md).

An event body is stored and sent as `{"type": <tag>, "data": {<fields>}}`. The Python classes
keep their fields at the top level (`TurnStarted(turn_id=1, ...)`), dump themselves in the wrapped
form, and validate either form; the wrapped form is read by pydantic-core without Python code,
and an event of a page keeps its body undecoded until it is first used (`ApiEvent`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AliasChoices,
    AliasGenerator,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic.main import TupleGenerator

from .elicitation import ElicitationRequest
from .errors import InvalidRecord
from .json_text import canonical_json
from .validation import Id


class OutcomeReason(StrEnum):
    """Why a command, turn or session ended the way it did."""

    STARTUP_FAILED = "startup_failed"
    LIFECYCLE_FAILED = "lifecycle_failed"
    CHECKPOINT_FAILED = "checkpoint_failed"
    CHECKPOINT_DEFERRED = "checkpoint_deferred"
    CONTROLLER_RESTARTED = "controller_restarted"
    CONTROLLER_DISCONNECTED = "controller_disconnected"
    OWNER_LOST_ON_RESTART = "owner_lost_on_restart"
    COMMAND_FAILED = "command_failed"
    ADMISSION_REJECTED = "admission_rejected"
    RUNTIME_STOPPED = "runtime_stopped"
    RUNTIME_UNAVAILABLE = "runtime_unavailable"


class TurnResultKind(StrEnum):
    """How a turn ended."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    REJECTED = "rejected"
    INTERRUPTED = "interrupted"


class CommandOwner(StrEnum):
    """Who issued a command: the controller daemon or the session's relay."""

    DAEMON = "daemon"
    RELAY = "relay"


class CommandResultKind(StrEnum):
    """How a command ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


class ApiActivityKind(StrEnum):
    """What a session is doing."""

    IDLE = "idle"
    TURN = "turn"
    BACKGROUND = "background"


class ApiActivityDetails(BaseModel):
    """Timestamps and label of the current activity."""

    model_config = ConfigDict(revalidate_instances="always")

    kind: ApiActivityKind
    turn_started_at_ms: int | None = None
    step_started_at_ms: int | None = None
    background_started_at_ms: int | None = None
    idle_since_ms: int | None = None
    last_activity_at_ms: int | None = None
    label: str | None = None


class ApiActivityState(BaseModel):
    """The latest activity snapshot of a session."""

    model_config = ConfigDict(revalidate_instances="always")

    state: str
    details: ApiActivityDetails | None
    is_idle: bool
    waiting_for_input: bool
    capacity_retry: bool

    def canonical_json(self) -> str:
        """Sorted keys, no insignificant whitespace: equal snapshots encode equally."""
        return canonical_json(self.model_dump(mode="json"))


class TurnOutcome(BaseModel):
    """The result of a turn; `stop_reason` as the agent reported it."""

    kind: TurnResultKind
    stop_reason: str | None = None
    reason: OutcomeReason | None = None
    message: str | None = None


class ApiTurnOutcome(BaseModel):
    """A turn's command, its accepted relay ordinal and its outcome."""

    command_id: str
    accepted_ordinal: int | None
    outcome: TurnOutcome


class CommandResult(BaseModel):
    """The terminal fact of a command."""

    owner: CommandOwner
    command_id: str
    command_kind: str
    outcome: CommandResultKind
    reason: OutcomeReason | None = None
    message: str | None = None
    related_command_ids: list[str] = Field(default_factory=list)


def _data_alias(name: str) -> str | AliasChoices:
    # Fields are read from `data.<name>` (stored form) or `<name>` (keyword construction).
    return name if name == "type" else AliasChoices(AliasPath("data", name), name)


class _Body(BaseModel):
    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=_data_alias),
        validate_by_name=True,
        validate_by_alias=True,
    )

    @model_serializer(mode="wrap")
    def _wrapped(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        tag = fields.pop("type")
        return {"type": tag, "data": fields}


class TurnStarted(_Body):
    """A prompt was accepted and its turn began."""

    type: Literal["turn_started"] = "turn_started"
    turn_id: int
    command_id: str
    started_at_ms: int | None


class TurnEnded(_Body):
    """A turn ended; `turn.outcome` says how."""

    type: Literal["turn_ended"] = "turn_ended"
    turn: ApiTurnOutcome


class InputRequired(_Body):
    """The agent asked the user a question and waits for the answer."""

    type: Literal["input_required"] = "input_required"
    request: ElicitationRequest | None
    turn_id: int | None


class InputResolved(_Body):
    """The user answered (accept), declined or cancelled a question."""

    type: Literal["input_resolved"] = "input_resolved"
    elicitation_id: str
    action: str
    turn_id: int | None


class ActivityChanged(_Body):
    """The session's activity snapshot changed."""

    type: Literal["activity_changed"] = "activity_changed"
    activity: ApiActivityState


class SessionFault(_Body):
    """The session failed to start, failed a lifecycle step or its runtime faulted."""

    type: Literal["session_fault"] = "session_fault"
    reason: OutcomeReason
    message: str
    command_id: str | None = None


class CommandEnded(_Body):
    """A command reached its terminal result."""

    type: Literal["command_ended"] = "command_ended"
    result: CommandResult


class LegacyNotice(_Body):
    """A stored body of an earlier shape, or one this code cannot decode, kept visible."""

    type: Literal["legacy_notice"] = "legacy_notice"
    original_type: str
    command_id: str | None = None
    message: str


ApiEventData = Annotated[
    TurnStarted
    | TurnEnded
    | InputRequired
    | InputResolved
    | ActivityChanged
    | SessionFault
    | CommandEnded
    | LegacyNotice,
    Field(discriminator="type"),
]
"""Any API event body, discriminated by its `type` tag."""


class ApiEventFilter(BaseModel):
    """Which events a page holds: both fields optional, combined with AND."""

    model_config = ConfigDict(revalidate_instances="always")

    session_id: Id | None = None
    workspace_id: Id | None = None


class ApiEvent(BaseModel):
    """One event of the ordered log. An event read from the log decodes its stored body when it
    is first used; a body that does not decode becomes a `LegacyNotice`, never an error."""

    # Lazy bodies: a page holds each body as its stored text (`_stored_body`, `event` absent from
    # `__dict__`) and decodes it when `event` is first read, or when the event is dumped,
    # compared, printed, iterated, copied or pickled. A follower that pages through the log
    # looking only at seqs or sessions pays for the rows, not for bodies it never reads (README,
    # Performance). Code that reads `__dict__` directly, as `vars(event)` does, sees `event` only
    # once it is decoded. Pages may be shared between threads.
    seq: int
    session_id: str
    recorded_at_ms: int
    event: ApiEventData
    _stored_body: str | None = PrivateAttr(default=None)

    def _decode_stored(self) -> None:
        # Safe when threads race: the first body stored wins (an assignment made meanwhile
        # included), and everyone reads that one back from `__dict__`.
        private = self.__pydantic_private__  # None in a model that has no private values
        body = None if private is None else private.get("_stored_body")
        if body is None:
            return
        if "event" not in self.__dict__:
            self.__dict__.setdefault("event", decode_body(body))
        self._stored_body = None

    if not TYPE_CHECKING:  # as in BaseModel: keeps mypy's attribute checks on ApiEvent

        def __getattr__(self, name: str) -> Any:
            # Reached only while `event` is not in `__dict__`, i.e. not decoded yet.
            if name == "event":
                self._decode_stored()
                if "event" in self.__dict__:
                    return self.__dict__["event"]
            return super().__getattr__(name)

    # No return annotation: pydantic would take it as the serialized schema (`Any` gives `{}`);
    # without one, JSON schemas in serialization mode keep ApiEvent's fields.
    @model_serializer(mode="wrap")
    def _decoded(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        self._decode_stored()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        self._decode_stored()
        if isinstance(other, ApiEvent):
            other._decode_stored()
        return super().__eq__(other)

    def __iter__(self) -> TupleGenerator:
        self._decode_stored()
        yield from super().__iter__()

    # Copies and pickles take the decoded body: pydantic copies `__dict__` and the private
    # attributes one after the other, so a body decoded in between would be in neither.
    def __copy__(self) -> Self:
        self._decode_stored()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        self._decode_stored()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._decode_stored()
        return super().__getstate__()

    def __repr_args__(self) -> Any:
        self._decode_stored()
        return super().__repr_args__()


class ApiEventPage(BaseModel):
    """A page of events after a cursor; continue with `after_seq=next_after_seq`."""

    events: list[ApiEvent]
    next_after_seq: int
    latest_seq: int


EVENT_DATA: TypeAdapter[ApiEventData] = TypeAdapter(ApiEventData)


def validate_stored_body(body: str) -> ApiEventData:
    """The body a caller wrote for `uow.events.append`, which is stored as given: it must
    decode as an API event body *in the stored form*, `{"type": <tag>, "data": {<fields>}}`,
    with no key the body does not have, so that every reader of the table (older code, a SQL
    query) sees the one documented shape. `ValidationError` if it does not decode;
    `InvalidRecord` for a body that decodes only by the keyword form (fields beside `type`) or
    carries unknown keys."""
    decoded = EVENT_DATA.validate_json(body)
    raw = json.loads(body)
    data = raw.get("data") if isinstance(raw, dict) else None
    if set(raw) != {"type", "data"} or not isinstance(data, dict):
        raise InvalidRecord(
            'body must have the stored form {"type": ..., "data": {...}} and no other key, '
            f"got the keys {sorted(raw)}"
        )
    unknown = set(data) - set(type(decoded).model_fields)
    if unknown:
        raise InvalidRecord(
            f"body has data keys that {decoded.type} does not have: {sorted(unknown)}"
        )
    return decoded


_ALL_FIELDS = frozenset(ApiEvent.model_fields)


def stored_events(rows: Iterable[tuple[int, str, int, str]]) -> list[ApiEvent]:
    """Events of stored rows `(seq, session_id, recorded_at_ms, body text)`, bodies undecoded.

    Built without validation, through the pickle protocol (`__setstate__` with the state that
    `__getstate__` gives, which pydantic keeps loadable across releases so that pickles stay
    readable): the three scalars come from typed, NOT NULL columns, and the body is validated
    when it is decoded. `model_construct` does the same but costs more than the rest of a page
    read.
    """
    # One state dict for the page, whose values `__setstate__` takes over (one object less per
    # event); each event gets its own `model_fields_set`, which a caller may change.
    state: dict[str, Any] = {"__pydantic_extra__": None}
    new, events = ApiEvent.__new__, []
    for seq, session_id, recorded_at_ms, body in rows:
        event = new(ApiEvent)
        state["__dict__"] = {"seq": seq, "session_id": session_id, "recorded_at_ms": recorded_at_ms}
        state["__pydantic_fields_set__"] = set(_ALL_FIELDS)
        state["__pydantic_private__"] = {"_stored_body": body}
        event.__setstate__(state)
        events.append(event)
    return events


def decode_body(body: str) -> ApiEventData:
    """Decode a stored body; one that does not decode becomes a `LegacyNotice` saying why."""
    try:
        return EVENT_DATA.validate_json(body)
    except ValidationError as error:
        return _notice(body, error)


def _notice(body: str, error: ValidationError) -> LegacyNotice:
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit
        raw = None
    data = raw.get("data") if isinstance(raw, dict) else None
    tag = raw.get("type") if isinstance(raw, dict) else None
    command_id = data.get("command_id") if isinstance(data, dict) else None
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    reason = f"{where}: {first['msg']}" if where else first["msg"]  # whole-body errors: no place
    return LegacyNotice(
        original_type=tag if isinstance(tag, str) else "unknown",
        command_id=command_id if isinstance(command_id, str) else None,
        message=f"stored body does not decode ({reason})",
    )
