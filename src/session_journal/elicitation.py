"""Questions a session's agent asks its user (MCP/ACP form elicitation), and their answers.

A form's `requested_schema` is a flat JSON object schema: each property is a `string`, `number`,
`integer` or `boolean`, or a string `enum`; nested objects and arrays are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from ._validation import MAX_DEPTH, describe
from ._values import Value, frozen, immutable
from .errors import InvalidRecord

_PRIMITIVES = {"string", "number", "integer", "boolean"}


def _check_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    if schema.get("type") != "object":
        raise ValueError("requested_schema must be an object schema (type: object)")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ValueError("requested_schema.properties must be an object")
    for name, prop in properties.items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            raise ValueError(
                f"property {name!r} must be a string, number, integer, boolean or enum "
                "(nested objects and arrays are not supported)"
            )
        enum = prop.get("enum")
        if enum is not None and (
            prop["type"] != "string"
            or not isinstance(enum, list | tuple)
            or not all(isinstance(item, str) for item in enum)
        ):
            raise ValueError(f"property {name!r}: an enum must be a list of strings")
    required = schema.get("required", [])
    if not isinstance(required, list | tuple) or any(
        not isinstance(name, str) or name not in properties for name in required
    ):
        raise ValueError("requested_schema.required must list properties of the schema")
    return schema


class Accept(BaseModel):
    """The user answered the form."""

    action: Literal["accept"] = "accept"
    content: dict[str, str | int | float | bool]


class Decline(BaseModel):
    """The user declined to answer."""

    action: Literal["decline"] = "decline"


class Cancel(BaseModel):
    """The question was cancelled."""

    action: Literal["cancel"] = "cancel"


ElicitationResponse = Annotated[Accept | Decline | Cancel, Field(discriminator="action")]
"""The answer to an elicitation: `Accept(content)`, `Decline()` or `Cancel()`."""


def _frozen_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    frozen_schema: Mapping[str, Any] = frozen(schema, MAX_DEPTH)
    return frozen_schema


@immutable
class ElicitationRequest(Value):
    """A form question: a message and a flat JSON object schema describing the answer."""

    # Immutable, as the events that carry it: `requested_schema` is a `FrozenDict` (its lists
    # tuples), which compares and dumps as the `dict` it was made from.

    id: str
    session_id: str
    mode: Literal["form"] = "form"
    message: str
    requested_schema: Annotated[
        Mapping[str, Any], AfterValidator(_check_schema), AfterValidator(_frozen_schema)
    ]

    @classmethod
    def from_acp_params(cls, id: str, params: Mapping[str, Any]) -> ElicitationRequest:
        """Build a request from ACP/MCP form-elicitation params (`mode`, `sessionId`,
        `message`, `requestedSchema`); anything else is `InvalidRecord`."""
        if not isinstance(params, Mapping):
            raise InvalidRecord(f"elicitation {id!r}: params must be an object")
        if params.get("mode", "form") != "form":
            raise InvalidRecord(
                f"elicitation {id!r}: only form elicitation is supported, got {params['mode']!r}"
            )
        try:
            return cls.model_validate(
                {
                    "id": id,
                    "session_id": params.get("sessionId"),
                    "message": params.get("message"),
                    "requested_schema": params.get("requestedSchema"),
                }
            )
        except ValidationError as error:
            raise InvalidRecord(f"elicitation {id!r}: {describe(error)}") from None

    def reply_text(self, response: Accept | Decline | Cancel) -> str:
        """The transcript text of an answer: the message, a blank line, then one `name: value`
        line per answered property in schema order, or `(declined)` / `(cancelled)`."""
        if isinstance(response, Decline):
            return f"{self.message}\n\n(declined)"
        if isinstance(response, Cancel):
            return f"{self.message}\n\n(cancelled)"
        self._check_content(response.content)
        properties: Mapping[str, Any] = self.requested_schema.get("properties", {})
        lines = [
            f"{name}: {_text(response.content[name])}"
            for name in properties
            if name in response.content
        ]
        return f"{self.message}\n\n" + "\n".join(lines)

    def _check_content(self, content: dict[str, str | int | float | bool]) -> None:
        properties: Mapping[str, Any] = self.requested_schema.get("properties", {})
        for name, value in content.items():
            prop = properties.get(name)
            if prop is None:
                raise InvalidRecord(f"elicitation {self.id!r}: {name!r} is not in the schema")
            if not _matches(prop, value):
                raise InvalidRecord(
                    f"elicitation {self.id!r}: {name!r} = {value!r} does not match {prop}"
                )
        required = self.requested_schema.get("required", [])
        missing = [name for name in required if name not in content]
        if missing:
            raise InvalidRecord(f"elicitation {self.id!r}: required {missing} not answered")


def _matches(prop: Mapping[str, Any], value: object) -> bool:
    kind = prop["type"]
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, int | float)
    return isinstance(value, str) and value in prop.get("enum", [value])


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
