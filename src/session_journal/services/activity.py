"""Activity snapshots: an event only when a session's activity changes."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from ..database import Database
from ..errors import InvalidRecord
from ..events import ActivityChanged, ApiActivityState
from ..records import revalidate
from ..unit_of_work import UnitOfWork
from ..validation import EncodedJson, encode_json, require_id, require_int


class ActivityService:
    """`store.activity`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def record(
        self, activities: Iterable[tuple[str, ApiActivityState]], recorded_at_ms: int
    ) -> int:
        """Record a batch of snapshots in one transaction; returns the events appended.

        For each `(session_id, state)` in order: an unknown or deleted session is skipped (a
        forgotten session is never revived); a state equal to the stored one (compared in
        canonical JSON: sorted keys, no whitespace) is skipped; otherwise `ActivityChanged` is
        appended and the snapshot replaced.
        """
        at = require_int(recorded_at_ms, "recorded_at_ms")
        max_bytes = self._database.options.max_body_bytes
        batch = []
        for index, item in enumerate(_items(activities)):
            session_id, state = item
            what = f"activities[{index}]"
            session_id = require_id(session_id, f"{what} session_id")
            state = revalidate(state, ApiActivityState, f"{what} state")
            event = encode_json(ActivityChanged(activity=state), f"{what} state", max_bytes)
            batch.append((session_id, EncodedJson(state.canonical_json()), event))
        if not batch:
            return 0

        def work(uow: UnitOfWork) -> int:
            appended = 0
            existing = uow.sessions.lock_existing([session_id for session_id, _, _ in batch])
            for session_id, canonical, event in batch:
                if session_id not in existing:
                    continue
                stored = uow.activity.get(session_id)
                if stored is not None and _canonical(stored) == canonical:
                    continue
                uow.events.append_encoded(session_id, at, event)
                uow.activity.put(session_id, canonical)
                appended += 1
            uow.commit()
            return appended

        return self._database.submit(work, "record activity")

    def get(self, session_id: str) -> ApiActivityState | None:
        """The latest snapshot, or `None` (no snapshot, or one this code cannot decode)."""
        session_id = require_id(session_id, "session_id")
        with self._database.reading(f"get activity of {session_id!r}") as uow:
            stored = uow.activity.get(session_id)
        if stored is None:
            return None
        try:
            return ApiActivityState.model_validate_json(stored)
        except ValidationError:
            return None


def _items(
    activities: Iterable[tuple[str, ApiActivityState]],
) -> list[tuple[str, ApiActivityState]]:
    try:
        items = list(activities)
    except TypeError:
        raise InvalidRecord("activities must be an iterable of (session_id, state) pairs") from None
    for index, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidRecord(f"activities[{index}] must be a (session_id, state) pair")
    return items


def _canonical(stored: str) -> str:
    try:
        return ApiActivityState.model_validate_json(stored).canonical_json()
    except ValidationError:
        return stored
