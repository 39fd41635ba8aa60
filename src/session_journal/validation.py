"""Pure input rules shared by records, bodies and service arguments (no I/O)."""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, NoReturn, TypeVar, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    GetCoreSchemaHandler,
    ValidationError,
    validate_call,
)
from pydantic_core import CoreSchema, PydanticSerializationError, core_schema

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
    `what`). Service arguments are checked by `validate_arguments`."""
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


# --- Service arguments ---------------------------------------------------------------------------
# One mechanism: `validate_arguments` runs pydantic's `validate_call` (strict: no coercion, so
# "5" is not an int nor True, and a dict is not a record) over the annotations of a service
# method, and reports a failure as one `InvalidRecord` naming the argument and what was wrong.
# A validator whose message starts with "must be" states a property of the argument and reads
# after its name ("after_seq must be between 0 and ..."); any other message follows a colon.

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_ARGUMENTS = ConfigDict(strict=True)


def _check_i64(value: int) -> int:
    if not 0 <= value <= I64_MAX:
        raise ValueError(f"must be between 0 and {I64_MAX}, got {value}")
    return value


Int64 = Annotated[int, AfterValidator(_check_i64)]
"""An integer in `0..I64_MAX` (a seq, a time in milliseconds: stored as BIGINT)."""


class _Given:
    """`Given[Model]`: an instance of the model (a dict or another type is refused, not
    converted), validated again by the model itself: every model a service receives has
    `revalidate_instances="always"`, since records are mutable and `model_construct` skips
    validation."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def instance(value: Any) -> Any:
            if not isinstance(value, source):
                raise ValueError(f"must be a {source.__name__}, got {type(value).__name__}")
            return value

        return core_schema.no_info_before_validator_function(instance, handler(source))


Given = Annotated[T, _Given()]
"""A model instance argument, validated again (see `_Given`)."""


class _Listed:
    """See `listed`."""

    def __init__(self, item: Any, what: str) -> None:
        self.item = item
        self.what = what

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        what = self.what

        def as_list(value: Any) -> list[Any]:
            try:
                return list(value)
            except TypeError:
                raise ValueError(f"must be an iterable of {what}") from None

        items = handler.generate_schema(list[self.item])  # type: ignore[name-defined]
        return core_schema.no_info_before_validator_function(as_list, items)


def listed(item: Any, what: str) -> Any:
    """Annotate an `Iterable` argument: it is read once into a list whose items are validated
    as `item` before the call (pydantic validates an `Iterable` lazily, while the service would
    be running); "must be an iterable of `what`" if it is not iterable."""
    return _Listed(item, what)


def sequence_of(what: str) -> BeforeValidator:
    """Annotate a `Sequence` argument: text or a non-sequence is refused before its items are
    validated ("must be a sequence of `what`")."""

    def check(value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ValueError(f"must be a sequence of {what}")
        return value

    return BeforeValidator(check)


def pair(what: str) -> BeforeValidator:
    """Annotate a two-field `NamedTuple` item: only a tuple of two is accepted (not a list,
    not a dict), "must be a `what`" otherwise."""

    def check(value: Any) -> Any:
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"must be a {what}")
        return value

    return BeforeValidator(check)


def validate_arguments(**labels: str) -> Callable[[F], F]:
    """Check a service method's arguments against its annotations before it runs (pydantic's
    `validate_call`, strict, built once per method); a failure is one `InvalidRecord` naming
    each bad argument (by its name, or the label given here: `record="session record"`) and
    what was wrong. A call that does not bind (a missing or unknown argument) is a `TypeError`,
    as without the decorator. A `ValidationError` raised by the method's own body is not an
    argument's and passes through unchanged."""

    def decorate(fn: F) -> F:
        checked = validate_call(config=_ARGUMENTS)(fn)
        names = list(inspect.signature(fn).parameters)
        hints: dict[str, Any] = {}

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return checked(*args, **kwargs)
            except ValidationError as error:
                if _raised_by(error, fn):
                    raise
                if not hints:
                    hints.update(typing.get_type_hints(fn, include_extras=True))
                raise _refusal(error, names, hints, labels, args, kwargs, fn) from None

        return typing.cast(F, call)

    return decorate


