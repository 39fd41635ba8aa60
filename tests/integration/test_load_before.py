"""History: `events.load_before(filter, *, before_seq, limit)` gives the newest events below a
seq, newest first, and its JSON twin exactly that page's JSON. Paging back from the frontier
with `before_seq=next_before_seq` yields every retained event once, the reverse of `load`'s
order, for every filter shape (session, workspace, types, combined); the floor of a pruned log
ends history without an error. On both backends and through both APIs."""

from __future__ import annotations

import pytest

from session_journal import (
    ApiEvent,
    ApiEventFilter,
    ApiEventPageBefore,
    InvalidRecord,
    SessionRecord,
    Store,
)
from tests.helpers import all_events

pytestmark = pytest.mark.both_apis


def history(store: Store, event_filter: ApiEventFilter | None, limit: int) -> list[ApiEvent]:
    """Every retained event matching the filter, paging back from above the frontier."""
    events: list[ApiEvent] = []
    before = store.events.latest_seq() + 1
    while True:
        page = store.events.load_before(event_filter, before_seq=before, limit=limit)
        text = store.events.load_before_json(event_filter, before_seq=before, limit=limit)
        assert text == page.model_dump_json().encode()
        if not page.events:
            assert page.next_before_seq == before
            return events
        assert [event.seq for event in page.events] == sorted(
            (event.seq for event in page.events), reverse=True
        )
        assert len(page.events) <= limit and page.next_before_seq == page.events[-1].seq
        events.extend(page.events)
        before = page.next_before_seq


@pytest.fixture
def log(store: Store) -> Store:
    """Three sessions in two workspaces, faults and lifecycle errors interleaved: 15 events."""
    for session_id, workspace in [("s1", "w1"), ("s2", "w1"), ("s3", "w2")]:
        store.sessions.save(SessionRecord(id=session_id, project_id="p", workspace_id=workspace))
    for round_ in range(5):
        for session_id in ("s1", "s2", "s3"):
            if (round_ + len(session_id)) % 2:
                store.faults.record_startup_fault(session_id, f"boot {round_}")
            else:
                store.sessions.save(
                    SessionRecord(
                        id=session_id,
                        project_id="p",
                        workspace_id="w2" if session_id == "s3" else "w1",
                        last_error=f"error {round_}",
                    )
                )
    assert store.events.latest_seq() == 15
    return store


FILTERS = [
    None,
    ApiEventFilter(session_id="s2"),
    ApiEventFilter(workspace_id="w1"),
    ApiEventFilter(types=["session_fault"]),
    ApiEventFilter(types=["session_fault", "turn_started"]),
    ApiEventFilter(workspace_id="w1", types=["session_fault", "command_ended"]),
    ApiEventFilter(session_id="s3", workspace_id="w1"),
]


@pytest.mark.parametrize("event_filter", FILTERS, ids=str)
@pytest.mark.parametrize("limit", [1, 4, 1000])
def test_paging_back_gives_every_event_once_newest_first(
    log: Store, event_filter: ApiEventFilter | None, limit: int
) -> None:
    expected = all_events(log, event_filter)
    assert history(log, event_filter, limit) == list(reversed(expected))


def test_a_page_says_where_the_log_stands(log: Store) -> None:
    page = log.events.load_before(before_seq=6, limit=3)
    assert page == ApiEventPageBefore(
        events=list(reversed(log.events.load(after_seq=2, limit=3).events)),
        next_before_seq=3,
        latest_seq=15,
        pruned_through=0,
    )
    assert log.events.load_before(before_seq=1).events == ()
    assert log.events.load_before(before_seq=0).next_before_seq == 0
    assert len(log.events.load_before(before_seq=10**6, limit=2000).events) == 15  # clamped


def test_history_ends_at_the_floor_of_a_pruned_log(log: Store) -> None:
    assert log.events.prune(through_seq=9) == 9
    assert [event.seq for event in history(log, None, 4)] == [15, 14, 13, 12, 11, 10]
    page = log.events.load_before(before_seq=5)  # below the floor: history ended, no error
    assert (page.events, page.next_before_seq, page.pruned_through) == ((), 5, 9)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"before_seq": -1}, "before_seq must be between 0 and"),
        ({"before_seq": "5"}, "before_seq must be an integer"),
        ({"before_seq": None}, "before_seq must be an integer"),
        ({"before_seq": 5, "limit": "3"}, "limit must be an integer"),
        ({"before_seq": 5, "filter": {"session_id": "s1"}}, "filter must be an ApiEventFilter"),
    ],
)
def test_bad_arguments_are_refused(log: Store, arguments: dict[str, object], message: str) -> None:
    for load in (log.events.load_before, log.events.load_before_json):
        with pytest.raises(InvalidRecord, match=message):
            load(**arguments)  # type: ignore[arg-type]


def test_before_seq_is_required(log: Store) -> None:
    with pytest.raises(TypeError):
        log.events.load_before()  # type: ignore[call-arg]
