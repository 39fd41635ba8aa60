"""Service arguments, checked by one decorator: `validate_arguments`, on pydantic's
`validate_call`, with the few types the services' signatures need (`Given`, `Int64`, `listed`,
`sequence_of`, `pair`)."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, TypeVar, get_args, get_origin

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    GetCoreSchemaHandler,
    ValidationError,
    validate_call,
)
from pydantic_core import CoreSchema, core_schema

from ._validation import I64_MAX
from .errors import InvalidRecord

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
                article = "an" if source.__name__[:1] in "AEIO" else "a"
                raise ValueError(f"must be {article} {source.__name__}, got {type(value).__name__}")
            return value

        return core_schema.no_info_before_validator_function(instance, handler(source))


Given = Annotated[T, _Given()]
"""A model instance argument, validated again (see `_Given`)."""


class _Passed:
    """`Passed[T]`: an argument handed on as it is, checked by whoever receives it (a unit of
    work, which only the store can tell from another store's)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.any_schema()


Passed = Annotated[T, _Passed()]
"""An argument not validated by `validate_arguments` (see `_Passed`)."""


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
    """Annotate a `Sequence` argument: any sequence but text is taken, as a list; text or a
    non-sequence is refused before its items are validated ("must be a sequence of `what`")."""

    def check(value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ValueError(f"must be a sequence of {what}")
        return list(value)  # any Sequence (a UserList, a view), read once, as a list

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

        def refusal(error: ValidationError, args: Any, kwargs: Any) -> Exception:
            if not hints:
                hints.update(typing.get_type_hints(fn, include_extras=True))
            return _refusal(error, names, hints, labels, args, kwargs, fn)

        if inspect.iscoroutinefunction(fn):  # pydantic checks when the coroutine runs

            @functools.wraps(fn)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await checked(*args, **kwargs)
                except ValidationError as error:
                    if _raised_by(error, fn):
                        raise
                    raise refusal(error, args, kwargs) from None

            return typing.cast(F, call_async)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return checked(*args, **kwargs)
            except ValidationError as error:
                if _raised_by(error, fn):
                    raise
                raise refusal(error, args, kwargs) from None

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
