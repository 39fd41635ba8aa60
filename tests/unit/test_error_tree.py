"""The error tree (issue 24): every class in `session_journal.errors` is exported, documented,
listed in the errors table of docs/api/errors.md and pickles; misuse raises a `UsageError`
subclass, never the bare base class."""

from __future__ import annotations

import inspect
import pickle
import re
from pathlib import Path

import pytest

import session_journal
from session_journal import errors
from tests.docs import page

SRC = Path(session_journal.__file__).parent
CLASSES = [
    value
    for _, value in inspect.getmembers(errors, inspect.isclass)
    if value.__module__ == errors.__name__
]
USAGE = {
    "UnitOfWorkEnded",
    "WriteInsideUnitOfWork",
    "BoundTransactionOpen",
    "CallerCommits",
    "WriterClosed",
    "PruneRefused",
    "ConsumerChangeRefused",
    "DemoRefused",
    "ReadOnlySnapshot",
    "SnapshotEnded",
}


@pytest.mark.parametrize("error", CLASSES, ids=lambda error: error.__name__)
def test_every_error_is_exported_documented_and_in_the_errors_table(error: type) -> None:
    assert issubclass(error, errors.SessionJournalError)
    assert error.__name__ in session_journal.__all__
    assert getattr(session_journal, error.__name__) is error
    assert error.__doc__ and error.__doc__.strip()
    assert error.__name__ in errors_table() or error is errors.SessionJournalError


def errors_table() -> set[str]:
    """The classes named in the first column of the errors table (docs/api/errors.md): its rows,
    from the header to the first line that is not a row (a blank line would end the table)."""
    lines = page("api/errors.md").splitlines()
    start = lines.index("| error | when |")
    named: set[str] = set()
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        named.update(re.findall(r"`(\w+)`", line.split(" | ")[0].split(" (")[0]))
    return named


def test_each_kind_of_misuse_is_a_usage_error() -> None:
    kinds = {error.__name__ for error in CLASSES if issubclass(error, errors.UsageError)}
    assert kinds == USAGE | {"UsageError"}
    assert issubclass(errors.MissingDependency, ImportError)
    assert not issubclass(errors.MissingDependency, errors.UsageError)


@pytest.mark.parametrize(
    "name", sorted(USAGE | {"CallWithdrawn", "MissingDependency", "JournalDamaged", "UsageError"})
)
def test_the_new_errors_pickle_with_their_message(name: str) -> None:
    error = getattr(errors, name)(f"{name}: what to do instead")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)


def test_call_withdrawn_is_the_one_of_the_write_path() -> None:
    from session_journal.storage import write_path

    assert write_path.CallWithdrawn is session_journal.CallWithdrawn


def test_no_module_raises_the_bare_base_class() -> None:
    raising = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\braise SessionJournalError\(", line)
    ]
    assert raising == []
