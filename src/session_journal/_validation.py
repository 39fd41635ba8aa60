"""Pure input rules shared by records, bodies and service arguments (no I/O)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

from pydantic import AfterValidator, BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from ._values import Value
from .errors import InvalidRecord

_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
# seq and timestamps are stored as BIGINT.
I64_MAX = 2**63 - 1


def check_id(value: str) -> str:
    """Ids name directories: 1-128 chars of `[A-Za-z0-9._:@-]`, never `.` or `..`."""
    if not _ID.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"invalid id {value[:140]!r}: expected 1-128 characters of [A-Za-z0-9._:@-], "
            "not '.' or '..'"
        )
    return value


def check_text(value: str) -> str:
    """Text stored in a plain text column: no NUL (PostgreSQL refuses it), valid Unicode."""
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    check_unicode(value)
    return value


def path_argument(value: object, name: str, what: str, consequence: str) -> str:
    """The text of a path argument: a non-empty `str`, or an `os.PathLike` whose path is one
    (a bytes path is not: the files' names are text); otherwise `InvalidRecord` naming `name`,
    `what` it must be and the `consequence` ("nothing was removed")."""
    try:
        path = os.fspath(value)  # type: ignore[call-overload]
    except TypeError:
        path = None
    if not isinstance(path, str) or not path:
        given = "an empty path" if path == "" else type(value).__name__
        raise InvalidRecord(
            f"{name} must be {what} (a str or an os.PathLike of str), got {given}; {consequence}"
        )
    return path


def check_unicode(value: str) -> str:
    """Reject lone surrogates, which no database encoding can store."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"contains a lone surrogate at position {error.start}") from None
    return value


Id = Annotated[str, AfterValidator(check_id)]
"""A validated identifier (session, project, workspace, command)."""

Text = Annotated[str, AfterValidator(check_text)]
"""Text for a plain text column."""


def describe(error: ValidationError) -> str:
    """One line naming each failing field and why."""
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "value"
        parts.append(f"{where}: {item['msg']}")
    return f"{error.title}: " + "; ".join(parts)


def require_id(value: Any, what: str) -> str:
    """Validate an id given to a repository of the public unit of work (`InvalidRecord` naming
    `what`). Service arguments are checked by `arguments.validate_arguments`."""
    if not isinstance(value, str):
        raise InvalidRecord(f"{what} must be a string, got {type(value).__name__}")
    try:
        return check_id(value)
    except ValueError as error:
        raise InvalidRecord(f"{what}: {error}") from None


def optional_id(value: Any, what: str) -> str | None:
    """Like `require_id`, allowing `None`."""
    return None if value is None else require_id(value, what)


def require_int(value: Any, what: str, *, minimum: int = 0) -> int:
    """An integer given to a repository in `minimum..I64_MAX` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecord(f"{what} must be an integer, got {type(value).__name__}")
    if not minimum <= value <= I64_MAX:
        raise InvalidRecord(f"{what} must be between {minimum} and {I64_MAX}, got {value}")
    return value


MAX_DEPTH = 64
"""The deepest nesting of objects and arrays a stored JSON body may have."""


def check_json_depth(text: str, what: str) -> str:
    """`InvalidRecord` if the JSON text nests objects and arrays deeper than `MAX_DEPTH`
    (bodies that deep could not be read back)."""
    if text.count("{") + text.count("[") <= MAX_DEPTH:  # cannot be deeper: skip the scan
        return text
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                raise InvalidRecord(f"{what} nests deeper than {MAX_DEPTH} levels")
        elif char in "}]":
            depth -= 1
    return text


class EncodedJson(str):
    """JSON text that `encode_json` made from a validated model: the repositories store it
    without checking it again. Plain `str` bodies given to a repository are checked in full."""

    __slots__ = ()


def encode_json(model: BaseModel | Value, what: str, max_bytes: int) -> EncodedJson:
    """The model's JSON text for a JSON column, or `InvalidRecord` naming `what`.

    Refuses text that no database can store (lone surrogates), bodies over `max_bytes` and
    nesting deeper than `MAX_DEPTH`. (pydantic writes non-finite floats as `null`.)
    """
    try:
        text = model.model_dump_json()
    except PydanticSerializationError as error:
        raise InvalidRecord(f"{what} cannot be encoded as JSON: {error}") from None
    check_json_size(text, what, max_bytes)
    return EncodedJson(check_json_depth(text, what))


class JsonTemplate:
    """What `encode_json` makes of a model whose one string field varies, for a hot path: the
    text around that field's JSON string is taken once from the model's own encoding, and `fill`
    encodes only the string (pydantic-core's `to_json`, the serializer the model's encoding
    uses), with `encode_json`'s checks and errors. `make(text)` builds the model with `text` in
    the field; the field's text must not change the rest of the encoding (no other field derives
    from it). `tests/unit/test_json_template.py` holds `fill` to `encode_json` for every kind of
    text."""

    __slots__ = ("_prefix", "_suffix")

    _MARKER = "\x00session-journal: the open field\x00"

    def __init__(self, make: Callable[[str], BaseModel | Value]) -> None:
        encoded = to_json(self._MARKER).decode()
        text = make(self._MARKER).model_dump_json()
        if text.count(encoded) != 1:
            raise ValueError(f"the open field is not one string of the encoding: {text}")
        self._prefix, self._suffix = text.split(encoded)

    def fill(self, value: str, what: str, max_bytes: int) -> EncodedJson:
        """`encode_json(make(value), what, max_bytes)`, encoding only `value`."""
        try:
            string = to_json(value).decode()
        except PydanticSerializationError as error:
            raise InvalidRecord(f"{what} cannot be encoded as JSON: {error}") from None
        text = self._prefix + string + self._suffix
        if len(text) * 4 > max_bytes:  # `to_json` refused lone surrogates: only the size is left
            check_json_size(text, what, max_bytes)
        return EncodedJson(text)


def check_json_size(text: str, what: str, max_bytes: int) -> str:
    """`InvalidRecord` if `text` is over `max_bytes` encoded as UTF-8, or holds a lone
    surrogate (no database encoding can store one)."""
    if len(text) * 4 > max_bytes:  # UTF-8 takes at most 4 bytes a character: else it fits
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise InvalidRecord(
                f"{what} contains a lone surrogate at position {error.start}"
            ) from None
        if size > max_bytes:
            raise InvalidRecord(f"{what} is {size} bytes encoded, over the limit of {max_bytes}")
    else:
        try:
            check_unicode(text)
        except ValueError as error:
            raise InvalidRecord(f"{what} {error}") from None
    return text


def check_standard_json(text: str, what: str) -> str:
    """`InvalidRecord` if `text` uses `NaN`, `Infinity` or `-Infinity`, which Python's and
    pydantic's parsers accept but JSON does not (PostgreSQL's `json` type refuses them, SQLite
    would store text no other reader can parse). Parsed only when such a word appears."""
    if "NaN" in text or "Infinity" in text:

        def refuse(constant: str) -> NoReturn:
            raise InvalidRecord(f"{what} is not standard JSON: {constant} is not a JSON value")

        json.loads(text, parse_constant=refuse)
    return text


def check_json_body(
    body: object, validate: Callable[[str], object], kind: str, max_bytes: int
) -> str:
    """A JSON body a caller wrote itself, for a repository to store: text that `validate`
    accepts (`kind` names what it must be in the error) and that passes `check_json_text`."""
    if not isinstance(body, str):
        raise InvalidRecord(f"body must be JSON text, got {type(body).__name__}")
    try:
        validate(body)
    except ValidationError as error:
        raise InvalidRecord(f"body is not {kind}: {describe(error)}") from None
    except InvalidRecord:
        check_json_text(body, "body", max_bytes)  # a reason of its own comes first
        raise
    return check_json_text(body, "body", max_bytes)


def check_json_text(text: str, what: str, max_bytes: int) -> str:
    """Everything `encode_json` guarantees, for JSON text a caller wrote itself: standard JSON
    (no `NaN`/`Infinity`), at most `max_bytes`, no lone surrogate, at most `MAX_DEPTH` deep.
    The caller checks what the text must decode as."""
    check_json_size(text, what, max_bytes)
    check_standard_json(text, what)
    return check_json_depth(text, what)
