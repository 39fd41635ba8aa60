"""Each page statement walks the log in seq order through an index and never sorts.

White-box: reads the statements the event repository pages with, and the backend's plan for them
on a log of a few thousand events.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import Store
from session_journal.repositories.events import _PAGE_QUERIES
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import append_raw

PARAMS = {"after_seq": 100, "limit": 100, "session_id": "s-3", "workspace_id": "w-1"}


def plan(store: Store, by_session: bool, by_workspace: bool) -> str:
    engine = store._database.reader
    sqlite = engine.dialect.name == "sqlite"
    compiled = _PAGE_QUERIES[(sqlite, by_session, by_workspace)].compile(engine)
    params = compiled.construct_params(PARAMS)
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            assert compiled.positiontup is not None
            rows = connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled}", tuple(params[k] for k in compiled.positiontup)
            )
            return "\n".join(row[3] for row in rows)
        connection.execute(sa.text("ANALYZE"))
        rows = connection.exec_driver_sql(f"EXPLAIN {compiled}", params)
        return "\n".join(row[0] for row in rows)


@pytest.fixture
def big_store(store: Store) -> Store:
    for n in range(10):
        store.sessions.save(SessionFactory(id=f"s-{n}", workspace_id=f"w-{n % 5}"))
    body = SessionFaultFactory(message="x" * 200).model_dump_json()
    for n in range(10):
        append_raw(store, f"s-{n}", body, count=500)
    return store


@pytest.mark.parametrize("by_session", [False, True])
@pytest.mark.parametrize("by_workspace", [False, True])
def test_page_plans_use_an_index_in_seq_order(
    big_store: Store, by_session: bool, by_workspace: bool
) -> None:
    text = plan(big_store, by_session, by_workspace)
    if big_store._database.reader.dialect.name == "sqlite":
        assert "TEMP B-TREE" not in text
        expected = "ix_api_events_session_id_seq" if by_session else "INTEGER PRIMARY KEY"
        assert expected in text
    else:
        assert "Sort" not in text
        assert "Index" in text
