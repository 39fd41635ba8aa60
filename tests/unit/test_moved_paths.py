"""The old module paths of 0.1 (`session_journal._moved`) import as the moved modules themselves
for one release, warning (`DeprecationWarning`) with the new path, and the changelog lists each.

A process warns once for each old path (a second import finds it in `sys.modules` and runs no
code): each test here starts with no old path imported (`no_old_path_imported`)."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

from session_journal._moved import MOVED
from tests.helpers import forget_old_paths, old_path_deprecated

CHANGELOG = Path(__file__).parents[2] / "CHANGELOG.md"


@pytest.fixture(autouse=True)
def no_old_path_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    forget_old_paths(monkeypatch)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module_and_warns(old: str, new: str) -> None:
    with old_path_deprecated(old) as caught:
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert [type(each.message) for each in caught] == [DeprecationWarning]


def test_the_warning_names_the_new_path_at_the_line_that_imported_the_old_one() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        import session_journal.bound  # noqa: F401 (the old path, on purpose)
    assert [str(each.message) for each in caught] == [
        "`session_journal.bound` is deprecated, import `session_journal.storage.bound` instead;"
        " the old path goes in the release after 0.2.0"
    ]
    assert caught[0].filename == __file__


def test_the_warning_of_a_split_module_names_where_the_rest_went() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from session_journal.write_path import WITHDRAWAL  # noqa: F401
    assert [str(each.message) for each in caught] == [
        "`session_journal.write_path` is deprecated, import `session_journal.storage.write_path`"
        " (or `session_journal.storage.calls`) instead; the old path goes in the release after"
        " 0.2.0"
    ]


def test_an_old_path_imported_again_does_not_warn_again() -> None:
    with old_path_deprecated("session_journal.clock"):
        import session_journal.clock
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        import session_journal.clock  # noqa: F401
    assert [str(each.message) for each in again] == []


def test_an_old_package_path_gives_the_moved_modules_never_copies() -> None:
    with old_path_deprecated("session_journal.repositories"):
        from session_journal.repositories import events as old
    from session_journal.storage.repositories import events as new

    assert old is new
    assert importlib.import_module("session_journal.repositories.sessions") is (
        importlib.import_module("session_journal.storage.repositories.sessions")
    )


def test_the_changelog_lists_every_old_path_and_when_they_go() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    for old, new in MOVED.items():
        assert f"| `{old}` | `{new}` |" in text
    assert (
        "Importing an old path warns (`DeprecationWarning`, naming the new path); the old paths"
        " go in the release after 0.2.0." in " ".join(text.split())
    )


def test_an_old_path_of_a_split_module_still_gives_what_it_held() -> None:
    from session_journal.storage.calls import WITHDRAWAL as moved_withdrawal
    from session_journal.storage.protocols import Transactions as moved_transactions
    from session_journal.storage.repositories.event_pages import split_frontier as moved_split

    with old_path_deprecated("session_journal.repositories"):
        from session_journal.repositories.events import EventRepository, page_query, split_frontier
    with old_path_deprecated("session_journal.unit_of_work"):
        from session_journal.unit_of_work import Transactions, UnitOfWork, WriteContext
    with old_path_deprecated("session_journal.write_path"):
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