_BINDING_ERRORS = {
    "missing_argument",
    "missing_keyword_only_argument",
    "missing_positional_only_argument",
    "unexpected_keyword_argument",
    "unexpected_positional_argument",
    "multiple_argument_values",
}

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a bool",
    "float_type": "a number",
    "list_type": "a list",
    "tuple_type": "a tuple",
    "dict_type": "a mapping",
    "iterable_type": "an iterable",
    "datetime_type": "a datetime",
}


def _raised_by(error: ValidationError, fn: Callable[..., Any]) -> bool:
    """Whether the error comes from the body of `fn` (its frame is on the traceback) rather
    than from the validation of its arguments."""
    trace = error.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code is fn.__code__:
            return True
        trace = trace.tb_next
    return False


def _refusal(
    error: ValidationError,
    names: list[str],
    hints: dict[str, Any],
    labels: dict[str, str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fn: Callable[..., Any],
) -> Exception:
    problems, unbound = [], []
    for item in error.errors():
        first, *rest = item["loc"]
        name = names[first] if isinstance(first, int) and first < len(names) else str(first)
        if item["type"] in _BINDING_ERRORS:
            unbound.append(item["msg"].lower() + (f" {name!r}" if isinstance(first, str) else ""))
            continue
        given = args[first] if isinstance(first, int) and first < len(args) else kwargs.get(name)
        where = labels.get(name, name)
        ident = getattr(given, "id", None)
        if isinstance(ident, str) and rest:  # a record's field: say which record
            where += f" {ident!r}"
        where += _path(rest, hints.get(name, Any))
        problems.append(_problem(where, item))
    if unbound:
        return TypeError(f"{fn.__qualname__}(): " + "; ".join(unbound))
    return InvalidRecord("; ".join(problems))


def _path(rest: list[int | str], hint: Any) -> str:
    """The rest of an error's location in words: `[2]` for an item of a collection, ` name` for
    a field of a named tuple, then `: ` and a model's fields joined by dots
    (`: checkpoint.sha256`)."""
    text, in_model = "", False
    for part in rest:
        hint = _unwrapped(hint)
        fields = getattr(hint, "_fields", None)
        if in_model:
            text += f".{part}"
        elif isinstance(part, int) and fields is not None and part < len(fields):
            text += f" {fields[part]}"
            hint = typing.get_type_hints(hint, include_extras=True).get(fields[part], Any)
        elif isinstance(part, int):
            text += f"[{part}]"
            items = get_args(hint)
            hint = items[0] if get_origin(hint) in _COLLECTIONS and items else Any
        else:
            text += f": {part}"
            in_model = True
    return text


_COLLECTIONS = (list, tuple, Sequence, Iterable)


def _unwrapped(hint: Any) -> Any:
    while get_origin(hint) is Annotated:
        hint, *metadata = get_args(hint)
        for marker in metadata:
            if isinstance(marker, _Listed):
                return list[marker.item]  # type: ignore[name-defined]
    return hint


def _problem(where: str, item: Any) -> str:
    kind, given = item["type"], item.get("input")
    if kind in ("value_error", "assertion_error"):
        reason = str(item["ctx"]["error"])
        return f"{where} {reason}" if reason.startswith("must be") else f"{where}: {reason}"
    if kind in _TYPE_NAMES:
        return f"{where} must be {_TYPE_NAMES[kind]}, got {type(given).__name__}"
    if kind in ("model_type", "is_instance_of", "dataclass_type"):
        expected = item.get("ctx", {}).get("class_name") or item.get("ctx", {}).get("class")
        return f"{where} must be a {expected}, got {type(given).__name__}"
    return f"{where}: {item['msg']}"


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


def encode_json(model: BaseModel, what: str, max_bytes: int) -> EncodedJson:
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
    return check_json_text(body, "body", max_bytes)


def check_json_text(text: str, what: str, max_bytes: int) -> str:
    """Everything `encode_json` guarantees, for JSON text a caller wrote itself: standard JSON
    (no `NaN`/`Infinity`), at most `max_bytes`, no lone surrogate, at most `MAX_DEPTH` deep.
    The caller checks what the text must decode as."""
    check_json_size(text, what, max_bytes)
    check_standard_json(text, what)
    return check_json_depth(text, what)
