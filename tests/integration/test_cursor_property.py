"""Property: whatever is appended and deleted, following the cursor with any page sizes and
filters yields exactly the surviving matching events, in order, each once."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_journal import ApiEventFilter, Store
from tests.factories import SessionFactory

# An operation: append to session i, or delete session i.
operations = st.lists(
    st.tuples(st.sampled_from(["append", "append", "append", "delete"]), st.integers(0, 3)),
    max_size=25,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    operations=operations,
    limits=st.lists(st.integers(-2, 6), min_size=1, max_size=5),
    filter_on=st.sampled_from(["none", "session", "workspace"]),
)
def test_following_the_cursor_yields_each_surviving_event_once(
    store: Store, operations: list[tuple[str, int]], limits: list[int], filter_on: str
) -> None:
    run = uuid.uuid4().hex[:8]  # examples share the store: fresh ids for each
    ids = [f"{run}-{n}" for n in range(4)]
    for n, session_id in enumerate(ids):
        store.sessions.save(SessionFactory(id=session_id, workspace_id=f"{run}-w{n % 2}"))
    start = store.events.latest_seq()
    expected: list[tuple[str, str]] = []  # (session, message) of surviving events, in order
    for number, (operation, index) in enumerate(operations):
        session_id = ids[index]
        if operation == "append":
            if store.faults.record_startup_fault(session_id, f"event {number}"):
                expected.append((session_id, f"event {number}"))
        else:
            store.sessions.delete(session_id)
            expected = [event for event in expected if event[0] != session_id]

    event_filter = {
        "none": ApiEventFilter(),
        "session": ApiEventFilter(session_id=ids[0]),
        "workspace": ApiEventFilter(workspace_id=f"{run}-w1"),
    }[filter_on]
    if filter_on == "session":
        expected = [event for event in expected if event[0] == ids[0]]
    elif filter_on == "workspace":
        expected = [event for event in expected if ids.index(event[0]) % 2 == 1]

    seen, cursor, calls = [], start, 0
    while True:
        page = store.events.load(event_filter, after_seq=cursor, limit=limits[calls % len(limits)])
        calls += 1
        assert page.next_after_seq >= cursor
        assert all(event.seq > cursor for event in page.events)
        seen.extend(page.events)
        cursor = page.next_after_seq
        if not page.events:
            break
    assert cursor == store.events.latest_seq()
    assert [event.seq for event in seen] == sorted({event.seq for event in seen})
    assert [(event.session_id, event.event.message) for event in seen] == expected  # type: ignore[union-attr]
