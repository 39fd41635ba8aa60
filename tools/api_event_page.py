"""Write docs/api/events.md, the page of every API event body type and its fields, from the
models themselves (`make docs-pages`); `tests/unit/test_docs_pages.py` fails while the committed
page differs from what this gives.

A body is stored and sent as `{"type": <tag>, "data": {<fields>}}`; the page shows each body's
tag and `data` fields, then every model and enum those fields name, then the event and page
envelopes. A field's text is the attribute docstring under it in the model's source, if any.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from session_journal import ApiEvent, ApiEventData, ApiEventPage, ApiEventPageBefore
from session_journal._values import Value

PAGE = Path(__file__).resolve().parents[1] / "docs" / "api" / "events.md"

HEADER = """\
# API event bodies

Generated from the models by `tools/api_event_page.py` (`make docs-pages`); do not edit by hand.

An event body is stored and sent as `{"type": <tag>, "data": {<fields>}}`: the tag says which
body it is and `data` holds its fields, every one of them always written (`null` where the value
is absent). In Python the classes keep their fields at the top level
(`TurnStarted(turn_id=1, command_id="c-1", started_at_ms=None)`) and validate either form. A
field marked *optional* may be left out when building the body; its default is then written.
"""


def bodies() -> list[type[BaseModel | Value]]:
    """The body classes of `ApiEventData`, in the union's order."""
    return list(get_args(get_args(ApiEventData)[0]))


def _anchor(kind: type) -> str:
    return kind.__name__.lower()


def attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written under a class's attributes in its source, by attribute name."""
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if klass.__module__ in {"builtins", "pydantic.main"} or klass in (BaseModel, Value):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for first, second in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(first, ast.AnnAssign)
                and isinstance(first.target, ast.Name)
                and isinstance(second, ast.Expr)
                and isinstance(second.value, ast.Constant)
                and isinstance(second.value.value, str)
            ):
                found[first.target.id] = " ".join(second.value.value.split())
    return found


class Page:
    """The page being written, and the models and enums it still has to show."""

    def __init__(self) -> None:
        self.pending: list[type] = []
        self.shown: set[type] = set()

    def name(self, kind: type) -> str:
        if kind not in self.shown and kind not in self.pending:
            self.pending.append(kind)
        return f"[`{kind.__name__}`](#{_anchor(kind)})"

    def type_text(self, annotation: Any) -> str:
        origin = get_origin(annotation)
        if origin is Annotated:
            return self.type_text(get_args(annotation)[0])
        if origin in (Union, types.UnionType):
            options = [self.type_text(option) for option in get_args(annotation)]
            return " or ".join(options)
        if origin is Literal:
            return " or ".join(f"`{value!r}`".replace("'", '"') for value in get_args(annotation))
        if origin in (list, tuple):
            inner = [arg for arg in get_args(annotation) if arg is not Ellipsis]
            return f"list of {self.type_text(inner[0])}" if inner else "list"
        if origin in (dict, Mapping):
            key, value = get_args(annotation)
            return f"object of {self.type_text(key)} to {self.type_text(value)}"
        if annotation is type(None):
            return "`null`"
        if isinstance(annotation, type) and issubclass(annotation, (BaseModel, Value, Enum)):
            return self.name(annotation)
        simple = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}
        return simple.get(annotation, f"`{annotation}`")

    def fields(self, model: type[BaseModel | Value], *, skip: tuple[str, ...] = ()) -> list[str]:
        docs = attribute_docs(model)
        rows = ["| field | type | meaning |", "| --- | --- | --- |"] if docs else []
        rows = rows or ["| field | type |", "| --- | --- |"]
        for name, field in model.model_fields.items():
            if name in skip:
                continue
            kind = self.type_text(field.annotation)
            if not field.is_required():
                default = field.get_default(call_default_factory=True)
                default = list(default) if isinstance(default, tuple) else default  # JSON's
                shown = "null" if default is None else repr(default).replace("'", '"')
                kind += f" (optional, default `{shown}`)"
            meaning = f" {docs.get(name, '')} |" if docs else ""
            rows.append(f"| `{name}` | {kind} |{meaning}")
        return rows

    def model(self, model: type[BaseModel | Value], heading: str, intro: str = "") -> list[str]:
        self.shown.add(model)
        doc = " ".join((model.__doc__ or "").split())
        lines = [f"### {heading} {{ #{_anchor(model)} }}", ""]
        if doc:
            lines += [doc, ""]
        if intro:
            lines += [intro, ""]
        return lines

    def enum(self, kind: type[Enum]) -> list[str]:
        self.shown.add(kind)
        doc = " ".join((kind.__doc__ or "").split())
        values = ", ".join(f'`"{member.value}"`' for member in kind)
        heading = f"### `{kind.__name__}` {{ #{_anchor(kind)} }}"
        return [heading, "", *([doc, ""] if doc else []), f"One of {values}.", ""]


def render() -> str:
    """The page's Markdown."""
    page = Page()
    lines = [*HEADER.splitlines(), "", "## The bodies", ""]
    for body in bodies():
        tag = body.model_fields["type"].default
        intro = f'`{{"type": "{tag}", "data": {{...}}}}`; `data` holds:'
        lines += page.model(body, f"`{tag}`: `{body.__name__}`", intro)
        lines += [*page.fields(body, skip=("type",)), ""]
    lines += ["## The types they name", ""]
    while page.pending:
        kind = page.pending.pop(0)
        if issubclass(kind, Enum):
            lines += page.enum(kind)
        else:
            lines += page.model(kind, f"`{kind.__name__}`")
            lines += [*page.fields(kind), ""]
    lines += ["## The event and the page", ""]
    for envelope in (ApiEvent, ApiEventPage, ApiEventPageBefore):
        lines += page.model(envelope, f"`{envelope.__name__}`")
        lines += [*page.fields(envelope), ""]
    assert not page.pending, f"the envelopes name types the page does not show: {page.pending}"
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    """Write the page; with `--check`, only say (exit 1) whether the committed one is stale."""
    text = render()
    if sys.argv[1:] == ["--check"]:
        return 0 if PAGE.read_text() == text else 1
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
