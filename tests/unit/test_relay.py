"""Pure relay code: JSON form, digest, chain builder, elicitation forms, stop reasons."""

from __future__ import annotations

import hashlib
import itertools
import json
import pickle
import weakref
from types import MappingProxyType

import pytest
from pydantic import ValidationError

from session_journal import InvalidRecord, TurnResultKind
from session_journal._values import FrozenDict
from session_journal.relay import (
    Accept,
    AgentMessage,
    Cancel,
    ContentBlock,
    Decline,
    ElicitationRequest,
    MaterializedSession,
    RelayChain,
    RelayEvent,
    RuntimeFault,
    relay_event_digest,
    turn_result_kind,
)
from tests.factories import relay_turn

SCHEMA = {
    "type": "object",
    "properties": {
        "directory": {"type": "string"},
        "depth": {"type": "integer"},
        "ratio": {"type": "number"},
        "recursive": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "thorough"]},
    },
    "required": ["directory"],
}


def form(schema: dict[str, object] | None = None) -> ElicitationRequest:
    return ElicitationRequest.from_acp_params(
        "question-1",
        {
            "mode": "form",
            "sessionId": "s",
            "message": "Which directory?",
            "requestedSchema": schema or SCHEMA,
        },
    )


def test_the_json_form_and_the_digest() -> None:
    event = RelayEvent(
        ordinal=1,
        previous_digest="",
        digest="",
        recorded_at_ms=100,
        observation=AgentMessage(message_id="m-1", text="héllo"),
    )
    assert event.model_dump(mode="json") == {
        "format": 1,
        "ordinal": 1,
        "previous_digest": "",
        "digest": "",
        "recorded_at_ms": 100,
        "command_id": None,
        "observation": {"type": "agent_message", "message_id": "m-1", "text": "héllo"},
    }
    canonical = (
        '{"command_id":null,"format":1,"observation":{"message_id":"m-1","text":"héllo",'
        '"type":"agent_message"},"ordinal":1,"previous_digest":"","recorded_at_ms":100}'
    )
    expected = hashlib.sha256(canonical.encode()).hexdigest()
    assert relay_event_digest(event) == expected
    assert relay_event_digest(event.model_copy(update={"digest": "anything"})) == expected


def test_the_chain_builder_links_events() -> None:
    chain = RelayChain()
    events = chain.extend(relay_turn(), recorded_at_ms=5)
    assert [event.ordinal for event in events] == [1, 2, 3]
    assert events[0].previous_digest == ""
    for before, after in itertools.pairwise(events):
        assert after.previous_digest == before.digest
    assert all(event.digest == relay_event_digest(event) for event in events)
    resumed = RelayChain.after(
        MaterializedSession(
            session_id="s", applied_event_ordinal=3, applied_event_digest=events[2].digest
        )
    )
    assert resumed.append(relay_turn()[0], recorded_at_ms=5).previous_digest == events[2].digest


def test_the_earlier_session_fault_tag_decodes_as_a_runtime_fault() -> None:
    event = RelayEvent.model_validate_json(
        '{"ordinal":1,"previous_digest":"","digest":"d","recorded_at_ms":1,'
        '"observation":{"type":"session_fault","reason":"runtime_unavailable","message":"x"}}'
    )
    assert isinstance(event.observation, RuntimeFault)
    assert event.model_dump(mode="json")["observation"]["type"] == "session_fault"


