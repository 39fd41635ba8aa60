"""API event bodies, activity snapshots and event pages: the stored JSON contract (spec/api.md).

An event body is stored and sent as `{"type": <tag>, "data": {<fields>}}`. The Python classes
keep their fields at the top level (`TurnStarted(turn_id=1, ...)`), dump themselves in the wrapped
form, and validate either form; the wrapped form is read by pydantic-core without Python code,
and a page decodes its events in one call of pydantic-core (`decode_events`), or is written as
JSON from the stored text without decoding (`event_texts`, `page_json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    AliasGenerator,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic_core import to_json

from ._json_text import canonical_json
from ._validation import Id
from ._values import Value, immutable
from .elicitation import ElicitationRequest
from .errors import InvalidRecord


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


@immutable
class ApiActivityDetails(Value):
    """Timestamps and label of the current activity."""

    kind: ApiActivityKind
    """What the session is doing."""
    turn_started_at_ms: int | None = None
    """When the current turn began (ms since the epoch)."""
    step_started_at_ms: int | None = None
    """When the current step of the turn began."""
    background_started_at_ms: int | None = None
    """When the current background work began."""
    idle_since_ms: int | None = None
    """When the session became idle."""
    last_activity_at_ms: int | None = None
    """When the session last did anything."""
    label: str | None = None
    """A short label of the current activity, for display."""


@immutable
class ApiActivityState(Value):
    """The latest activity snapshot of a session."""

    state: str
    """The controller's own word for the session's state."""
    details: ApiActivityDetails | None
    """Timestamps and label of the current activity, if known."""
    is_idle: bool
    """Whether the session is doing nothing."""
    waiting_for_input: bool
    """Whether the agent waits for an answer from its user."""
    capacity_retry: bool
    """Whether the session waits to retry for capacity."""

    def canonical_json(self) -> str:
        """Sorted keys, no insignificant whitespace: equal snapshots encode equally."""
        return canonical_json(self.model_dump(mode="json"))


@immutable
class TurnOutcome(Value):
    """The result of a turn; `stop_reason` as the agent reported it."""

    kind: TurnResultKind
    """How the turn ended."""
    stop_reason: str | None = None
    """The agent's own stop reason (`end_turn`, ...), when it gave one."""
    reason: OutcomeReason | None = None
    """Why the turn was refused or interrupted, when it was."""
    message: str | None = None
    """The agent's or controller's diagnostic, when there is one."""


@immutable
class ApiTurnOutcome(Value):
    """A turn's command, its accepted relay ordinal and its outcome."""

    command_id: str
    """The prompt command of the turn."""
    accepted_ordinal: int | None
    """The relay ordinal at which the prompt was accepted (the turn's `turn_id`); `null` for a
    command whose acceptance the projection never saw."""
    outcome: TurnOutcome
    """How the turn ended."""


@immutable
class CommandResult(Value):
    """The terminal fact of a command."""

    owner: CommandOwner
    """Who issued the command."""
    command_id: str
    """The command."""
    command_kind: str
    """The command's kind, as its issuer named it."""
    outcome: CommandResultKind
    """How the command ended."""
    reason: OutcomeReason | None = None
    """Why it failed or was cancelled, when it was."""
    message: str | None = None
    """A diagnostic, when there is one."""
    related_command_ids: tuple[str, ...] = ()
    """Other commands this result also settles (a checkpoint's barrier and save)."""


def _data_alias(name: str) -> str | AliasChoices:
    # Fields are read from `data.<name>` (stored form) or `<name>` (keyword construction).
    return name if name == "type" else AliasChoices(AliasPath("data", name), name)


