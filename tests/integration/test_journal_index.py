"""The project index on both backends: the writer feeds it, users search it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from session_journal import InvalidRecord, StorageError, Store, WriteInsideUnitOfWork
from session_journal.journal import (
    IndexRow,
    JournalWriter,
    ProjectIndex,
    Redactor,
    SessionStats,
    WatchWarn,
)
from tests.factories import JournalEnvelopeFactory, assistant_msg, flow_start, user_msg

pytestmark = pytest.mark.both_apis


def write(store: Store, directory: Path, session_id: str, *envelopes: object) -> JournalWriter:
    with JournalWriter(
        directory / session_id, index=store.index, session_id=session_id, redactor=Redactor()
    ) as writer:
        for item in envelopes:
            writer.send(item)
        assert writer.flush().persisted
    return writer


def test_three_events_reach_both_the_file_and_the_index(store: Store, tmp_path: Path) -> None:
    writer = write(store, tmp_path, "session-1", flow_start(1), user_msg(2, "alpha"), flow_start(3))
    assert len(writer.events_path.read_text().splitlines()) == 3
    with store.unit_of_work() as uow:
        count = uow.connection.exec_driver_sql(
            "SELECT COUNT(*) FROM project_events WHERE session_id = 'session-1'"
        ).scalar_one()
    assert count == 3
    [hit] = store.index.search("alpha")
    assert (hit.session_id, hit.seq, hit.kind) == ("session-1", 2, "user_msg")


def test_a_user_message_is_found_by_full_text_search(store: Store, tmp_path: Path) -> None:
    write(store, tmp_path, "session-1", user_msg(1, "Please refactor the payment gateway"))
    stats = SessionStats.load_or_rebuild(tmp_path / "session-1")
    assert (stats.event_count, stats.message_count, stats.user_message_count) == (1, 1, 1)
    [hit] = store.index.search("payment gateway")
    assert hit.seq == 1 and hit.kind == "user_msg"
    assert "[payment]" in hit.snippet and "[gateway]" in hit.snippet
    assert hit.ts == "2026-11-29T12:00:01Z"


@pytest.fixture
def indexed(store: Store, tmp_path: Path) -> Store:
    write(
        store,
        tmp_path,
        "session-1",
        user_msg(1, "the quick brown fox jumps over the lazy dog"),
        assistant_msg(2, "brown bread and quick coffee"),
        assistant_msg(3, "fox fox fox: a report about foxes, the fox and more fox"),
        JournalEnvelopeFactory(seq=4, event=WatchWarn(message="disk almost full: 95% used")),
        user_msg(5, 'He said "OR NEAR(x) -y *" verbatim; c++ & c# too'),
    )
    write(store, tmp_path, "session-2", user_msg(1, "a quick brown fox in another session"))
    return store


def seqs(store: Store, query: str, **options: object) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.seq) for hit in store.index.search(query, **options)]  # type: ignore[arg-type]


def test_words_are_anded_and_phrases_match_in_order(indexed: Store) -> None:
    assert sorted(seqs(indexed, "quick brown")) == [
        ("session-1", 1),
        ("session-1", 2),
        ("session-2", 1),
    ]
    assert sorted(seqs(indexed, '"quick brown"')) == [("session-1", 1), ("session-2", 1)]
    assert seqs(indexed, '"brown quick"') == []
    assert seqs(indexed, "disk full") == [("session-1", 4)]


def test_operators_and_punctuation_typed_by_a_user_never_raise(indexed: Store) -> None:
    for query in [
        '"',
        '"unclosed phrase',
        "*",
        "-",
        "OR",
        "NEAR(",
        "fox AND",
        "fox OR dog",
        "c++",
        "x:y",
        "'; DROP TABLE project_events; --",
        "(",
        ")",
        "^",
        "fox*",
        "NOT fox",
        "{",
        "\\",
        "fox -dog",
        "%",
        "_",
    ]:
        indexed.index.search(query)
    assert seqs(indexed, "OR NEAR(x)") == [("session-1", 5)]
    assert seqs(indexed, "*") == []
    assert seqs(indexed, "-") == []


def test_a_session_filter_and_the_limit(indexed: Store) -> None:
    assert seqs(indexed, "fox", session_id="session-2") == [("session-2", 1)]
    assert len(indexed.index.search("fox", limit=1)) == 1
    assert seqs(indexed, "fox", session_id="nobody") == []


def test_hits_are_ranked_best_first(indexed: Store) -> None:
    hits = indexed.index.search("fox")
    assert hits[0].seq == 3 and hits[0].session_id == "session-1"
    assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)


def test_bad_queries(indexed: Store) -> None:
    for query in ["", "   ", None]:
        with pytest.raises(InvalidRecord, match="query"):
            indexed.index.search(query)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="invalid id"):
        indexed.index.search("fox", session_id="../x")


def test_rebuild_reindexes_a_session_from_its_file(indexed: Store, tmp_path: Path) -> None:
    before = seqs(indexed, "fox", session_id="session-1")
    with indexed.unit_of_work() as uow:
        uow.project_events.delete_session("session-1")
        uow.commit()
    assert seqs(indexed, "fox", session_id="session-1") == []
    assert indexed.index.rebuild(tmp_path / "session-1", "session-1") == 5
    assert seqs(indexed, "fox", session_id="session-1") == before
    assert indexed.index.rebuild(tmp_path / "session-1", "session-1") == 5  # idempotent


def test_secrets_never_reach_the_index(store: Store, tmp_path: Path) -> None:
    secret = "ghp_" + "A1b2C3d4" * 4
    write(store, tmp_path, "session-1", user_msg(1, f"use token {secret} for the deploy"))
    [hit] = store.index.search("deploy")
    assert secret not in hit.snippet
    with store.unit_of_work() as uow:
        payload = uow.connection.exec_driver_sql(
            "SELECT CAST(payload_json AS TEXT) FROM project_events"
        ).scalar_one()
    assert secret not in payload and "[REDACTED]" in payload


def test_an_index_failure_never_fails_the_file_write(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = iter([StorageError("index insert failed: server closed"), RuntimeError("a bug")] * 9)

    def unavailable(*_: object) -> None:
        raise next(errors)

    monkeypatch.setattr(ProjectIndex, "insert", unavailable)
    with JournalWriter(tmp_path / "s", index=store.index, session_id="s") as writer:
        writer.send(flow_start(1))
        result = writer.flush()
    assert result.persisted
    assert len((tmp_path / "s" / "events.jsonl").read_text().splitlines()) == 1
    assert "could not be indexed" in caplog.text
    with JournalWriter(tmp_path / "s", index=store.index, session_id="s") as writer:
        writer.send(flow_start(2))
        assert writer.flush().persisted  # the index thread survived the unexpected error


def test_paths_versions_and_addresses_are_found_on_both_backends(
    store: Store, tmp_path: Path
) -> None:
    write(
        store,
        tmp_path,
        "session-1",
        user_msg(1, "edit src/main.py for python 3.14, mail alice@example.com"),
        user_msg(2, "see https://example.org/docs/setup for details"),
    )
    for query, expected in [
        ("src/main.py", [1]),
        ("3.14", [1]),
        ('"version 3.14"', []),
        ("python 3.14", [1]),
        ("alice@example.com", [1]),
        ("example.org/docs/setup", [2]),
    ]:
        assert [seq for _, seq in seqs(store, query)] == expected, query


def test_one_row_the_index_refuses_does_not_keep_its_neighbours_out(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ProjectIndex.insert

    def refuse_seq_2(self: ProjectIndex, rows: list[IndexRow]) -> None:
        if any(row.seq == 2 for row in rows):
            raise StorageError("index insert failed: value too long")
        original(self, rows)

    monkeypatch.setattr(ProjectIndex, "insert", refuse_seq_2)
    write(
        store,
        tmp_path,
        "session-1",
        user_msg(1, "first note"),
        user_msg(2, "second note"),
        user_msg(3, "third note"),
    )
    assert sorted(seq for _, seq in seqs(store, "note")) == [1, 3]


def test_a_slow_index_never_delays_the_file(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    original = ProjectIndex.insert

    def slow(self: ProjectIndex, rows: list[IndexRow]) -> None:
        release.wait(10)
        original(self, rows)

    monkeypatch.setattr(ProjectIndex, "insert", slow)
    with JournalWriter(tmp_path / "s", index=store.index, session_id="s") as writer:
        for seq in range(1, 6):
            writer.send(flow_start(seq))
        deadline = time.monotonic() + 10
        while len(writer.events_path.read_text().splitlines()) < 5:
            assert time.monotonic() < deadline, "the file waited for the index"
            time.sleep(0.01)
        release.set()
        assert writer.flush().persisted
    assert len(store.index.search("flow", session_id="s")) == 0  # flow_start has no text
    with store.unit_of_work() as uow:
        count = uow.connection.exec_driver_sql("SELECT COUNT(*) FROM project_events").scalar_one()
    assert count == 5


def test_flushing_inside_a_unit_of_work_of_the_index_is_refused(
    store: Store, tmp_path: Path
) -> None:
    writer = JournalWriter(tmp_path / "s", index=store.index, session_id="s")
    with store.unit_of_work(), pytest.raises(WriteInsideUnitOfWork, match="would wait forever"):
        writer.flush()
    writer.close()


def test_search_and_rebuild_arguments(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InvalidRecord, match="limit must be a positive integer"):
        store.index.search("fox", limit=0)
    with pytest.raises(InvalidRecord, match="cannot read the events"):
        store.index.rebuild(tmp_path / "missing", "session-1")
