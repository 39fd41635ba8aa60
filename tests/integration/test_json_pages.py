"""JSON pages: `load_json` and `wait_json` give exactly `page.model_dump_json().encode()` of the
page `load` and `wait` give, byte for byte, for every event type, hand-written bodies in and
out of their canonical form, legacy and undecodable bodies, filters, cursors at and past the
frontier, an empty log and a pruned prefix; bodies stored in their canonical form are marked
(`body_canonical`) and spliced without decoding; the followers' window decodes each event once
and its pages share the frozen events. On both backends and through both APIs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import (
    ApiEvent,
    ApiEventFilter,
    ApiEventPage,
    CursorExpired,
    InputRequired,
    InvalidRecord,
    LegacyNotice,
    SessionRecord,
    Store,
)
from session_journal import api_events as api_events_module
from session_journal.demo import run_demo
from session_journal.storage.backfill import TO_MARK, mark_canonical_bodies
from tests.factories import SessionFactory
from tests.helpers import append_raw, store_raw_body

pytestmark = pytest.mark.both_apis

LEGACY = [
    '{"type":"error","data":{"command_id":"c-1","message":"old shape"}}',  # before 0004
    '{"type":"no_such_tag","data":{"x":1}}',  # an unknown tag
    '{"type":"session_fault","data":{"reason":"startup_failed"}}',  # a field missing
    "[1, 2, 3]",  # JSON, not a body
]


def same_page(store: Store, event_filter: ApiEventFilter | None, after_seq: int | None) -> bytes:
    """`load_json`, checked against the typed page's own JSON; the bytes."""
    for limit in (1, 3, 100):
        page = store.events.load(event_filter, after_seq, limit)
        text = store.events.load_json(event_filter, after_seq, limit)
        assert text == page.model_dump_json().encode(), (event_filter, after_seq, limit)
        parts = store.events.load_json_events(event_filter, after_seq, limit)
        assert parts.events == [event.model_dump_json() for event in page.events]
        assert parts[1:4] == (page.next_after_seq, page.latest_seq, page.pruned_through)
        assert parts.seqs == tuple(event.seq for event in page.events)
    return text


