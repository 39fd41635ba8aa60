"""Small helpers shared by tests."""

from __future__ import annotations

import gc
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
import sqlalchemy as sa

from session_journal import ApiEvent, ApiEventData, ApiEventFilter, Store, migrations
from session_journal._moved import MOVED


def all_events(store: Store, event_filter: ApiEventFilter | None = None) -> list[ApiEvent]:
    """Every event from the start of the log, paging by cursor."""
    events: list[ApiEvent] = []
    cursor = 0
    while page := store.events.load(event_filter, after_seq=cursor, limit=1000).events:
        events.extend(page)
        cursor = page[-1].seq
    return events


def bodies(store: Store, event_filter: ApiEventFilter | None = None) -> list[ApiEventData]:
    """The bodies of every event, in order."""
    return [event.event for event in all_events(store, event_filter)]


def append_raw(store: Store, session_id: str, body: str, count: int = 1) -> None:
    """Append events with the given stored body text through a unit of work."""
    with store.unit_of_work() as uow:
        for _ in range(count):
            uow.events.append(session_id, 1, body)
        uow.commit()


def store_raw_body(store: Store, session_id: str, body: str) -> int:
    """Store a body as it is (as an older or foreign writer might have), with raw SQL; its seq."""
    with store.unit_of_work() as uow:
        seq: int = uow.connection.execute(
            sa.text(
                "UPDATE event_sequences SET last_seq = last_seq + 1 "
                "WHERE name = 'api_events' RETURNING last_seq"
            )
        ).scalar_one()
        uow.connection.execute(
            sa.text(
                "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                "VALUES (:seq, :session_id, 1, :body)"
            ),
            {"seq": seq, "session_id": session_id, "body": body},
        )
        uow.commit()
    return seq


def left_for_the_collector() -> list[str]:
    """What a garbage collection finds still open, as the warnings it gives (psycopg warns of a
    connection deleted while open; sockets, files and event loops give a `ResourceWarning`):
    recorded here, as the suite's `filterwarnings = error` would fail whichever test the
    collector happened to run in."""
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        gc.collect()
    return [str(each.message) for each in found]


def table_counts(url: str, tables: list[str]) -> dict[str, int]:
    """Row count of each table, read with plain SQL."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: connection.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
                for table in tables
            }
    finally:
        engine.dispose()


@contextmanager
def as_older_code() -> Iterator[None]:
    """Within the block, this code behaves as code released before `session_journal_version`
    existed: its revision is read and written in `alembic_version` (`env.py` and
    `migrations.status` both take the table from `migrations.version_table`)."""
    with mock.patch.object(
        migrations, "version_table", lambda _connection: migrations.LEGACY_VERSION_TABLE
    ):
        yield


def forget_old_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take every old module path of 0.1 (`session_journal._moved`) out of `sys.modules` until
    the test ends, so that importing one runs its alias again and warns again (a process warns
    once for each)."""
    for name in list(sys.modules):
        if any(name == old or name.startswith(old + ".") for old in MOVED):
            monkeypatch.delitem(sys.modules, name)


def old_path_deprecated(old: str) -> pytest.WarningsChecker:
    """Expect the `DeprecationWarning` an import of the old module path `old` gives, which names
    its new path."""
    message = f"`{old}` is deprecated, import `{MOVED[old]}`"
    return pytest.warns(DeprecationWarning, match=re.escape(message))
