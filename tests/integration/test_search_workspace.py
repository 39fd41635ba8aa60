"""`store.index.search(..., workspace_id=...)`: only events of that workspace's sessions; index
rows of sessions that `sessions` does not hold belong to no workspace and are never served to a
workspace-scoped caller. On both backends, through both APIs, and on the fakes."""

from __future__ import annotations

from typing import Any

import pytest

from session_journal import InvalidRecord, SessionRecord, Store
from session_journal.journal.search import IndexRow
from tests.fakes import FakeServices

pytestmark = pytest.mark.both_apis


def row(session_id: str, seq: int, text: str) -> IndexRow:
    return IndexRow(session_id, seq, "2026-11-29T12:00:00Z", "user_msg", None, None, text, "{}")


def scoped(services: Any) -> list[list[tuple[str, int]]]:
    services.sessions.save(SessionRecord(id="a1", project_id="p", workspace_id="w-a"))
    services.sessions.save(SessionRecord(id="a2", project_id="p", workspace_id="w-a"))
    services.sessions.save(SessionRecord(id="b1", project_id="p", workspace_id="w-b"))
    services.index.insert(
        [
            row("a1", 1, "deploy failed"),
            row("a2", 1, "deploy ok"),
            row("b1", 1, "deploy b"),
            row("journal-only", 1, "deploy orphan"),  # a journal without a session row
        ]
    )
    found = []
    for arguments in [
        {},
        {"workspace_id": "w-a"},
        {"workspace_id": "w-b"},
        {"workspace_id": "w-none"},
        {"workspace_id": "w-a", "session_id": "b1"},
        {"workspace_id": "w-a", "session_id": "a2"},
    ]:
        hits = services.index.search("deploy", **arguments)
        found.append(sorted((hit.session_id, hit.seq) for hit in hits))
    return found


EXPECTED = [
    [("a1", 1), ("a2", 1), ("b1", 1), ("journal-only", 1)],
    [("a1", 1), ("a2", 1)],
    [("b1", 1)],
    [],
    [],
    [("a2", 1)],
]


def test_a_workspace_scoped_search_sees_its_sessions_only(store: Store) -> None:
    assert scoped(store) == EXPECTED


def test_the_fakes_scope_the_same_way() -> None:
    assert scoped(FakeServices()) == EXPECTED


def test_a_bad_workspace_is_refused(store: Store) -> None:
    for workspace_id in ["", "../w", 5]:
        with pytest.raises(InvalidRecord, match="workspace_id"):
            store.index.search("deploy", workspace_id=workspace_id)  # type: ignore[arg-type]


def reused(services: Any) -> list[tuple[str, str]]:
    """A session of one workspace deleted, its id used again in another: the new session
    inherits none of the old one's index rows."""
    services.sessions.save(SessionRecord(id="s", project_id="p", workspace_id="tenant-a"))
    services.index.insert([row("s", 1, "tenant a secret password")])
    assert services.sessions.delete("s")
    services.sessions.save(SessionRecord(id="s", project_id="p", workspace_id="tenant-b"))
    found = [(hit.session_id, hit.snippet) for hit in services.index.search("secret")]
    found += [
        (h.session_id, h.snippet) for h in services.index.search("secret", workspace_id="tenant-b")
    ]
    return found


def test_deleting_a_session_deletes_its_index_rows(store: Store) -> None:
    assert reused(store) == []


def test_the_fakes_delete_them_too() -> None:
    assert reused(FakeServices()) == []
