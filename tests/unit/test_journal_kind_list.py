"""The journal's kinds are listed once, beside their classes (issue 24): each module that defines
kinds lists them in its `__all__`; `JournalEvent` (the union, which a type checker needs written
out) names exactly those, and `session_journal.journal` exports them from those lists."""

from __future__ import annotations

import inspect
from typing import get_args

from pydantic import BaseModel

import session_journal.journal as journal
from session_journal.journal import approvals, envelope, kinds


def _defined_kinds(module: object) -> list[str]:
    """The classes a module defines that are journal events: models with a `type` tag."""
    return [
        name
        for name, value in inspect.getmembers(module, inspect.isclass)
        if value.__module__ == getattr(module, "__name__", None)
        and issubclass(value, BaseModel)
        and "type" in value.model_fields
    ]


def test_each_module_lists_every_kind_it_defines() -> None:
    for module in (kinds, approvals):
        assert sorted(module.__all__) == sorted(_defined_kinds(module)), module.__name__


def test_the_union_names_exactly_the_listed_kinds_once() -> None:
    members = [member.__name__ for member in get_args(get_args(envelope.JournalEvent)[0])]
    assert len(members) == len(set(members)) == 48
    assert set(members) == set(kinds.__all__) | set(approvals.__all__)
    assert len(envelope.JOURNAL_EVENT_KINDS) == 48


def test_the_package_exports_every_kind() -> None:
    for name in [*kinds.__all__, *approvals.__all__]:
        assert name in journal.__all__, name
        assert getattr(journal, name) is getattr(kinds, name, None) or getattr(
            journal, name
        ) is getattr(approvals, name)
    assert len(journal.__all__) == len(set(journal.__all__))
