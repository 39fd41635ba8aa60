"""Bad input: a clear `InvalidRecord` naming what was wrong, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from session_journal import (
    ApiEventFilter,
    CheckpointMetadata,
    InvalidRecord,
    SessionRecord,
    Store,
    StoreOptions,
)
from tests.factories import ActivityFactory, CheckpointMetadataFactory, SessionFactory

pytestmark = pytest.mark.both_apis


BAD_IDS = ["../x", "", "x" * 200, "a\x00b", ".", "..", "a/b", "sp ace"]


def assert_nothing_written(store: Store, sessions: list[str]) -> None:
    assert store.events.latest_seq() == 0
    assert [record.id for record in store.sessions.list()] == sessions


@pytest.mark.parametrize("bad", BAD_IDS)
def test_malformed_ids_are_refused_everywhere(store: Store, bad: str) -> None:
    calls: list[Callable[[], Any]] = [
        lambda: store.sessions.get(bad),
        lambda: store.sessions.delete(bad),
        lambda: store.sessions.list(workspace_id=bad),
        lambda: store.sessions.list(project_id=bad),
        lambda: store.sessions.save(SessionRecord.model_construct(id=bad, project_id="p")),
        lambda: store.sessions.save(
            SessionFactory.build(workspace_id="w").model_copy(update={"project_id": bad})
        ),
        lambda: store.faults.record_startup_fault(bad, "boom"),
        lambda: store.activity.record([(bad, ActivityFactory())], 1),
        lambda: store.activity.get(bad),
        lambda: store.events.load(ApiEventFilter.model_construct(session_id=bad)),
        lambda: store.events.load(ApiEventFilter.model_construct(workspace_id=bad)),
    ]
    for call in calls:
        with pytest.raises(InvalidRecord, match="invalid id"):
            call()
    assert_nothing_written(store, [])


def test_constructors_validate_ids_too() -> None:
    with pytest.raises(ValidationError, match="invalid id"):
        SessionRecord(id="../x", project_id="p")
    with pytest.raises(ValidationError):
        ApiEventFilter(session_id="")
    assert issubclass(InvalidRecord, ValueError)


@pytest.mark.parametrize(
    ("after_seq", "limit", "message"),
    [
        (-1, 10, "after_seq must be between 0"),
        ("5", 10, "after_seq must be an integer"),
        (True, 10, "after_seq must be an integer"),
        (1.5, 10, "after_seq must be an integer"),
        (2**63, 10, "after_seq must be between"),
        (0, "10", "limit must be an integer"),
        (0, None, "limit must be an integer"),
    ],
)
def test_bad_cursors_and_limits(store: Store, after_seq: Any, limit: Any, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        store.events.load(after_seq=after_seq, limit=limit)


def test_wrong_argument_types(store: Store) -> None:
    with pytest.raises(InvalidRecord, match="session record must be a SessionRecord"):
        store.sessions.save({"id": "s", "project_id": "p"})  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="filter must be an ApiEventFilter"):
        store.events.load({"session_id": "s"})  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="session_id must be a string"):
        store.sessions.get(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="message must be a string"):
        store.faults.record_startup_fault("s", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="recorded_at_ms must be an integer"):
        store.activity.record([], "now")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match="activities must be an iterable"):
        store.activity.record(5, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecord, match=r"activities\[0\] must be a \(session_id, state\)"):
        store.activity.record(["s"], 1)  # type: ignore[list-item]
    with pytest.raises(InvalidRecord, match=r"activities\[0\] state must be an ApiActivityState"):
        store.activity.record([("s", {"state": "x"})], 1)  # type: ignore[list-item]
    assert_nothing_written(store, [])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("last_error", "bad\x00error"),
        ("last_checkpoint_error", "bad\x00error"),
        ("native_session_id", "n\x00"),
        ("last_error", "lone \ud800 surrogate"),
    ],
)
def test_unstorable_text_in_a_text_column_names_the_field(
    store: Store, field: str, value: str
) -> None:
    record = SessionFactory.build(id="session-1")
    store.sessions.save(record)
    broken = SessionRecord.model_construct(**(record.model_dump() | {field: value}))
    with pytest.raises(InvalidRecord, match=f"'session-1'.*{field}"):
        store.sessions.save(broken)
    with pytest.raises(InvalidRecord, match=field):
        store.sessions.save_lifecycle(broken)
    assert store.sessions.get("session-1") == record
    assert store.events.latest_seq() == 0


def test_bad_checkpoint_metadata(store: Store) -> None:
    good = CheckpointMetadataFactory(
        archive_path="/a", sha256="0" * 64, created_at="2026-11-29T10:00:00+01:00"
    )
    for update, field in [
        ({"sha256": "ABC"}, "sha256"),
        ({"sha256": "A" * 64}, "sha256"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"created_at": "2026-11-29"}, "created_at"),
        ({"event_frontier": -1}, "event_frontier"),
        ({"archive_path": "/a\x00b"}, "archive_path"),
    ]:
        metadata = CheckpointMetadata.model_construct(**(good.model_dump() | update))
        record = SessionRecord.model_construct(
            **(SessionFactory.build(id="s").model_dump() | {"checkpoint": metadata})
        )
        with pytest.raises(InvalidRecord, match=f"checkpoint.{field}"):
            store.sessions.save(record)
    assert_nothing_written(store, [])


def test_bodies_that_cannot_be_stored(store: Store) -> None:
    store.sessions.save(SessionFactory.build(id="session-1"))
    with pytest.raises(InvalidRecord, match="cannot be encoded"):
        store.faults.record_startup_fault("session-1", "lone \udc00 surrogate")
    with pytest.raises(InvalidRecord, match="over the limit of 1048576"):
        store.faults.record_startup_fault("session-1", "x" * (1024 * 1024))
    too_big = ActivityFactory(state="y" * (1024 * 1024))
    with pytest.raises(InvalidRecord, match=r"activities\[1\] state is \d+ bytes"):
        store.activity.record([("session-1", ActivityFactory()), ("session-1", too_big)], 1)
    assert store.events.latest_seq() == 0
    assert store.activity.get("session-1") is None


FAULT = '{"type":"session_fault","data":{"reason":"startup_failed","message":"m"%s}}'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (FAULT % ',"n":NaN', "body is not standard JSON: NaN is not a JSON value"),
        (FAULT % ',"n":Infinity', "body is not standard JSON: Infinity is not a JSON value"),
        (FAULT % ',"n":[-Infinity]', "body is not standard JSON: -Infinity is not a JSON value"),
        (
            FAULT % (',"pad":"%s"' % ("x" * 1024 * 1024)),
            r"body is \d+ bytes encoded, over the limit of 1048576",
        ),
    ],
)
def test_repository_appends_check_what_the_services_check(
    store: Store, body: str, message: str
) -> None:
    store.sessions.save(SessionFactory.build(id="session-1"))
    for append in ("append", "append_encoded", "append_if_session_exists"):
        with store.unit_of_work() as uow:
            with pytest.raises(InvalidRecord, match=message):
                getattr(uow.events, append)("session-1", 1, body)
            uow.commit()
    assert store.events.latest_seq() == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '{"type":"session_fault","reason":"startup_failed","message":"m"}',
            r'body must have the stored form \{"type": ..., "data": \{...\}\} and no other key, '
            r"got the keys \['message', 'reason', 'type'\]",
        ),
        (
            '{"type":"session_fault","data":{"reason":"startup_failed","message":"m"},"v":2}',
            r"body must have the stored form .* got the keys \['data', 'type', 'v'\]",
        ),
        (
            FAULT % ',"note":"x"',
            r"body has data keys that session_fault does not have: \['note'\]",
        ),
    ],
)
def test_hand_written_bodies_must_have_the_stored_form(
    store: Store, body: str, message: str
) -> None:
    store.sessions.save(SessionFactory.build(id="session-1"))
    with store.unit_of_work() as uow:
        with pytest.raises(InvalidRecord, match=message):
            uow.events.append("session-1", 1, body)
        assert uow.events.pending_count() == 0
        uow.commit()
    assert store.events.latest_seq() == 0


def test_repository_activity_snapshots_are_checked(store: Store) -> None:
    store.sessions.save(SessionFactory.build(id="session-1"))
    huge = ActivityFactory(state="y" * (1024 * 1024)).canonical_json()
    with store.unit_of_work() as uow:
        with pytest.raises(InvalidRecord, match="over the limit of 1048576"):
            uow.activity.put("session-1", huge)
        with pytest.raises(InvalidRecord, match="body is not an activity state"):
            uow.activity.put("session-1", '{"state":NaN}')
        uow.commit()
    assert store.activity.get("session-1") is None


def test_text_that_looks_like_a_constant_is_stored_as_it_is(store: Store) -> None:
    store.sessions.save(SessionFactory.build(id="session-1"))
    body = '{"type":"session_fault","data":{"reason":"startup_failed","message":"NaN, -Infinity"}}'
    with store.unit_of_work() as uow:
        uow.events.append("session-1", 1, body)
        uow.commit()
    with store.unit_of_work() as uow:
        stored = uow.connection.execute(sa.text("SELECT CAST(body AS TEXT) FROM api_events"))
        assert stored.scalar_one() == body


def test_a_store_with_a_smaller_body_limit_applies_it_to_repositories(migrated_url: str) -> None:
    with Store.open(migrated_url, upgrade=True, options=StoreOptions(max_body_bytes=100)) as small:
        small.sessions.save(SessionFactory.build(id="session-1"))
        with (
            small.unit_of_work() as uow,
            pytest.raises(InvalidRecord, match="over the limit of 100"),
        ):
            uow.events.append("session-1", 1, FAULT % (',"pad":"%s"' % ("x" * 60)))
        assert small.events.latest_seq() == 0
