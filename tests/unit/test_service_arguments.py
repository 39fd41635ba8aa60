"""`validation.validate_arguments`, the one check of service arguments, and the models it
validates again (`revalidate_instances`). No database: the services run on `tests.fakes`."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEventFilter,
    CheckpointMetadata,
    InvalidRecord,
    SessionRecord,
)
from session_journal._arguments import Int64, validate_arguments
from session_journal._validation import Id
from session_journal._values import Value
from session_journal.relay import RelayEvent
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
