"""`Store.open(upgrade=True)` migrates on one engine of its own (issue 24): Alembic and the
backfill after it share one "migrator" engine, the revision is read on the store's reader once
before and once after the migration, and nothing else is made, whatever the database's state.
The reads take no write lock: a controller opening while another migrates the same SQLite file
waits for it in the migration lock, never failing on the busy timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import SessionRecord, Store, StoreOptions, migrations
from session_journal.storage import engines


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """What opening made and read: engines by role, and schema status reads."""
    counted: Counter[str] = Counter()
    create: Callable[..., sa.Engine] = engines.create_engine
    status: Callable[[sa.Engine], migrations.SchemaStatus] = migrations.status

    def counting_create(url: str, options: Any, *, role: str) -> sa.Engine:
        counted[role] += 1
        return create(url, options, role=role)

    def counting_status(engine: sa.Engine) -> migrations.SchemaStatus:
        counted["status"] += 1
        return status(engine)

    # Each module that makes engines, alembic/env.py's import included (it runs again per
    # command, taking the name from `engines`).
    for module in (
        "session_journal.storage.engines",
        "session_journal.storage.database",
        "session_journal.migrations",
    ):
        monkeypatch.setattr(f"{module}.create_engine", counting_create)
    monkeypatch.setattr(migrations, "status", counting_status)
    return counted


def test_an_empty_database_is_migrated_on_one_engine(url: str, made: Counter[str]) -> None:
    with Store.open(url, upgrade=True) as store:
        assert store.schema.revision == migrations.head()
        store.sessions.save(SessionRecord(id="s-1", project_id="p"))
    assert made == Counter({"migrator": 1, "writer": 1, "reader": 1, "status": 2})


def test_an_up_to_date_database_is_read_on_one_engine(
    migrated_url: str, made: Counter[str]
) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        assert store.schema.revision == migrations.head()
    assert made == Counter({"migrator": 1, "writer": 1, "reader": 1, "status": 2})


def test_an_older_database_is_migrated_and_keeps_its_rows(url: str, made: Counter[str]) -> None:
    migrations.upgrade(url, "0008_deletion_counter")
    made.clear()
    with Store.open(url, upgrade=True) as store:
        assert store.schema.revision == migrations.head()
        store.sessions.save(SessionRecord(id="s-1", project_id="p"))
    assert made == Counter({"migrator": 1, "writer": 1, "reader": 1, "status": 2})
    made.clear()
    with Store.open(url) as store:  # without upgrade: the store's engines and one read
        assert store.sessions.get("s-1") is not None
    assert made == Counter({"writer": 1, "reader": 1, "status": 1})


HOLDER = """
import sqlite3, sys, time
from session_journal.storage.engines import sqlite_migration_lock
url = sys.argv[1]
with sqlite_migration_lock(url):  # a migration under way in another process
    database = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    database.execute("BEGIN IMMEDIATE")  # and its write lock
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    database.execute("COMMIT")
"""


@pytest.mark.sqlite
@pytest.mark.slow
def test_opening_while_another_process_migrates_waits_for_it(
    tmp_path: Path, made: Counter[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    migrations.upgrade(url)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "2.0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        started = time.monotonic()
        # A busy timeout far below the holder's 2 s: only the migration lock may make it wait.
        with Store.open(url, upgrade=True, options=StoreOptions(busy_timeout_s=0.2)) as store:
            assert store.schema.revision == migrations.head()
        assert time.monotonic() - started >= 1.0
    finally:
        holder.wait(timeout=30)
        holder.stdout.close()  # type: ignore[union-attr]
    assert holder.returncode == 0