def test_content_blocks_keep_unknown_block_types() -> None:
    image = ContentBlock.model_validate({"type": "image", "data": "AAAA", "mimeType": "image/png"})
    assert image.model_dump() == {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    with pytest.raises(ValidationError, match="text block needs"):
        ContentBlock(type="text")


@pytest.mark.parametrize(
    ("stop_reason", "kind"),
    [
        ("end_turn", TurnResultKind.COMPLETED),
        ("MAX_TOKENS", TurnResultKind.COMPLETED),
        ("max_turn_requests", TurnResultKind.COMPLETED),
        ("refusal", TurnResultKind.COMPLETED),
        ("Cancelled", TurnResultKind.CANCELLED),
        ("QuotaLimit", TurnResultKind.FAILED),
        ("provider_error", TurnResultKind.FAILED),
        ("", TurnResultKind.FAILED),
    ],
)
def test_turn_result_kind(stop_reason: str, kind: TurnResultKind) -> None:
    assert turn_result_kind(stop_reason) is kind


def test_reply_text_lists_answers_in_schema_order() -> None:
    request = form()
    answer = Accept(content={"recursive": True, "directory": "src", "depth": 2, "mode": "fast"})
    assert request.reply_text(answer) == (
        "Which directory?\n\ndirectory: src\ndepth: 2\nrecursive: true\nmode: fast"
    )
    assert request.reply_text(Accept(content={"directory": "src"})) == (
        "Which directory?\n\ndirectory: src"
    )
    assert request.reply_text(Decline()) == "Which directory?\n\n(declined)"
    assert request.reply_text(Cancel()) == "Which directory?\n\n(cancelled)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"directory": 3}, "'directory' = 3 does not match"),
        ({"directory": "src", "depth": True}, "'depth' = True does not match"),
        ({"directory": "src", "depth": 1.5}, "'depth' = 1.5 does not match"),
        ({"directory": "src", "mode": "slow"}, "'mode' = 'slow' does not match"),
        ({"directory": "src", "color": "red"}, "'color' is not in the schema"),
        ({"depth": 1}, r"required \['directory'\] not answered"),
    ],
)
def test_accept_content_must_satisfy_the_schema(content: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        form().reply_text(Accept(content=content))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"mode": "url", "sessionId": "s", "message": "m", "requestedSchema": SCHEMA},
            "only form elicitation",
        ),
        ({"sessionId": "s", "requestedSchema": SCHEMA}, "message"),
        (
            {
                "sessionId": "s",
                "message": "m",
                "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}},
            },
            "nested objects and arrays",
        ),
        (
            {
                "sessionId": "s",
                "message": "m",
                "requestedSchema": {"type": "object", "properties": {"a": {"type": "array"}}},
            },
            "nested objects and arrays",
        ),
        (
            {"sessionId": "s", "message": "m", "requestedSchema": {"type": "string"}},
            "must be an object schema",
        ),
        (
            {
                "sessionId": "s",
                "message": "m",
                "requestedSchema": {"type": "object", "properties": {}, "required": ["x"]},
            },
            "required must list properties",
        ),
        (
            {
                "sessionId": "s",
                "message": "m",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"a": {"type": "integer", "enum": ["x"]}},
                },
            },
            "an enum must be a list of strings",
        ),
    ],
)
def test_from_acp_params_refuses_anything_but_a_flat_form(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRecord, match=message):
        ElicitationRequest.from_acp_params("question-1", params)
    with pytest.raises(InvalidRecord, match="params must be an object"):
        ElicitationRequest.from_acp_params("question-1", "form")  # type: ignore[arg-type]


def _deep(levels: int) -> dict[str, object]:
    nested: dict[str, object] = {}
    for _ in range(levels):
        nested = {"x": nested}
    return nested


def _cyclic() -> dict[str, object]:
    loop: dict[str, object] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (_deep(100), "nests too deep"),
        (_cyclic(), "nests too deep"),
        ({"tags": {"a", "b"}}, "holds a set, which is not a JSON value"),
        ({1: "one"}, "has a key that is not a string"),
    ],
    ids=["nested 100 deep", "refers to itself", "a set", "a key not a string"],
)
def test_a_schema_that_is_not_json_is_refused(extra: object, message: str) -> None:
    """What a question's schema may hold is what its stored JSON can: hostile input is an
    `InvalidRecord`, never a `RecursionError` or a value that stays changeable."""
    schema = {**SCHEMA, "x-extra": extra}
    with pytest.raises(InvalidRecord, match=message):
        ElicitationRequest.from_acp_params(
            "question-1", {"sessionId": "s", "message": "m", "requestedSchema": schema}
        )


def test_a_schema_is_a_frozen_copy_of_any_mapping_given() -> None:
    properties = {"dir": {"type": "string", "enum": ["src", "tests"]}}
    view = MappingProxyType(properties)  # a live view of the caller's dict
    request = ElicitationRequest(
        id="q", session_id="s", message="m", requested_schema={"type": "object", "properties": view}
    )
    properties["dir"] = {"type": "boolean"}  # the caller changes its own dict afterwards
    assert request.requested_schema == {
        "type": "object",
        "properties": {"dir": {"type": "string", "enum": ("src", "tests")}},
    }
    assert isinstance(request.requested_schema["properties"], FrozenDict)
    assert pickle.loads(pickle.dumps(request)) == request
    assert json.loads(request.model_dump_json())["requested_schema"]["properties"] == {
        "dir": {"type": "string", "enum": ["src", "tests"]}
    }
    assert weakref.ref(request)() is request
