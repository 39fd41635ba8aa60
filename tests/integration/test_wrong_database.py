"""The wrong database: a mistyped path or an empty URL is an error, never a new empty database."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import DatabaseNotFound, InvalidRecord, Store
from session_journal.cli import main
from tests.backends import postgres_base_url


def test_opening_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "mistyped.db"
    with pytest.raises(DatabaseNotFound) as raised:
        Store.open(f"sqlite:///{missing}")
    assert str(raised.value) == (
        f"no SQLite database at {missing}: check the URL, or create it with "
        "`session-journal db upgrade` (or `Store.open(url, upgrade=True)`)"
    )
    assert list(tmp_path.iterdir()) == []
    with Store.open(f"sqlite:///{missing}", upgrade=True) as store:  # upgrade creates it
        assert store.events.latest_seq() == 0
    assert missing.exists()


@pytest.mark.parametrize(
    "command",
    [["db", "check"], ["db", "current"], ["events"], ["events", "--follow"], ["search", "x"]],
)
def test_read_only_commands_refuse_a_missing_sqlite_file(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "mistyped.db"
    code = main(["--url", f"sqlite:///{missing}", *command])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(f"session-journal: no SQLite database at {missing}: check the URL")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_an_empty_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidRecord, match=r"^the database URL is empty$"):
        Store.open("")
    with pytest.raises(InvalidRecord, match=r"^the database URL is empty$"):
        Store.open("  ")
    assert main(["--url", "", "db", "check"]) == 1
    assert capsys.readouterr().err == "session-journal: the database URL is empty\n"


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_missing_postgresql_database_is_database_not_found(backend: str) -> None:
    missing = sa.make_url(postgres_base_url()).set(database="sj_no_such_database")
    with pytest.raises(DatabaseNotFound, match='database "sj_no_such_database" does not exist'):
        Store.open(missing.render_as_string(hide_password=False))
