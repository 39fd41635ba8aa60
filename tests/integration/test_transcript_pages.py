"""A session's transcript by pages, newest first: `projection.transcript(session_id, *,
before_position=None, limit=100)`. Paging back with `next_before_position` gives every item once,
the reverse of the materialized transcript; an unknown session is `None`. On both backends and
through both APIs."""

from __future__ import annotations

import pytest

from session_journal import InvalidRecord, SessionRecord, Store
from session_journal.relay import AgentMessage, RelayChain, TranscriptItem, TranscriptPage

pytestmark = pytest.mark.both_apis


@pytest.fixture
def talked(store: Store) -> Store:
    """session-1 with 7 agent messages (positions 0..6); session-2 with one."""
    for session_id in ("session-1", "session-2"):
        store.sessions.save(SessionRecord(id=session_id, project_id="p"))
    said = [AgentMessage(message_id=f"m-{n}", text=f"line {n}") for n in range(7)]
    store.projection.apply("session-1", RelayChain().extend(said, recorded_at_ms=100))
    other = [AgentMessage(message_id="x", text="elsewhere")]
    store.projection.apply("session-2", RelayChain().extend(other, recorded_at_ms=100))
    return store


def pages(store: Store, limit: int) -> list[TranscriptItem]:
    items: list[TranscriptItem] = []
    before: int | None = None
    while True:
        page = store.projection.transcript("session-1", before_position=before, limit=limit)
        assert page is not None and page.session_id == "session-1"
        if not page.items:
            assert page.next_before_position == (before or 0)
            return items
        assert len(page.items) <= limit
        assert page.next_before_position == page.items[-1].position
        items.extend(page.items)
        before = page.next_before_position


@pytest.mark.parametrize("limit", [1, 3, 7, 1000])
def test_paging_back_gives_every_item_once_newest_first(talked: Store, limit: int) -> None:
    materialized = talked.projection.load("session-1")
    assert materialized is not None and len(materialized.transcript) == 7
    assert pages(talked, limit) == list(reversed(materialized.transcript))


def test_a_page_of_the_newest_items(talked: Store) -> None:
    materialized = talked.projection.load("session-1")
    assert materialized is not None
    newest = list(reversed(materialized.transcript))
    page = talked.projection.transcript("session-1", limit=2)
    assert page == TranscriptPage(session_id="session-1", items=newest[:2], next_before_position=5)
    assert [item.stable_id for item in page.items] == ["agent:m-6", "agent:m-5"]
    page = talked.projection.transcript("session-1", before_position=2)
    assert page is not None and [item.position for item in page.items] == [1, 0]
    empty = talked.projection.transcript("session-1", before_position=0)
    assert empty is not None and (empty.items, empty.next_before_position) == ([], 0)


def test_an_unknown_session_is_none_and_a_new_one_is_empty(talked: Store) -> None:
    assert talked.projection.transcript("nobody") is None
    talked.sessions.save(SessionRecord(id="quiet", project_id="p"))
    assert talked.projection.transcript("quiet") == TranscriptPage(
        session_id="quiet", items=[], next_before_position=0
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"session_id": "../x"}, "session_id"),
        ({"session_id": "session-1", "before_position": -1}, "before_position must be between"),
        ({"session_id": "session-1", "before_position": "3"}, "before_position must be an int"),
        ({"session_id": "session-1", "limit": None}, "limit must be an integer"),
    ],
)
def test_bad_arguments_are_refused(
    talked: Store, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRecord, match=message):
        talked.projection.transcript(**arguments)  # type: ignore[arg-type]
