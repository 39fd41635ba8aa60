"""`validation.validate_arguments`, the one check of service arguments, and the models it
validates again (`revalidate_instances`). No database: the services run on `tests.fakes`."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, validate_call

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEventFilter,
    CheckpointMetadata,
    InvalidRecord,
    SessionRecord,
)
from session_journal._arguments import (
    Given,
    Int64,
    Passed,
    _plain_test,
    _PlainArguments,
    validate_arguments,
)
from session_journal._validation import I64_MAX, Id, check_id, is_id
from session_journal._values import Value
from session_journal.relay import RelayEvent
from session_journal.services.events import EventService
from session_journal.services.faults import FaultService
from session_journal.storage.unit_of_work import ReadUnitOfWork, UnitOfWork
from tests.fakes import FakeServices

SERVICE_ARGUMENT_MODELS = [SessionRecord, ApiEventFilter, ApiActivityState, RelayEvent]


def reachable_models(
    annotation: Any, seen: set[type[BaseModel | Value]]
) -> set[type[BaseModel | Value]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel | Value):
        if annotation not in seen:
            seen.add(annotation)
            for info in annotation.model_fields.values():
                reachable_models(info.annotation, seen)
        return seen
    for argument in typing.get_args(annotation):
        reachable_models(argument, seen)
    return seen


def test_every_model_a_service_receives_is_validated_again_to_the_leaves() -> None:
    """A model is validated again when a service receives it; a value (the events' classes)
    needs not be: it is made validated only and never changes."""
    models: set[type[BaseModel | Value]] = set()
    for model in SERVICE_ARGUMENT_MODELS:
        reachable_models(model, models)
    assert CheckpointMetadata in models and ApiActivityDetails in models
    lazy = sorted(
        model.__name__
        for model in models
        if issubclass(model, BaseModel)
        and model.model_config.get("revalidate_instances") != "always"
    )
    assert lazy == []
    values = sorted(model.__name__ for model in models if issubclass(model, Value))
    assert values == ["ApiActivityDetails", "ApiActivityState", "ElicitationRequest"]


def test_a_nested_record_built_without_validation_is_refused_with_its_path() -> None:
    services = FakeServices()
    metadata = CheckpointMetadata.model_construct(
        archive_path="/a", sha256="ABC", created_at="2026-11-29T10:00:00Z", event_frontier=0
    )
    record = SessionRecord.model_construct(id="s", project_id="p", checkpoint=metadata)
    with pytest.raises(
        InvalidRecord, match=r"^session record 's': checkpoint\.sha256: String should match"
    ):
        services.sessions.save(record)
    assert services.fake.actions == []


def test_a_value_is_made_validated_only_and_never_changes() -> None:
    """What lets a service take a value as it is: no way to make one unvalidated, or to
    change one once made."""
    assert not hasattr(ApiActivityDetails, "model_construct")
    with pytest.raises(ValidationError, match="kind"):
        ApiActivityDetails(kind="busy")  # type: ignore[arg-type]
    details = ApiActivityDetails(kind=ApiActivityKind.IDLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        details.kind = "busy"  # type: ignore[misc, assignment]
    state = ApiActivityState(
        state="x", details=details, is_idle=True, waiting_for_input=False, capacity_retry=False
    )
    services = FakeServices()
    services.sessions.save(SessionRecord(id="s", project_id="p"))
    services.activity.record([("s", state)], 1)
    assert services.activity.get("s") == state


def test_the_service_receives_a_validated_copy_not_the_callers_instance() -> None:
    services = FakeServices()
    record = SessionRecord(id="s", project_id="p")
    services.sessions.save(record)
    record.project_id = "changed"  # the caller's object; the stored one is unaffected
    stored = services.sessions.get("s")
    assert stored is not None and stored.project_id == "p"


def test_every_bad_argument_is_named_in_one_error() -> None:
    services = FakeServices()
    with pytest.raises(InvalidRecord) as raised:
        services.checkpoints.correlate_barrier(1, "", "ok")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "session_id must be a string, got int; operation_id: invalid id '': expected 1-128 "
        "characters of [A-Za-z0-9._:@-], not '.' or '..'"
    )


def test_activities_are_read_once_from_any_iterable() -> None:
    services = FakeServices()
    state = ApiActivityState(
        state="idle",
        details=ApiActivityDetails(kind=ApiActivityKind.IDLE),
        is_idle=True,
        waiting_for_input=False,
        capacity_retry=False,
    )
    services.sessions.save(SessionRecord(id="s", project_id="p"))
    assert services.activity.record((pair for pair in [("s", state)]), 1) == 1
    with pytest.raises(InvalidRecord, match=r"^activities\[0\] must be a \(session_id, state\)"):
        services.activity.record([["s", state]], 1)  # type: ignore[list-item]


def test_a_call_that_does_not_bind_is_a_type_error() -> None:
    services = FakeServices()
    with pytest.raises(TypeError, match=r"SessionService.get\(\): missing required argument"):
        services.sessions.get()  # type: ignore[call-arg]
    with pytest.raises(
        TypeError,
        match="missing required argument 'session_id'; unexpected keyword argument 'sessionid'",
    ):
        services.sessions.get(sessionid="s")  # type: ignore[call-arg]


@validate_arguments(count="the count")
def _body_raises(session_id: Id, count: Int64) -> int:
    ApiEventFilter(session_id="../x")  # a ValidationError of the body, not of an argument
    return count


def test_a_validation_error_of_the_body_is_not_an_argument_error() -> None:
    with pytest.raises(ValidationError):
        _body_raises("s", 1)
    with pytest.raises(InvalidRecord, match=r"^the count must be between 0 and \d+, got -1$"):
        _body_raises("s", -1)
    with pytest.raises(InvalidRecord, match=r"^the count must be an integer, got bool$"):
        _body_raises("s", True)


def test_a_read_has_no_commit() -> None:
    assert hasattr(UnitOfWork, "commit")
    assert not hasattr(ReadUnitOfWork, "commit")


# --- plain arguments: the calls that skip pydantic (`_arguments._PlainArguments`) -----------


class _Text(str):
    pass


class _Number(int):
    pass


_HINTS: list[Any] = [
    str,
    int,
    bool,
    Id,
    Int64,
    str | None,
    Id | None,
    typing.Optional[Int64],  # noqa: UP045 (the other spelling of an optional hint)
    Passed[object],
    Given[SessionRecord] | None,
    float,
    list[str],
]
_VALUES: list[Any] = [
    "s",
    "",
    ".",
    "..",
    "a" * 128,
    "a" * 129,
    "a b",
    "é",
    "a\n",
    _Text("s"),
    0,
    -1,
    I64_MAX,
    I64_MAX + 1,
    _Number(3),
    True,
    False,
    None,
    1.0,
    b"s",
    ["s"],
    SessionRecord(id="s", project_id="p"),
    object(),
]


@pytest.mark.parametrize("hint", _HINTS, ids=[str(index) for index in range(len(_HINTS))])
def test_a_plain_test_accepts_only_what_pydantic_accepts_and_passes_it_on_unchanged(
    hint: Any,
) -> None:
    adapter = TypeAdapter(hint, config=ConfigDict(strict=True))
    test = _plain_test(hint)
    accepted = []
    for value in _VALUES:
        if test(value):
            accepted.append(value)
            assert adapter.validate_python(value) is value, (hint, value)
    # and it is not a test that refuses everything: each hint takes what its calls pass
    plain = {str: "s", int: 0, bool: True, Id: "s", Int64: I64_MAX}
    expected = next((v for h, v in plain.items() if h == hint or hint == h | None), None)
    if expected is not None:
        assert expected in accepted and (None in accepted) == (hint != _unwrap_optional(hint))


def _unwrap_optional(hint: Any) -> Any:
    options = [o for o in typing.get_args(hint) if o is not type(None)]
    return options[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) else hint


def _sample(session_id: Id, message: str, count: Int64 = 0, *, flag: bool = False) -> tuple:  # type: ignore[type-arg]
    return (session_id, message, count, flag)


_CALLS: list[tuple[tuple[Any, ...], dict[str, Any], bool]] = [
    (("s", "m"), {}, True),
    (("s", "m", 5), {"flag": True}, True),
    (("s",), {"message": "m"}, True),
    ((), {"session_id": "s", "message": "m", "count": 1}, True),
    (("s",), {}, False),  # missing: pydantic's TypeError
    (("s", "m"), {"session_id": "t"}, False),  # given twice
    (("s", "m"), {"other": 1}, False),  # unknown
    (("s", "m", 1, True), {}, False),  # too many positional
    (("s", "m"), {"flag": 1}, False),  # refused by pydantic
    (("s", "m", -1), {}, False),
    (("..", "m"), {}, False),
    ((_Text("s"), "m"), {}, False),  # taken by pydantic, which checks it
]


@pytest.mark.parametrize(
    ("args", "kwargs", "plain"), _CALLS, ids=[str(index) for index in range(len(_CALLS))]
)
def test_a_call_is_plain_only_if_pydantic_would_run_it_with_the_same_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], plain: bool
) -> None:
    rules = _PlainArguments(_sample)
    assert rules.accept(args, kwargs) is plain
    if plain:
        strict = validate_call(config=ConfigDict(strict=True))(_sample)
        assert strict(*args, **kwargs) == _sample(*args, **kwargs)


def test_the_common_calls_are_plain() -> None:
    """The hot calls skip pydantic: ids, strings, seqs and `None` for a filter."""
    fault = _PlainArguments(FaultService.record_startup_fault.__wrapped__)  # type: ignore[attr-defined]
    load = _PlainArguments(EventService.load.__wrapped__)  # type: ignore[attr-defined]
    assert fault.accept((object(), "s", "m"), {})
    assert fault.accept((object(), "s", "m"), {"uow": None})
    assert load.accept((object(), None, 5, 100), {})
    assert load.accept((object(),), {"after_seq": 5})
    assert not load.accept((object(), ApiEventFilter(session_id="s")), {})  # a record: pydantic


def _variadic(session_id: Id, *more: str) -> None:
    pass


def _unresolved(session_id: NotImported) -> None:  # type: ignore[name-defined]  # noqa: F821
    pass


@pytest.mark.parametrize("fn", [_variadic, _unresolved])
def test_no_call_is_plain_when_a_parameter_is_variadic_or_a_hint_does_not_resolve(
    fn: Any,
) -> None:
    rules = _PlainArguments(fn)
    for args, kwargs in [(("s",), {}), (("s", "t"), {}), ((), {"session_id": "s"}), ((), {})]:
        assert not rules.accept(args, kwargs)


@pytest.mark.parametrize(
    "value",
    [
        "s",
        "a" * 128,
        "a" * 129,
        "",
        ".",
        "..",
        "...",
        "a.b",
        "A-z_0:9@x",
        "a b",
        "a/b",
        "a\n",
        "é",
        "\u0661",
        "\uff41",
        "a\x00",
        "-",
        "@:",
    ],
)
def test_the_plain_id_test_is_the_id_rule(value: str) -> None:
    """`is_id` (the plain test) and `check_id` (the rule pydantic runs) agree on every text."""
    try:
        check_id(value)
        valid = True
    except ValueError:
        valid = False
    assert is_id(value) is valid
