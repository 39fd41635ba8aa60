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


def test_an_old_path_of_a_split_module_still_gives_what_it_held() -> None:
    from session_journal.repositories.events import EventRepository, page_query, split_frontier
    from session_journal.storage.calls import WITHDRAWAL as moved_withdrawal
    from session_journal.storage.protocols import Transactions as moved_transactions
    from session_journal.storage.repositories.event_pages import split_frontier as moved_split
    from session_journal.unit_of_work import Transactions, UnitOfWork, WriteContext
    from session_journal.write_path import WITHDRAWAL, Withdrawal, WritePath

    assert (Transactions, WITHDRAWAL, split_frontier) == (
        moved_transactions,
        moved_withdrawal,
        moved_split,
    )
    assert all(
        callable(each)
        for each in (EventRepository, page_query, UnitOfWork, WriteContext, Withdrawal, WritePath)
    )


def test_every_old_module_only_aliases() -> None:
    # An old path's file is the alias call and nothing else (the layering test skips them).
    source = Path(__file__).parents[2] / "src"
    for old in MOVED:
        path = source.joinpath(*old.split("."))
        package = path.is_dir()
        path = path / "__init__.py" if package else path.with_suffix(".py")
        code = [
            line
            for line in path.read_text(encoding="utf-8").split('"""')[-1].splitlines()
            if line.strip()
        ]
        dots = "." * (old.count(".") + package)  # an __init__ imports from its parent
        assert code == [f"from {dots}_moved import alias", "alias(__name__)"], path


def test_every_old_module_has_a_stub_naming_its_moved_module() -> None:
    # Type checkers read the stub (the alias happens at run time, which they do not see).
    from session_journal._moved import SPLIT

    source = Path(__file__).parents[2] / "src"
    for old, new in MOVED.items():
        path = source.joinpath(*old.split("."))
        stub = path / "__init__.pyi" if path.is_dir() else path.with_suffix(".pyi")
        text = stub.read_text(encoding="utf-8")
        assert f"from {new} import *" in text, stub
        if old in SPLIT:
            assert f"from {SPLIT[old]} import *" in text, stub
