"""`Store.open(upgrade=True)` reads the revision, migrates and judges the schema on one engine of
its own (issue 24): beside the store's writer and reader it makes one engine, whatever the
database's state, and reads the revision once before and once after the migration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import SessionRecord, Store, migrations
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
