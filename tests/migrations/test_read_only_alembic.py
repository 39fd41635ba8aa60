"""The `alembic` command's reads never create a database: `current`, `check`, `history -i` and
`show current` refuse a SQLite file that is not there, with the message of
`session-journal db current`, and make neither it nor its lock file; on PostgreSQL they make no
schema. The commands that read only the scripts (`heads`, `history`, `show REV`) touch no
database at all."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal.cli import main
from tests.backends import postgres_base_url, schema_url
from tests.migrations.test_data_loss import minimal_ini

READS_THE_DATABASE = [["current"], ["check"], ["history", "-i"], ["show", "current"]]
READS_THE_SCRIPTS = [["heads"], ["history"], ["show", "0001_initial"]]


def alembic(directory: Path, url: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """`alembic` run in `directory`, with `-x url=URL` or, for `None`, no URL at all (nor
    `SESSION_JOURNAL_DATABASE_URL`): the default database in that directory."""
    env = {key: value for key, value in os.environ.items() if key != "SESSION_JOURNAL_DATABASE_URL"}
    where = [] if url is None else ["-x", f"url={url}"]
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(minimal_ini(directory)), *where, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=directory,
        env=env,
    )


@pytest.mark.parametrize("given", ["typo", "no url"])
@pytest.mark.parametrize("command", READS_THE_DATABASE, ids=" ".join)
def test_a_read_refuses_a_missing_sqlite_file_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], given: str
) -> None:
    path = tmp_path / ("typo.db" if given == "typo" else "session-journal.db")
    url = f"sqlite:///{path}" if given == "typo" else None
    done = alembic(tmp_path, url, *command)
    assert main(["--url", f"sqlite:///{path}", "db", "current"]) == 1
    expected = capsys.readouterr().err.removeprefix("session-journal: ")
    assert (done.returncode, done.stdout, done.stderr) == (255, f"FAILED: {expected}", "")
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["alembic.ini"]


@pytest.mark.parametrize("command", READS_THE_SCRIPTS, ids=" ".join)
def test_a_read_of_the_scripts_alone_touches_no_database(
    tmp_path: Path, command: list[str]
) -> None:
    done = alembic(tmp_path, f"sqlite:///{tmp_path / 'typo.db'}", *command)
    assert done.returncode == 0, done.stderr
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["alembic.ini"]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("command", READS_THE_DATABASE, ids=" ".join)
def test_a_read_makes_no_postgresql_schema(
    backend: str, tmp_path: Path, command: list[str]
) -> None:
    schema = f"sj_missing_{uuid.uuid4().hex[:12]}"
    alembic(tmp_path, schema_url(schema), *command)
    engine = sa.create_engine(postgres_base_url())
    try:
        with engine.connect() as connection:
            found = connection.scalar(
                sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = :name"),
                {"name": schema},
            )
    finally:
        engine.dispose()
    assert found == 0


def test_an_upgrade_still_creates_the_sqlite_file(tmp_path: Path) -> None:
    done = alembic(tmp_path, None, "upgrade", "head")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "session-journal.db").is_file()
