"""Events are values: two readers of one store get the same event objects from the followers'
window, and neither can change what the other (or any later page) reads — not a field, not a
list of a body, not a question's schema. On both backends, through both APIs."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from session_journal import (
    ApiEvent,
    ApiEventPage,
    CommandEnded,
    InputRequired,
    Store,
)
from session_journal.relay import ElicitationRequest
from tests.factories import CommandEndedFactory, SessionFactory

pytestmark = pytest.mark.both_apis

QUESTION = ElicitationRequest(
    id="q-1",
    session_id="session-1",
    message="Which directory?",
    requested_schema={
        "type": "object",
        "properties": {"dir": {"type": "string", "enum": ["src", "tests"]}},
        "required": ["dir"],
    },
)
ENDED = CommandEndedFactory(command_id="checkpoint-1", related_command_ids=["barrier-1"])
ASKED = InputRequired(request=QUESTION, turn_id=3)


def test_two_readers_cannot_change_each_others_events(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    cursor = store.events.latest_seq()

    def append(uow: object) -> None:
        for body in (ENDED, ASKED):
            uow.events.append("session-1", 5, body.model_dump_json())  # type: ignore[attr-defined]
        uow.commit()  # type: ignore[attr-defined]

    store.run_in_unit_of_work(append)
    with (
        store.events.follow(after_seq=cursor) as first,
        store.events.follow(after_seq=cursor) as second,
    ):
        mine, theirs = next(iter(first)), next(iter(second))
    assert isinstance(mine, ApiEventPage) and isinstance(mine.events, tuple)
    assert [event.event for event in mine.events] == [ENDED, ASKED]
    assert mine.events == theirs.events
    ended, asked = mine.events[0].event, mine.events[1].event
    assert isinstance(ended, CommandEnded) and isinstance(asked, InputRequired)
    assert asked.request is not None

    with pytest.raises(dataclasses.FrozenInstanceError):
        mine.events[0].seq = 99  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ended.result.related_command_ids = ("other",)  # type: ignore[misc]
    with pytest.raises(AttributeError):  # a tuple: no append
        ended.result.related_command_ids.append("other")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="cannot change"):
        asked.request.requested_schema["properties"]["dir"]["enum"] = ["/"]  # type: ignore[index]
    with pytest.raises(TypeError, match="cannot change"):
        asked.request.requested_schema.clear()  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        mine.events = ()  # type: ignore[misc]

    again = store.events.load(after_seq=cursor)
    assert [event.event for event in again.events] == [ENDED, ASKED]
    assert theirs.events[0].event == ENDED and theirs.events[1].event == ASKED
    assert ended.result.related_command_ids == ("barrier-1",)
    assert (
        asked.request.requested_schema
        == QUESTION.requested_schema
        == {
            "type": "object",
            "properties": {"dir": {"type": "string", "enum": ("src", "tests")}},
            "required": ("dir",),
        }
    )


def test_an_event_dumps_and_pickles_as_it_was_stored(store: Store) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    text = ASKED.model_dump_json()
    assert text == (
        '{"type":"input_required","data":{"request":{"id":"q-1","session_id":"session-1",'
        '"mode":"form","message":"Which directory?","requested_schema":{"type":"object",'
        '"properties":{"dir":{"type":"string","enum":["src","tests"]}},"required":["dir"]}},'
        '"turn_id":3}}'
    )

    def append(uow: object) -> None:
        uow.events.append("session-1", 5, text)  # type: ignore[attr-defined]
        uow.commit()  # type: ignore[attr-defined]

    store.run_in_unit_of_work(append)
    [event] = store.events.load(after_seq=0).events
    assert event.event.model_dump_json() == text
    assert store.events.load_json(after_seq=0).decode().count(text) == 1
    assert pickle.loads(pickle.dumps(event)) == event
    assert ApiEvent.model_validate_json(event.model_dump_json()) == event
    assert ApiEvent.model_validate(event.model_dump()) == event
