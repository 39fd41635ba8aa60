"""The type filter (`ApiEventFilter.types`): a page holds the events whose stored body carries
one of the tags, combined by AND with the session and workspace filters, for `load`,
`load_json`, `wait`, `follow` and the followers' window; an undecodable body matches the tag it
is stored with (it reads as a `LegacyNotice`); a bad filter is refused before anything is read.
On both backends and through both APIs."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from session_journal import ApiEvent, ApiEventFilter, InvalidRecord, LegacyNotice, Store
from session_journal.api_events import EVENT_TYPES
from tests.factories import ActivityFactory, SessionFactory
from tests.helpers import store_raw_body
from tests.integration.test_json_pages import a_log_of_everything, same_page

pytestmark = pytest.mark.both_apis


def stored_tags(store: Store) -> list[tuple[int, str, object]]:
    """Every stored event as `(seq, session_id, the type tag of its stored JSON)`, read with
    SQL and decoded here, independently of the filter."""
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT seq, session_id, CAST(body AS TEXT) FROM api_events ORDER BY seq")
            ).fetchall()
    finally:
        engine.dispose()
    tags = []
    for seq, session_id, body in rows:
        try:
            raw = json.loads(body)
        except ValueError:
            raw = None
        tags.append((seq, session_id, raw.get("type") if isinstance(raw, dict) else None))
    return tags


def test_a_page_holds_the_events_of_the_types_named(store: Store) -> None:
    a_log_of_everything(store)
    tags = stored_tags(store)
    workspaces = {"demo-alpha": "demo", "demo-beta": "demo", "s-hand": "w-hand"}
    for types in (
        ["turn_started"],
        ["turn_ended", "turn_started"],
        ["session_fault", "input_required", "session_fault"],  # duplicates merged
        ["legacy_notice"],
        list(EVENT_TYPES),
    ):
        for session_id in (None, "demo-alpha", "s-hand"):
            for workspace_id in (None, "w-hand"):
                event_filter = ApiEventFilter(
                    session_id=session_id, workspace_id=workspace_id, types=types
                )
                expected = [
                    seq
                    for seq, owner, tag in tags
                    if tag in types
                    and session_id in (None, owner)
                    and workspace_id in (None, workspaces.get(owner))
                ]
                page = store.events.load(event_filter, after_seq=0, limit=1000)
                assert [event.seq for event in page.events] == expected, event_filter
                for after_seq in (0, 3, None):
                    same_page(store, event_filter, after_seq)  # the JSON page is the same
    # A stored session_fault missing a field reads as a LegacyNotice, and matches its stored tag.
    [fault] = [
        event
        for event in store.events.load(ApiEventFilter(types=["session_fault"]), 0, 1000).events
        if event.session_id == "s-hand"
    ]
    assert isinstance(fault.event, LegacyNotice)
    assert fault.event.original_type == "session_fault"
    legacy = store.events.load(ApiEventFilter(types=["legacy_notice"]), 0, 1000)
    assert legacy.events == ()  # the stored tags are error, no_such_tag and none


def test_an_empty_filtered_page_moves_the_cursor_past_other_types(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    for n in range(3):
        store.faults.record_startup_fault("s", f"fault {n}")
    page = store.events.load(ApiEventFilter(types=["turn_started"]), after_seq=0)
    assert (page.events, page.next_after_seq, page.latest_seq) == ((), 3, 3)
    page = store.events.wait(ApiEventFilter(types=["turn_started"]), after_seq=0, timeout=0.1)
    assert (page.events, page.next_after_seq) == ((), 3)


def test_followers_and_waits_see_only_the_types_named(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    store.faults.record_startup_fault("s", "before")
    only_faults = ApiEventFilter(types=["session_fault"])
    with (
        store.events.follow(only_faults, after_seq=0) as faults,
        store.events.follow(
            ApiEventFilter(session_id="s", types=["activity_changed"]), after_seq=0
        ) as activity,
    ):
        first = faults.next_page(timeout=5)
        assert first is not None and [event.seq for event in first.events] == [1]
        store.activity.record([("s", ActivityFactory())], 10)  # one activity_changed event
        store.faults.record_startup_fault("s", "after")
        seen: list[tuple[int, str]] = []
        while len(seen) < 1:
            page = faults.next_page(timeout=5, events_only=True)
            assert page is not None
            seen += [(event.seq, event.event.type) for event in page.events]
        assert seen == [(3, "session_fault")]
        page = activity.next_page(timeout=5, events_only=True)
        assert page is not None
        assert [(event.seq, event.event.type) for event in page.events] == [(2, "activity_changed")]
    waited = store.events.wait(only_faults, after_seq=1, timeout=5)
    assert [event.seq for event in waited.events] == [3]
    text = store.events.wait_json(only_faults, after_seq=1, timeout=5)
    assert text == waited.model_dump_json().encode()


@pytest.mark.parametrize(
    "types, message",
    [
        ((), "at least one event type"),
        (("nope",), "unknown event types ['nope']; the known types are activity_changed, "),
        ("turn_started", "types"),
        ((1,), "types"),
    ],
)
def test_a_bad_type_filter_is_refused_naming_it(store: Store, types: object, message: str) -> None:
    with pytest.raises(ValidationError, match="types"):
        ApiEventFilter(types=types)  # type: ignore[arg-type]
    made = ApiEventFilter.model_construct(types=types)  # unchecked: the store checks it
    for call in (
        lambda: store.events.load(made, after_seq=0),
        lambda: store.events.load_json(made, after_seq=0),
        lambda: store.events.wait(made, after_seq=0, timeout=0.1),
        lambda: store.events.follow(made, after_seq=0),
    ):
        with pytest.raises(InvalidRecord, match="types") as refused:
            call()
        assert message in str(refused.value)


@pytest.mark.sync_api
def test_the_repository_refuses_a_filter_made_without_checking(store: Store) -> None:
    made = ApiEventFilter.model_construct(types=("turn_started",) * 9)
    with store.unit_of_work() as uow, pytest.raises(InvalidRecord, match="distinct known"):
        uow.events.page_rows(made, 0, 10)


ODD_BODIES = [
    # Duplicate keys: SQLite's JSON functions read the first, pydantic the last.
    '{"type":"turn_started","data":{"turn_id":1,"command_id":"c","started_at_ms":null},'
    '"type":"session_fault","data":{"reason":"startup_failed","message":"m","command_id":null}}',
    # An escaped key, which not every JSON reader spells out alike.
    '{"\\u0074ype":"session_fault","data":{"reason":"startup_failed","message":"m",'
    '"command_id":null}}',
]
NEWER = '{"type":"session_fault","data":{"reason":"quota_new","message":"m","command_id":null}}'


def test_the_window_filters_as_the_database_does(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    filters = [ApiEventFilter(types=[tag]) for tag in EVENT_TYPES]
    followers = [store.events.follow(event_filter) for event_filter in filters]
    try:
        start = store.events.latest_seq()
        for (
            follower
        ) in followers:  # the window is read now, at the frontier: it serves what follows
            assert follower.next_page(timeout=0) is None
        for body in ODD_BODIES:  # stored as they are, as an older or foreign writer might
            store_raw_body(store, "s", body)
        # A body marked canonical by newer code whose value this code does not know.
        seq = store_raw_body(store, "s", NEWER)
        mark_canonical(store, seq)
        store.faults.record_startup_fault("s", "last")
        latest = store.events.latest_seq()
        for event_filter, follower in zip(filters, followers, strict=True):
            served: list[ApiEvent] = []
            while follower.cursor < latest:
                page = follower.next_page(timeout=5)
                assert page is not None
                served += page.events
            loaded = store.events.load(event_filter, after_seq=start, limit=1000).events
            assert [event.seq for event in served] == [event.seq for event in loaded], event_filter
            for event in served:
                assert store.events.event_json(event) == event.model_dump_json().encode()
        waited = store.events.wait_json(after_seq=start, timeout=5)
        assert waited == store.events.wait(after_seq=start, timeout=5).model_dump_json().encode()
    finally:
        for follower in followers:
            follower.close()
    [newer] = store.events.load(ApiEventFilter(types=["session_fault"]), seq - 1, 1).events
    assert isinstance(newer.event, LegacyNotice)  # matched by its stored tag


def mark_canonical(store: Store, seq: int) -> None:
    """Mark a stored body canonical, as the code that wrote it would have."""
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE api_events SET body_canonical = true WHERE seq = :seq"),
                {"seq": seq},
            )
    finally:
        engine.dispose()


def test_a_body_holding_nul_is_stored_and_filtered(store: Store) -> None:
    # PostgreSQL's JSON operators refuse `\u0000`: the tag function of 0010 reads it as
    # `\u0001`, so such a body is still stored, indexed and found by its type.
    store.sessions.save(SessionFactory(id="s"))
    body = '{"type":"session_fault","data":{"reason":"startup_failed","message":"a\\u0000b",'
    body += '"command_id":null}}'
    with store.unit_of_work() as uow:
        uow.events.append("s", 1, body)
        uow.commit()
    [event] = store.events.load(ApiEventFilter(types=["session_fault"]), after_seq=0).events
    assert event.event.message == "a\x00b"  # type: ignore[union-attr]
    assert store.events.load(ApiEventFilter(types=["turn_started"]), after_seq=0).events == ()
