"""Values: the immutable, cheap classes of the events the log holds.

An event is a fact that never changes, and a page of them is read often and shared between the
readers of a store (the followers' window hands the same objects to every follower), so the
event types are values: frozen, slotted pydantic dataclasses (`immutable`), whose lists are tuples
and whose objects are `FrozenDict`s, immutable all the way down. A slotted dataclass is one
object for the garbage collector to track where a `BaseModel` is three (the instance, its
`__dict__` and its fields-set `set`): reading a page of 1,000 events costs a third of the
collections.

`Value` gives them the model API their users know: `model_validate`, `model_validate_json`,
`model_dump` and `model_dump_json`, through one `TypeAdapter` per class, made on first use."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, NoReturn, Self, TypeVar, cast, dataclass_transform

import pydantic.dataclasses
from pydantic import Field, TypeAdapter
from pydantic.fields import FieldInfo

T = TypeVar("T")


class FrozenDict(dict[str, Any]):
    """A `dict` that cannot change: what a value's object fields (a question's schema) hold.
    It compares, dumps to JSON and pickles as the `dict` it holds; every method that would
    change it raises `TypeError`."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(f"{type(self).__name__} cannot change: it is part of a stored event")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Callable[..., FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self


def frozen(value: Any, max_depth: int) -> Any:
    """`value`, a JSON value, with every mapping in it a `FrozenDict` and every list a tuple;
    `ValueError` for anything else (a set, an object, a key that is not a string) or for
    nesting deeper than `max_depth` levels (a cycle among them)."""
    if value is None or isinstance(value, str | int | float):  # bool is an int
        return value
    if max_depth <= 0:
        raise ValueError("nests too deep (or refers to itself)")
    if isinstance(value, Mapping):
        items = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"has a key that is not a string: {key!r}")
            items[key] = frozen(item, max_depth - 1)
        return FrozenDict(items)
    if isinstance(value, list | tuple):
        return tuple(frozen(item, max_depth - 1) for item in value)
    raise ValueError(f"holds a {type(value).__name__}, which is not a JSON value")


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    """The class's `TypeAdapter`, made on first use (a race makes two; one is kept)."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS.setdefault(cls, TypeAdapter(cls))
    return adapter


class _Fields:
    """`cls.model_fields`: a value class's fields by name, as a `BaseModel` class has them."""

    def __get__(self, instance: object, owner: type) -> dict[str, FieldInfo]:
        fields: dict[str, FieldInfo] = getattr(owner, "__pydantic_fields__", {})
        return fields


class Value:
    """The model API of a value class (`immutable`): validation from Python objects or JSON, in
    the class's stored form or by field name, dumps, and `model_fields`, as a `BaseModel`
    gives them."""

    __slots__ = ("__weakref__",)  # weak references to events work, as they did to models
    model_fields = _Fields()

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None) -> Self:
        """`obj` (a mapping of its fields, or an instance) validated as this class."""
        made: Self = _adapter(cls).validate_python(obj, strict=strict)
        return made

    @classmethod
    def model_validate_json(
        cls, data: str | bytes | bytearray, *, strict: bool | None = None
    ) -> Self:
        """JSON text validated as this class."""
        made: Self = _adapter(cls).validate_json(data, strict=strict)
        return made

    def model_dump(
        self,
        *,
        mode: Literal["python", "json"] = "python",
        include: Any = None,
        exclude: Any = None,
        by_alias: bool | None = None,
        exclude_defaults: bool = False,
        exclude_none: bool = False,
    ) -> dict[str, Any]:
        """The value as a `dict` (`mode="json"`: of JSON types only; `"python"` keeps the
        tuples and read-only mappings it holds)."""
        dumped: dict[str, Any] = _adapter(type(self)).dump_python(
            self,
            mode=mode,
            include=include,
            exclude=exclude,
            by_alias=by_alias,
            exclude_defaults=exclude_defaults,
            exclude_none=exclude_none,
        )
        return dumped

    def model_dump_json(
        self,
        *,
        indent: int | None = None,
        include: Any = None,
        exclude: Any = None,
        by_alias: bool | None = None,
        exclude_defaults: bool = False,
        exclude_none: bool = False,
    ) -> str:
        """The value as JSON text, as it is stored and sent."""
        return (
            _adapter(type(self))
            .dump_json(
                self,
                indent=indent,
                include=include,
                exclude=exclude,
                by_alias=by_alias,
                exclude_defaults=exclude_defaults,
                exclude_none=exclude_none,
            )
            .decode()
        )


def _setstate(self: Value, state: Any) -> None:
    """A value's state from a pickle: its fields' values, or the state of the `BaseModel` the
    class was in 0.1 (`{"__dict__": {field: value}, ...}`), validated into this class."""
    names = [field.name for field in dataclasses.fields(self)]  # type: ignore[arg-type]
    if isinstance(state, dict) and isinstance(state.get("__dict__"), dict):
        made = type(self).model_validate(state["__dict__"])
        state = [getattr(made, name) for name in names]
    for name, item in zip(names, state, strict=True):
        object.__setattr__(self, name, item)  # as a frozen dataclass's own unpickling does


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(Field,))
def immutable(cls: type[T]) -> type[T]:
    """A frozen, slotted pydantic dataclass of `cls` (a `Value`), built by keyword only, that
    also unpickles what 0.1 pickled when the class was a `BaseModel`."""
    made = pydantic.dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    made.__setstate__ = _setstate  # type: ignore[attr-defined]
    return cast(type[T], made)
