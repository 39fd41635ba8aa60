"""Activity snapshots: an event only when a session's activity changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, NamedTuple

from pydantic import ValidationError

from .._arguments import Given, Int64, Passed, listed, pair, validate_arguments
from .._validation import EncodedJson, Id, encode_json
from ..api_events import ActivityChanged, ApiActivityState
from ..storage.protocols import Transactions, WriteContext


class ActivityUpdate(NamedTuple):
    """One item of `store.activity.record`: a `(session_id, state)` pair."""

    session_id: Id
    state: Given[ApiActivityState]


_AS_UPDATES = listed(
    Annotated[ActivityUpdate, pair("(session_id, state) pair")], "(session_id, state) pairs"
)


class ActivityService:
    """`store.activity`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments()
    def record(
        self,
        activities: Annotated[Iterable[tuple[str, ApiActivityState]], _AS_UPDATES],
        recorded_at_ms: Int64,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> int:
        """Record a batch of snapshots in one transaction; returns the events appended.

        For each `(session_id, state)` in order: an unknown or deleted session is skipped (a
        forgotten session is never revived); a state equal to the stored one (compared in
        canonical JSON: sorted keys, no whitespace) is skipped; otherwise `ActivityChanged` is
        appended and the snapshot replaced.
        """
        max_bytes = self._transactions.options.max_body_bytes
        batch = []
        for index, (session_id, state) in enumerate(activities):
            what = f"activities[{index}] state"
            event = encode_json(ActivityChanged(activity=state), what, max_bytes)
            batch.append((session_id, EncodedJson(state.canonical_json()), event))
        if not batch:
            return 0

        def work(uow: WriteContext) -> int:
            appended = 0
            existing = uow.sessions.lock_existing([session_id for session_id, _, _ in batch])
            for session_id, canonical, event in batch:
                if session_id not in existing:
                    continue
                stored = uow.activity.get(session_id)
                if stored is not None and _canonical(stored) == canonical:
                    continue
                uow.events.append_encoded(session_id, recorded_at_ms, event)
                uow.activity.put(session_id, canonical)
                appended += 1
            uow.commit()
            return appended

        return self._transactions.submit(work, "record activity", uow)

    @validate_arguments()
    def get(
        self, session_id: Id, *, uow: Passed[WriteContext | None] = None
    ) -> ApiActivityState | None:
        """The latest snapshot, or `None` (no snapshot, or one this code cannot decode)."""
        with self._transactions.reading(f"get activity of {session_id!r}", uow) as read:
            stored = read.activity.get(session_id)
        if stored is None:
            return None
        try:
            return ApiActivityState.model_validate_json(stored)
        except ValidationError:
            return None


def _canonical(stored: str) -> str:
    try:
        return ApiActivityState.model_validate_json(stored).canonical_json()
    except ValidationError:
        return stored
