"""Events of a page decode their bodies on first use, and behave exactly like built events."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import threading

import pytest

from session_journal import ApiEvent, ApiEventPage, LegacyNotice, SessionFault, Store
from session_journal import api_events as events_module
from tests.factories import SessionFactory, SessionFaultFactory
from tests.helpers import store_raw_body


def first_event(store: Store) -> ApiEvent:
    return store.events.load(after_seq=0).events[0]


def built(event: ApiEvent, body: SessionFault | LegacyNotice) -> ApiEvent:
    """The same event constructed with validation, for comparison."""
    return ApiEvent(
        seq=event.seq, session_id=event.session_id, recorded_at_ms=event.recorded_at_ms, event=body
    )


def test_a_page_event_decodes_on_first_read_and_keeps_that_body(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    event = first_event(store)
    assert "event" not in event.__dict__  # nothing decoded by paging
    body = event.event
    assert body == SessionFaultFactory(message="image pull failed")
    assert event.event is body  # decoded once


def test_dumps_equality_repr_and_iteration_decode_first(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    expected = built(first_event(store), SessionFaultFactory(message="image pull failed"))
    wrapped = {"type": "session_fault", "data": expected.event.model_dump(mode="json")["data"]}

    assert first_event(store).model_dump(mode="json")["event"] == wrapped
    assert json.loads(first_event(store).model_dump_json())["event"] == wrapped
    assert first_event(store) == expected
    assert expected == first_event(store)
    assert repr(first_event(store)) == repr(expected)
    assert dict(first_event(store)) == dict(expected)
    assert first_event(store).model_fields_set == set(ApiEvent.model_fields)
    assert first_event(store).model_dump(exclude_unset=True) == expected.model_dump()
    page = store.events.load(after_seq=0)
    assert isinstance(page, ApiEventPage)
    assert json.loads(page.model_dump_json())["events"] == [expected.model_dump(mode="json")]


def test_copies_and_pickles_of_an_undecoded_event_decode_alike(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    expected = built(first_event(store), SessionFaultFactory(message="image pull failed"))
    for duplicate in (
        copy.copy(first_event(store)),
        copy.deepcopy(first_event(store)),
        first_event(store).model_copy(),
        pickle.loads(pickle.dumps(first_event(store))),
    ):
        assert duplicate.event == expected.event
        assert duplicate == expected


def test_a_shallow_copy_shares_the_body_as_a_built_event_would(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    for make_copy in (copy.copy, lambda event: event.model_copy()):
        event = first_event(store)
        duplicate = make_copy(event)
        assert duplicate.event is event.event
    pickled = pickle.loads(pickle.dumps(first_event(store)))
    assert pickled.__getstate__()["__dict__"]["event"] == SessionFaultFactory(
        message="image pull failed"
    )


def test_each_event_has_its_own_fields_set(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    two = [store.faults.record_startup_fault("session-1", f"f{n}") for n in range(2)]
    assert two == [True, True]
    first, second = store.events.load(after_seq=0).events
    first.model_fields_set.discard("recorded_at_ms")
    assert second.model_dump(exclude_unset=True) == second.model_dump()


def test_an_assignment_made_while_the_body_decodes_wins(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What another thread could do between the check and the store of a first decode.
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    event, assigned = first_event(store), SessionFaultFactory(message="assigned")

    def decode_while_assigned(body: str) -> object:
        event.event = assigned
        return events_module.EVENT_DATA.validate_json(body)

    monkeypatch.setattr(events_module, "decode_body", decode_while_assigned)
    assert event.event is assigned
    assert event.model_dump()["event"] == assigned.model_dump()


def test_a_replaced_body_wins_over_the_stored_one(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    replacement = SessionFaultFactory(message="replaced")
    updated = first_event(store).model_copy(update={"event": replacement})
    assert updated.event == replacement
    assert updated == built(updated, replacement)

    assigned = first_event(store)
    assigned.event = replacement
    assert assigned == built(assigned, replacement)
    assert assigned.model_dump()["event"] == replacement.model_dump()


def test_an_undecodable_body_becomes_a_notice_when_used_not_when_paged(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store_raw_body(store, "session-1", '{"type":"mystery","data":{"command_id":"c-1"}}')
    page = store.events.load(after_seq=0)  # paging itself does not look at bodies
    notice = page.events[0].event
    assert isinstance(notice, LegacyNotice)
    assert (notice.original_type, notice.command_id) == ("mystery", "c-1")
    assert json.loads(page.model_dump_json())["events"][0]["event"]["type"] == "legacy_notice"


def test_threads_reading_one_page_see_equal_bodies(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    for index in range(200):
        store.faults.record_startup_fault("session-1", f"fault {index}")
    events = store.events.load(after_seq=0, limit=200).events
    seen: list[list[object]] = []
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        seen.append([event.event for event in events])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [SessionFaultFactory(message=f"fault {index}") for index in range(200)]
    assert seen == [expected] * 4


def test_paging_leaves_the_garbage_collector_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The collector is the host application's: a library must not switch it, not even briefly.
    def refuse(*args: object) -> None:
        raise AssertionError("the library switched the garbage collector")

    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        monkeypatch.setattr(gc, name, refuse)
    store.sessions.save(SessionFactory(id="session-1"))
    for index in range(3):
        store.faults.record_startup_fault("session-1", f"fault {index}")
    page = store.events.load(after_seq=0, limit=2)
    assert [event.event for event in page.events] == [
        SessionFaultFactory(message="fault 0"),
        SessionFaultFactory(message="fault 1"),
    ]