class _Body(Value):
    __slots__ = ()
    __pydantic_config__ = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=_data_alias),
        validate_by_name=True,
        validate_by_alias=True,
    )

    @model_serializer(mode="wrap")
    def _wrapped(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        tag = fields.pop("type")
        return {"type": tag, "data": fields}


@immutable
class TurnStarted(_Body):
    """A prompt was accepted and its turn began."""

    type: Literal["turn_started"] = "turn_started"
    turn_id: int
    """The turn: the relay ordinal at which its prompt was accepted."""
    command_id: str
    """The prompt command that began the turn."""
    started_at_ms: int | None
    """When the relay reported the start, if it did."""


@immutable
class TurnEnded(_Body):
    """A turn ended; `turn.outcome` says how."""

    type: Literal["turn_ended"] = "turn_ended"
    turn: ApiTurnOutcome
    """The turn's command, accepted ordinal and outcome."""


@immutable
class InputRequired(_Body):
    """The agent asked the user a question and waits for the answer."""

    type: Literal["input_required"] = "input_required"
    request: ElicitationRequest | None
    """The question; `null` in bodies of older code that did not keep it."""
    turn_id: int | None
    """The turn the question was asked in; `null` outside a turn."""


@immutable
class InputResolved(_Body):
    """The user answered (accept), declined or cancelled a question."""

    type: Literal["input_resolved"] = "input_resolved"
    elicitation_id: str
    """The question answered (`ElicitationRequest.id`)."""
    action: str
    """`accept`, `decline` or `cancel`."""
    turn_id: int | None
    """The turn the question belonged to; `null` outside a turn."""


@immutable
class ActivityChanged(_Body):
    """The session's activity snapshot changed."""

    type: Literal["activity_changed"] = "activity_changed"
    activity: ApiActivityState
    """The new snapshot."""


@immutable
class SessionFault(_Body):
    """The session failed to start, failed a lifecycle step or its runtime faulted."""

    type: Literal["session_fault"] = "session_fault"
    reason: OutcomeReason
    """What failed."""
    message: str
    """What the controller or runtime said."""
    command_id: str | None = None
    """The command that faulted, if one did."""


@immutable
class CommandEnded(_Body):
    """A command reached its terminal result."""

    type: Literal["command_ended"] = "command_ended"
    result: CommandResult
    """The command's terminal result."""


@immutable
class LegacyNotice(_Body):
    """A stored body of an earlier shape, or one this code cannot decode, kept visible."""

    type: Literal["legacy_notice"] = "legacy_notice"
    original_type: str
    """The `type` tag of the body as it was stored."""
    command_id: str | None = None
    """The command the stored body named, if any."""
    message: str
    """Why the body is a notice: for a stored body that does not decode, why it does not."""


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


EVENT_TYPES: tuple[str, ...] = tuple(
    sorted(body.model_fields["type"].default for body in get_args(get_args(ApiEventData)[0]))
)
"""The `type` tags of API event bodies, sorted: what `ApiEventFilter.types` takes."""


def _event_types(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("must name at least one event type (None: every type)")
    unknown = sorted(set(value) - set(EVENT_TYPES))
    if unknown:
        raise ValueError(
            f"names unknown event types {unknown}; the known types are {', '.join(EVENT_TYPES)}"
        )
    return tuple(sorted(set(value)))


class ApiEventFilter(BaseModel):
    """Which events a page holds: every field optional, combined with AND.

    `types`: the body `type` tags to keep (`EVENT_TYPES`; duplicates merged, kept sorted; an
    empty or unknown one is refused). It matches the tag as stored: an event whose stored body
    does not decode is a `LegacyNotice` in the page but matches the tag its stored body carries,
    not `legacy_notice`."""

    model_config = ConfigDict(revalidate_instances="always")

    session_id: Id | None = None
    workspace_id: Id | None = None
    types: Annotated[tuple[str, ...], AfterValidator(_event_types)] | None = None


@immutable
class ApiEvent(Value):
    """One event of the ordered log. Read from the log, its body is decoded with the page (by
    pydantic-core, from the stored JSON); a body that does not decode is a `LegacyNotice`, never
    an error. Immutable all the way down, as every event type: the followers' window of a store
    decodes each event once and the pages it serves share the event objects."""

    seq: int
    session_id: str
    recorded_at_ms: int
    event: ApiEventData


@immutable
class ApiEventPage(Value):
    """A page of events after a cursor; continue with `after_seq=next_after_seq`.
    `pruned_through` is the floor of the pruned log in the page's snapshot (0: never pruned)."""

    events: tuple[ApiEvent, ...]
    next_after_seq: int
    latest_seq: int
    pruned_through: int = 0


@immutable
class ApiEventPageBefore(Value):
    """A page of the events before a seq, newest first (`load_before`); go further back with
    `before_seq=next_before_seq`. `next_before_seq` is the oldest returned seq, else the
    `before_seq` asked for: an empty page means nothing older (matching the filter) is retained.
    `latest_seq` and `pruned_through` are the frontier and the floor of the page's snapshot."""

    events: tuple[ApiEvent, ...]
    next_before_seq: int
    latest_seq: int
    pruned_through: int


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


StoredRow = tuple[int, str, int, str, bool]
"""An event as stored: `(seq, session_id, recorded_at_ms, body text, body_canonical)`."""

_EVENTS: TypeAdapter[tuple[ApiEvent, ...]] = TypeAdapter(tuple[ApiEvent, ...])
_SAFE_ID = re.compile(r"[A-Za-z0-9._:@-]+")  # the ids `check_id` accepts need no escaping


def event_texts(rows: Iterable[StoredRow]) -> list[str]:
    """The JSON of each stored event, exactly as `ApiEvent.model_dump_json()` writes the event
    it decodes to: a canonical body (`body_canonical`) is spliced in as stored, any other is
    decoded (a `LegacyNotice` if it does not decode) and encoded again."""
    quoted: dict[str, str] = {}
    texts = []
    for seq, session_id, recorded_at_ms, body, canonical in rows:
        name = quoted.get(session_id)
        if name is None:
            name = quoted[session_id] = _json_string(session_id)
        if not canonical:
            body = decode_body(body).model_dump_json()
        texts.append(
            f'{{"seq":{seq},"session_id":{name},"recorded_at_ms":{recorded_at_ms},"event":{body}}}'
        )
    return texts


def _json_string(value: str) -> str:
    if _SAFE_ID.fullmatch(value):
        return f'"{value}"'
    return to_json(value).decode()  # pydantic's own escaping, as `model_dump_json` does


def decode_events(rows: list[StoredRow], texts: list[str] | None = None) -> tuple[ApiEvent, ...]:
    """The events of stored rows (`texts`: their `event_texts`, if already made), decoded by
    pydantic-core in one call for the page; should that fail (a canonical body that this
    code's models no longer take), event by event, an undecodable body as a `LegacyNotice`."""
    if texts is None:
        texts = event_texts(rows)
    try:
        return _EVENTS.validate_json(f"[{','.join(texts)}]")
    except ValidationError:
        return tuple(_decode_one(row, text) for row, text in zip(rows, texts, strict=True))


def _decode_one(row: StoredRow, text: str) -> ApiEvent:
    try:
        return ApiEvent.model_validate_json(text)
    except ValidationError:
        seq, session_id, recorded_at_ms, body, _ = row
        return ApiEvent(
            seq=seq, session_id=session_id, recorded_at_ms=recorded_at_ms, event=decode_body(body)
        )


def page_json(texts: list[str], next_after_seq: int, latest_seq: int, pruned_through: int) -> bytes:
    """A page's JSON (UTF-8) from its events' `event_texts`: exactly what
    `ApiEventPage.model_dump_json()` writes for that page."""
    return (
        f'{{"events":[{",".join(texts)}],"next_after_seq":{next_after_seq},'
        f'"latest_seq":{latest_seq},"pruned_through":{pruned_through}}}'
    ).encode()


def page_before_json(
    texts: list[str], next_before_seq: int, latest_seq: int, pruned_through: int
) -> bytes:
    """A page's JSON (UTF-8) from its events' `event_texts`, newest first: exactly what
    `ApiEventPageBefore.model_dump_json()` writes for that page."""
    return (
        f'{{"events":[{",".join(texts)}],"next_before_seq":{next_before_seq},'
        f'"latest_seq":{latest_seq},"pruned_through":{pruned_through}}}'
    ).encode()


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
