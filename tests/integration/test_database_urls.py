"""Database URLs: one of another driver or a malformed one is `InvalidRecord` from `Store.open`,
`AsyncStore.open`, the command line and Alembic, before any engine is made (so before
SQLAlchemy imports a driver, installed or not); `postgresql://` is psycopg."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import session_journal.storage.engines
from session_journal import AsyncStore, InvalidRecord, Store
from tests.migrations.test_data_loss import alembic, minimal_ini

USE = "use sqlite:/// or postgresql+psycopg://"
REFUSED = [
    ("postgresql+asyncpg://root@127.0.0.1/test", f"unsupported driver 'asyncpg': {USE}"),
    ("sqlite+aiosqlite:///journal.db", f"unsupported driver 'aiosqlite': {USE}"),
    ("postgresql+psycopg2://root@127.0.0.1/test", f"unsupported driver 'psycopg2': {USE}"),
    ("postgresql+pg8000://root@127.0.0.1/test", f"unsupported driver 'pg8000': {USE}"),
    ("postgresql+psycopg_async://root@db/test", f"unsupported driver 'psycopg_async': {USE}"),
    ("mysql://root@127.0.0.1/test", f"unsupported database 'mysql': {USE}"),
    (
        "postgres://root@127.0.0.1/test",
        "unsupported database 'postgres': SQLAlchemy names PostgreSQL postgresql; write "
        "postgresql+psycopg:// (or postgresql://) instead of postgres://",
    ),
    (
        "postgresql+psycopg://root:secret@127.0.0.1:abc/test",
        "invalid database URL: the port 'abc' is not a number (an IPv6 host goes in [brackets])",
    ),
    (
        "postgresql+psycopg://root@[::1/test",
        "invalid database URL: the port ':1' is not a number (an IPv6 host goes in [brackets])",
    ),
    (
        "journal.db",
        "invalid database URL: not of the form dialect+driver://user:password@host:port/"
        f"database; {USE}",
    ),
]


@pytest.fixture
def no_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making an engine fails the test: SQLAlchemy imports the driver when it makes one."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an engine was made")

    monkeypatch.setattr(session_journal.storage.engines.sa, "create_engine", refuse)


@pytest.mark.parametrize(("url", "message"), REFUSED)
@pytest.mark.usefixtures("no_engines")
def test_a_url_the_store_cannot_drive_is_refused_before_any_engine(url: str, message: str) -> None:
    for upgrade in (False, True):
        with pytest.raises(InvalidRecord) as refused:
            Store.open(url, upgrade=upgrade)
        assert str(refused.value) == message
        with pytest.raises(InvalidRecord) as refused:
            asyncio.run(AsyncStore.open(url, upgrade=upgrade))
        assert str(refused.value) == message
    assert "secret" not in message


def command_line(*args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "SESSION_JOURNAL_DATABASE_URL"}
    if url is not None:
        env["SESSION_JOURNAL_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "session_journal", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize(("url", "message"), REFUSED[:1] + REFUSED[6:7])
def test_the_command_line_prints_the_refusal_in_one_line(
    url: str, message: str, tmp_path: Path
) -> None:
    for done in (
        command_line("--url", url, "db", "current"),
        command_line("events", url=url),
    ):
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"session-journal: {message}\n"
    done = alembic(minimal_ini(tmp_path), url, "current")  # Alembic's own one line and code
    assert (done.returncode, done.stdout, done.stderr) == (255, f"FAILED: {message}\n", "")


def test_a_url_without_a_driver_or_with_the_default_one_opens(migrated_url: str) -> None:
    parsed = sa.make_url(migrated_url)
    other = "postgresql" if parsed.get_backend_name() == "postgresql" else "sqlite+pysqlite"
    url = parsed.set(drivername=other).render_as_string(hide_password=False)
    with Store.open(url) as store:
        assert store.events.latest_seq() == 0
        if other == "postgresql":  # psycopg, whatever SQLAlchemy's own default
            assert store.url.startswith("postgresql+psycopg://")
            assert sa.make_url(store.url).set(drivername="postgresql") == sa.make_url(url)
        else:
            assert store.url == url


def test_a_password_holding_an_at_sign_never_shows_in_the_refusal() -> None:
    with pytest.raises(InvalidRecord) as refused:
        Store.open("postgresql://user:p@ss:w0rdSECRET@127.0.0.1:5432/test")
    assert "SECRET" not in str(refused.value)
    assert "must be percent-encoded" in str(refused.value)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?timeout=abc", "could not convert string to float: 'abc'"),
        ("?check_same_thread=maybe", "String is not true/false: 'maybe'"),
    ],
)
def test_driver_arguments_the_driver_refuses_are_invalid_urls(
    tmp_path: Path, query: str, message: str
) -> None:
    url = f"sqlite:///{tmp_path / 'journal.db'}{query}"
    with pytest.raises(InvalidRecord, match="a query argument is refused") as refused:
        Store.open(url, upgrade=True)  # refused when the engine is made, before a connection
    assert message in str(refused.value)
    with pytest.raises(InvalidRecord, match="NUL character"):
        Store.open(f"sqlite:///{tmp_path / 'jour'}\x00nal.db", upgrade=True)
    assert not (tmp_path / "journal.db").exists()
