"""The rule of docs/api/errors.md ("Constructors and calls"): constructing any pydantic model the
package exports with bad values raises pydantic's `ValidationError`; the options objects raise
`InvalidRecord` when made; a call of a service or a repository raises `InvalidRecord`, also
for a model made without validation (`tests/integration/test_bad_input.py`, both backends)."""

from __future__ import annotations

import pydantic
import pytest

import session_journal
from session_journal import ApiEventFilter, InvalidRecord, StoreOptions
from session_journal._values import Value

MODELS = sorted(
    name
    for name in session_journal.__all__
    if isinstance(model := getattr(session_journal, name), type)
    and issubclass(model, pydantic.BaseModel | Value)  # models, and the events' value classes
)


def test_the_exported_models_are_the_ones_the_rule_names() -> None:
    assert {"ApiEventFilter", "SessionRecord", "CheckpointMetadata", "ApiEvent"} <= set(MODELS)
    assert len(MODELS) == 26  # a new model is a new row of this rule: look at it


@pytest.mark.parametrize("name", MODELS)
def test_constructing_a_model_with_bad_values_raises_validation_error(name: str) -> None:
    model: type[pydantic.BaseModel | Value] = getattr(session_journal, name)
    with pytest.raises(pydantic.ValidationError):
        model(**{field: object() for field in model.model_fields})


def test_a_filter_of_no_types_is_a_validation_error_when_made() -> None:
    with pytest.raises(pydantic.ValidationError, match="must name at least one event type"):
        ApiEventFilter(types=[])


def test_options_are_checked_when_made_and_raise_invalid_record() -> None:
    with pytest.raises(InvalidRecord, match="max_body_bytes must be an integer"):
        StoreOptions(max_body_bytes="many")  # type: ignore[arg-type]
