"""Property: hostile input is stored exactly or refused with `InvalidRecord`, nothing written.

Hypothesis feeds, on SQLite and PostgreSQL:
- event bodies to `uow.events.append` inside `store.unit_of_work()`: arbitrary JSON (huge and
  non-finite numbers, `NaN`/`Infinity` words, strings with NUL, lone surrogates raw or escaped,
  deep nesting, huge strings, duplicate keys), spliced into real bodies wherever a value goes
  (a question's schema takes any JSON), or given whole, or not JSON at all;
- the same strings to the services: a startup fault's message, a session's error, an activity
  label.

Each call either stores the value exactly (the stored text is the body given, standard JSON of
at most 1 MiB, and what reads back equals it) or raises `InvalidRecord` with the log, the
session and its activity unchanged. No other exception escapes: no driver error, no
`StorageError`, no pydantic or Unicode error. (Reads: `test_hostile_reads.py`.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from hypothesis import example, given
from hypothesis import strategies as st

from session_journal import (
    ActivityChanged,
    ApiEvent,
    InvalidRecord,
    SessionFault,
    Store,
)
from session_journal.api_events import EVENT_DATA
from tests.factories import ActivityDetailsFactory, ActivityFactory, SessionFactory
from tests.helpers import all_events
from tests.reliability.harness import HYPOTHESIS, any_text

pytestmark = pytest.mark.reliability

MiB = 1024 * 1024
SESSION = "hostile-1"

# --- JSON text, hostile ---------------------------------------------------------------------------

huge_text = st.sampled_from([MiB // 2, MiB - 200, MiB + 1, 2 * MiB]).map(lambda n: "x" * n)


def json_string(text: str, ascii_only: bool) -> str:
    """`text` as a JSON string: escaped (`\\ud800`, `\\u0000`) or raw (a raw lone surrogate or
    a raw NUL makes invalid JSON text)."""
    return json.dumps(text, ensure_ascii=ascii_only)


scalar_text = st.one_of(
    st.just("null"),
    st.sampled_from(["true", "false", "0", "-0", "-0.0", "1e999", "-1E400", "1.5e-400"]),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
    st.integers(-(10**40), 10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),
    st.builds(json_string, any_text, st.booleans()),
    st.builds(json_string, huge_text, st.just(True)),
    st.sampled_from(['"raw \x00 nul"', '"\\ud800"', '"\\udfff\\ud800"', '"\\uDBFF\\uDFFF"']),
)
json_text = st.recursive(
    scalar_text,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(st.builds(json_string, any_text, st.booleans()), inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{key}:{value}" for key, value in pairs) + "}"
        ),
    ),
    max_leaves=12,
)
deep_text = st.integers(1, 100_000).map(lambda depth: "[" * depth + "]" * depth)
hostile_value = st.one_of(json_text, deep_text)

# Real bodies with one value replaced by `VALUE`.
TEMPLATES = [
    '{"type":"session_fault","data":{"reason":"startup_failed","message":VALUE,"command_id":null}}',
    '{"type":"session_fault","data":{"reason":VALUE,"message":"m","command_id":null}}',
    '{"type":"turn_started","data":{"turn_id":VALUE,"command_id":"c","started_at_ms":1}}',
    '{"type":"turn_started","data":{"turn_id":1,"command_id":"c","started_at_ms":VALUE}}',
    '{"type":"input_required","data":{"request":{"id":"q","session_id":"s","mode":"form",'
    '"message":"m","requested_schema":{"type":"object","properties":{},"x-extra":VALUE}},'
    '"turn_id":null}}',
    '{"type":"input_required","data":{"request":{"id":"q","session_id":"s","mode":"form",'
    '"message":VALUE,"requested_schema":{"type":"object"}},"turn_id":null}}',
    '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","message":VALUE}}',
    '{"type":"session_fault","data":{"reason":"startup_failed","message":"m","extra":VALUE}}',
    "VALUE",
]
hostile_bodies = st.one_of(
    st.builds(
        lambda template, value: template.replace("VALUE", value),
        st.sampled_from(TEMPLATES),
        hostile_value,
    ),
    st.text(max_size=50),
)


@pytest.fixture
def raw(migrated_url: str) -> Iterator[sa.Connection]:
    """A plain connection, to read the stored text of a body."""
    engine = sa.create_engine(migrated_url)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


@pytest.fixture
def hostile_store(store: Store) -> Store:
    store.sessions.save(SessionFactory(id=SESSION))
    return store


def standard_json(text: str) -> bool:
    """Whether `text` parses without `NaN`, `Infinity` or `-Infinity` (which Python accepts,
    but JSON, PostgreSQL and other readers do not)."""

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


def events_after(store: Store, seq: int) -> list[ApiEvent]:
    return [event for event in all_events(store) if event.seq > seq]


@HYPOTHESIS
@given(body=hostile_bodies)
@example(body=TEMPLATES[0].replace("VALUE", '"image pull failed"'))
@example(body=TEMPLATES[2].replace("VALUE", str(2**63 - 1)))
@example(body=TEMPLATES[4].replace("VALUE", '{"nested": [1, -2.5e-7, "x", null, true]}'))
@example(body=TEMPLATES[4].replace("VALUE", "NaN"))
@example(body=TEMPLATES[4].replace("VALUE", "-Infinity"))
@example(body=TEMPLATES[4].replace("VALUE", '"' + "x" * (2 * MiB) + '"'))
@example(body=TEMPLATES[4].replace("VALUE", "[" * 5000 + "]" * 5000))
@example(body=TEMPLATES[0].replace("VALUE", '"\ud800"'))
@example(body=TEMPLATES[0].replace("VALUE", '"\\ud800"'))
@example(body=TEMPLATES[0].replace("VALUE", '"nul \\u0000 kept"'))
def test_appended_bodies_are_stored_exactly_or_refused(
    hostile_store: Store, raw: sa.Connection, body: str
) -> None:
    store = hostile_store
    before = store.events.latest_seq()
    try:
        with store.unit_of_work() as uow:
            uow.events.append(SESSION, 1, body)
            uow.commit()
    except InvalidRecord:
        assert store.events.latest_seq() == before
        assert events_after(store, before) == []
        return
    (event,) = events_after(store, before)
    stored = raw.execute(
        sa.text("SELECT CAST(body AS TEXT) FROM api_events WHERE seq = :seq"), {"seq": event.seq}
    ).scalar_one()
    raw.rollback()
    assert stored == body
    assert standard_json(body), f"stored text that is not standard JSON: {body[:200]}"
    assert len(body.encode()) <= MiB
    assert event.event == EVENT_DATA.validate_json(body)


@HYPOTHESIS
@given(text=st.one_of(any_text, huge_text))
@example(text="nul \x00 in a message")
@example(text="lone \ud800 surrogate")
@example(text="x" * (2 * MiB))
def test_text_given_to_the_services_is_stored_exactly_or_refused(
    hostile_store: Store, text: str
) -> None:
    store = hostile_store

    # A startup fault's message: an event body.
    before = store.events.latest_seq()
    try:
        assert store.faults.record_startup_fault(SESSION, text)
    except InvalidRecord:
        assert events_after(store, before) == []
    else:
        assert [event.event for event in events_after(store, before)] == [
            SessionFault(reason="startup_failed", message=text)
        ]

    # A session's last error: a text column, and a lifecycle fault event.
    before = store.events.latest_seq()
    stored = store.sessions.get(SESSION)
    assert stored is not None and stored.last_error is None
    record = stored.model_copy(update={"last_error": text})  # not validated: the service does
    try:
        store.sessions.save(record)
    except InvalidRecord:
        assert store.sessions.get(SESSION) == stored
        assert events_after(store, before) == []
    else:
        assert store.sessions.get(SESSION) == record
        assert [event.event for event in events_after(store, before)] == [
            SessionFault(reason="lifecycle_failed", message=text)
        ]
        store.sessions.save(stored)

    # An activity label: a JSON column, and an activity event.
    before = store.events.latest_seq()
    previous = store.activity.get(SESSION)
    # The model takes any `str` as a label: the service must be the one to refuse what it
    # cannot store (a lone surrogate, a label over the size limit).
    details = dataclasses.replace(ActivityDetailsFactory.build(turn=True), label=text)
    activity = ActivityFactory(busy=True, details=details)
    try:
        appended = store.activity.record([(SESSION, activity)], 1)
    except InvalidRecord:
        assert store.activity.get(SESSION) == previous
        assert events_after(store, before) == []
    else:
        assert store.activity.get(SESSION) == activity
        changes = [] if activity == previous else [ActivityChanged(activity=activity)]
        assert appended == len(changes)
        assert [event.event for event in events_after(store, before)] == changes
