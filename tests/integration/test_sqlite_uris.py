"""A SQLite database named as a SQLite URI (`sqlite:///file:PATH?uri=true`) is the same file as
its plain path: a read never creates it, and migrations lock the same lock file beside it.
SQLite only: URIs are SQLite's."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from session_journal import DatabaseNotFound, InvalidRecord, Store
from session_journal.cli import main
from session_journal.storage.engines import MIGRATION_LOCK_SUFFIX, migration_lock_path
from tests.factories import SessionFactory

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def uri(path: Path, **query: str) -> str:
    arguments = "".join(f"&{key}={value}" for key, value in query.items())
    return f"sqlite:///file:{quote(str(path))}?uri=true{arguments}"


def test_opening_a_uri_of_a_missing_file_creates_nothing(
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "a dir" / "new.db"
    missing.parent.mkdir()
    with pytest.raises(DatabaseNotFound, match="no SQLite database at"):
        Store.open(uri(missing))
    assert main(["--url", uri(missing), "db", "check"]) == 1
    assert "no SQLite database at" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a dir"]
    assert os.listdir(missing.parent) == []


def test_a_uri_and_the_plain_path_are_one_database_with_one_migration_lock(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "a b.db"
    assert migration_lock_path(uri(path)) == migration_lock_path(f"sqlite:///{path}")
    with Store.open(uri(path, mode="rwc"), upgrade=True) as store:
        store.sessions.save(SessionFactory(id="s1"))
    with Store.open(f"sqlite:///{path}") as store:
        assert [record.id for record in store.sessions.list()] == ["s1"]
    names = set(os.listdir(tmp_path))
    assert {"a b.db", "a b.db" + MIGRATION_LOCK_SUFFIX} <= names
    assert names <= {"a b.db", "a b.db" + MIGRATION_LOCK_SUFFIX, "a b.db-shm", "a b.db-wal"}


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///file::memory:?uri=true",
        "sqlite:///file:shared?mode=memory&uri=true",
        # SQLAlchemy decodes the %3F: SQLite then reads mode=memory from the name itself.
        "sqlite:///file:a.db%3Fmode=memory%26cache=shared?uri=true",
    ],
)
def test_an_in_memory_uri_is_refused(
    backend: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRecord, match="in-memory SQLite database cannot be shared"):
        Store.open(url, upgrade=True)


@pytest.mark.parametrize(
    ("url", "opened"),
    [
        ("sqlite:///file:a.db?uri=false", "file:a.db"),  # not a URI: SQLite opens that name
        ("sqlite:///a.db?mode=ro&uri=true", "a.db?mode=ro"),  # a URI only with file:
    ],
)
def test_a_name_sqlite_takes_literally_is_checked_as_that_name(
    backend: str,
    url: str,
    opened: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    with Store.open("sqlite:///a.db", upgrade=True):
        pass
    before = set(os.listdir(tmp_path))
    with pytest.raises(DatabaseNotFound, match="no SQLite database at"):
        Store.open(url)
    assert set(os.listdir(tmp_path)) == before
    assert migration_lock_path(url) == str(tmp_path / opened) + MIGRATION_LOCK_SUFFIX
