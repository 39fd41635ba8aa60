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


@pytest.mark.parametrize("query", [{}, {"mode": "memory"}])
def test_an_in_memory_uri_is_refused(backend: str, query: dict[str, str]) -> None:
    name = ":memory:" if not query else "shared"
    url = f"sqlite:///file:{name}?uri=true" + "".join(f"&{k}={v}" for k, v in query.items())
    with pytest.raises(InvalidRecord, match="in-memory SQLite database cannot be shared"):
        Store.open(url, upgrade=True)
