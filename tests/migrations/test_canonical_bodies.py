"""Revision 0009: `api_events.body_canonical`, and the package's backfill of the rows stored
before it, run by `migrations.upgrade` after the revision (resumed by the next upgrade when
cut short; not run by Alembic alone), on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import InputRequired, Store, migrations
from session_journal.storage.backfill import TO_MARK
from tests.migrations.test_data_loss import alembic, minimal_ini
from tests.migrations.test_pruned_through import read

CANONICAL = InputRequired(request=None, turn_id=1).model_dump_json()
BODIES = [CANONICAL, json.dumps(json.loads(CANONICAL), indent=1), '{"type":"nope","data":{}}']


def at_0008_with_bodies(url: str) -> None:
    """A database at 0008 holding one event of each body of `BODIES`, seqs 1 to 3."""
    migrations.upgrade(url, "0008_deletion_counter")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "INSERT INTO sessions (session_id, project_id, state) "
                    "VALUES ('s1', 'p', 'running')"
                )
            )
            for seq, body in enumerate(BODIES, start=1):
                connection.execute(
                    sa.text(
                        "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) "
                        "VALUES (:seq, 's1', 1, :body)"
                    ),
                    {"seq": seq, "body": body},
                )
            connection.execute(
                sa.text("UPDATE event_sequences SET last_seq = 3 WHERE name = 'api_events'")
            )
    finally:
        engine.dispose()


def marks(url: str) -> list[tuple[int, bool]]:
    rows = read(url, "SELECT seq, body_canonical FROM api_events ORDER BY seq")
    return [(int(str(seq)), bool(mark)) for seq, mark in rows]


def to_mark(url: str) -> list[tuple[object, ...]]:
    return read(
        url, f"SELECT last_seq, pruned_through FROM event_sequences WHERE name = '{TO_MARK}'"
    )


def test_an_upgrade_marks_the_canonical_bodies_stored_before(url: str) -> None:
    at_0008_with_bodies(url)
    migrations.upgrade(url)
    assert marks(url) == [(1, True), (2, False), (3, False)]
    assert to_mark(url) == []  # done
    with Store.open(url) as store:
        page = store.events.load(after_seq=0)
        assert store.events.load_json(after_seq=0) == page.model_dump_json().encode()


def test_alembic_alone_leaves_the_backfill_to_the_next_upgrade(url: str, tmp_path: Path) -> None:
    at_0008_with_bodies(url)
    done = alembic(minimal_ini(tmp_path), url, "upgrade", "head")
    assert done.returncode == 0, done.stderr
    assert marks(url) == [(1, False), (2, False), (3, False)]  # correct, only slower
    assert to_mark(url) == [(3, 0)]
    with Store.open(url) as store:
        page = store.events.load(after_seq=0)
        assert store.events.load_json(after_seq=0) == page.model_dump_json().encode()
    migrations.upgrade(url)  # at head already: it finishes the backfill
    assert (marks(url), to_mark(url)) == ([(1, True), (2, False), (3, False)], [])


@pytest.mark.parametrize("target", ["0008_deletion_counter"])
def test_the_downgrade_drops_the_column_and_the_row(url: str, target: str) -> None:
    at_0008_with_bodies(url)
    migrations.upgrade(url)
    assert migrations.downgrade(url, target) == ()
    assert to_mark(url) == []
    assert [row[0] for row in read(url, "SELECT seq FROM api_events ORDER BY seq")] == [1, 2, 3]
    migrations.upgrade(url)
    assert marks(url) == [(1, True), (2, False), (3, False)]