def canonical_marks(store: Store) -> dict[int, bool]:
    engine = sa.create_engine(store.url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT seq, body_canonical FROM api_events"))
            return {int(seq): bool(mark) for seq, mark in rows}
    finally:
        engine.dispose()


def a_log_of_everything(store: Store) -> dict[str, list[int]]:
    """The demo's events (seven types, written by the services), hand-written bodies in their
    canonical form and not, legacy and undecodable bodies stored as older code would: which
    seqs are of which kind."""
    run_demo(store, lambda _: None)
    kinds: dict[str, list[int]] = {"services": list(range(1, store.events.latest_seq() + 1))}
    store.sessions.save(SessionFactory(id="s-hand", workspace_id="w-hand"))
    question = InputRequired(request=None, turn_id=3).model_dump_json()
    append_raw(store, "s-hand", question)
    spaced = json.dumps(json.loads(question), indent=1, ensure_ascii=True) + " "
    append_raw(store, "s-hand", spaced)
    kinds["hand_canonical"], kinds["hand_other"] = [kinds["services"][-1] + 1], []
    kinds["hand_other"] = [kinds["hand_canonical"][0] + 1]
    kinds["legacy"] = [store_raw_body(store, "s-hand", body) for body in LEGACY]
    return kinds


def test_json_pages_are_the_typed_pages_json_byte_for_byte(store: Store) -> None:
    same_page(store, None, 0)  # an empty log
    same_page(store, None, None)
    kinds = a_log_of_everything(store)
    latest = store.events.latest_seq()
    for after_seq in (0, 1, 5, latest - 1, latest, latest + 3, None):
        for event_filter in (
            None,
            ApiEventFilter(session_id="demo-alpha"),
            ApiEventFilter(session_id="s-hand"),
            ApiEventFilter(workspace_id="w-hand"),
            ApiEventFilter(session_id="demo-beta", workspace_id="w-hand"),
            ApiEventFilter(session_id="nobody"),
        ):
            same_page(store, event_filter, after_seq)
    page = store.events.load(after_seq=0, limit=1000)
    types = {event.event.type for event in page.events}
    assert types == {
        "activity_changed",
        "session_fault",
        "turn_started",
        "input_required",
        "input_resolved",
        "turn_ended",
        "command_ended",
        "legacy_notice",
    }
    marks = canonical_marks(store)
    assert all(marks[seq] for seq in kinds["services"] + kinds["hand_canonical"])
    assert not any(marks[seq] for seq in kinds["hand_other"] + kinds["legacy"])
    [other] = [event for event in page.events if event.seq == kinds["hand_other"][0]]
    assert other.event == InputRequired(request=None, turn_id=3)  # decoded, stored as given
    legacy = [event.event for event in page.events if event.seq in kinds["legacy"]]
    assert all(isinstance(body, LegacyNotice) for body in legacy)


def test_a_pruned_prefix_and_an_expired_cursor(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    for n in range(6):
        store.faults.record_startup_fault("s", f"fault {n}")
    store.events.prune(through_seq=3)
    text = same_page(store, None, 0)
    assert json.loads(text)["pruned_through"] == 3
    assert [event["seq"] for event in json.loads(text)["events"]] == [4, 5, 6]
    same_page(store, None, 3)
    with pytest.raises(CursorExpired):
        store.events.load_json(after_seq=2)


def test_wait_json_is_the_json_of_waits_page(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    store.faults.record_startup_fault("s", "one")
    for after_seq in (0, 1):
        page = store.events.wait(after_seq=after_seq, timeout=0.1)
        assert store.events.wait_json(after_seq=after_seq, timeout=0.1) == (
            page.model_dump_json().encode()
        )
    assert json.loads(store.events.wait_json(after_seq=1, timeout=0.1))["events"] == []


def test_the_backfill_marks_the_canonical_bodies_older_code_stored(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    canonical = InputRequired(request=None, turn_id=1).model_dump_json()
    seqs = [store_raw_body(store, "s", body) for body in [canonical, canonical + " ", *LEGACY]]
    assert not any(canonical_marks(store).values())
    engine = sa.create_engine(store.url)
    try:
        with engine.begin() as connection:  # what 0009 leaves to mark: up to the frontier
            connection.execute(
                sa.text(
                    "INSERT INTO event_sequences (name, last_seq, pruned_through) "
                    "VALUES (:name, :through, :checked)"
                ),
                {"name": TO_MARK, "through": seqs[-1], "checked": seqs[0] - 1},
            )
        assert mark_canonical_bodies(engine) == 1
        assert mark_canonical_bodies(engine) == 0  # done: its row is gone
        with engine.connect() as connection:
            left = connection.execute(
                sa.text("SELECT count(*) FROM event_sequences WHERE name = :name"),
                {"name": TO_MARK},
            )
            assert left.scalar_one() == 0
    finally:
        engine.dispose()
    assert canonical_marks(store) == {seq: seq == seqs[0] for seq in seqs}
    same_page(store, None, 0)


@pytest.mark.sync_api
def test_the_window_decodes_each_event_once_and_its_pages_share_frozen_events(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionRecord(id="s", project_id="p"))
    decoded: list[int] = []
    decode_events: Callable[..., Any] = api_events_module.decode_events

    def counting(rows: list[Any], texts: Any = None) -> Any:
        decoded.extend(row[0] for row in rows)
        return decode_events(rows, texts)

    monkeypatch.setattr("session_journal.follow.window.decode_events", counting)
    with store.events.follow(after_seq=0) as one, store.events.follow(after_seq=0) as two:
        assert (one.next_page(timeout=0), two.next_page(timeout=0)) == (None, None)  # at the tail
        store.faults.record_startup_fault("s", "shared")
        first, second = one.next_page(timeout=5), two.next_page(timeout=5)
    assert first is not None and second is not None
    assert [event.seq for event in first.events] == [1]
    assert first.events[0] is second.events[0]  # one object, decoded once for the store
    assert decoded == [1]
    with pytest.raises(dataclasses.FrozenInstanceError, match="seq"):
        first.events[0].seq = 2  # type: ignore[misc]


def test_event_json_is_each_events_json_made_once_by_the_window(store: Store) -> None:
    store.sessions.save(SessionFactory(id="s"))
    with store.events.follow(after_seq=0) as follower:
        store.faults.record_startup_fault("s", "one")
        store.faults.record_startup_fault("s", "two")
        served: list[ApiEvent] = []
        while len(served) < 2:
            page = follower.next_page(timeout=5, events_only=True)
            assert page is not None
            served += page.events
    loaded = store.events.load(after_seq=0).events
    for event in [*served, *loaded]:
        assert store.events.event_json(event) == event.model_dump_json().encode()
    with pytest.raises(InvalidRecord, match="event must be an ApiEvent, got dict"):
        store.events.event_json({"seq": 1})  # type: ignore[arg-type]


@pytest.mark.sync_api
def test_wait_json_takes_each_events_json_from_the_window(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.save(SessionFactory(id="s"))
    store.events.wait(after_seq=0, timeout=0)  # the window is read, at the frontier
    store.faults.record_startup_fault("s", "one")
    page = store.events.wait(after_seq=0, timeout=5)
    assert store.following.window.text_of(page.events[0]) is not None  # the window's own event
    encoded: list[str] = []
    for model in (ApiEvent, ApiEventPage):

        def counting(self: Any, *, original: Any = model.model_dump_json, **kwargs: Any) -> str:
            encoded.append(type(self).__name__)
            return str(original(self, **kwargs))

        monkeypatch.setattr(model, "model_dump_json", counting)
    text = store.events.wait_json(after_seq=0, timeout=5)
    assert encoded == []  # nothing encoded again: the window's text
    monkeypatch.undo()
    assert text == store.events.load(after_seq=0).model_dump_json().encode()
