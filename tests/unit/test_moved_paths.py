"""The old module paths of 0.1 (`session_journal._moved`) import as the moved modules themselves
for one release, and the changelog lists each."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from session_journal._moved import MOVED

CHANGELOG = Path(__file__).parents[2] / "CHANGELOG.md"


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_an_old_package_path_gives_the_moved_modules_never_copies() -> None:
    from session_journal.repositories import events as old
    from session_journal.storage.repositories import events as new

    assert old is new
    assert importlib.import_module("session_journal.repositories.sessions") is (
        importlib.import_module("session_journal.storage.repositories.sessions")
    )


def test_the_changelog_lists_every_old_path() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    for old, new in MOVED.items():
        assert f"| `{old}` | `{new}` |" in text
