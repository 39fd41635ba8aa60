"""Applying a session's relay chain: chain checks, projection, all or nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from .._arguments import Given, Int64, Passed, sequence_of, validate_arguments
from .._validation import Id, check_json_depth, encode_json
from ..errors import ChainBroken, InvalidRecord
from ..relay.observations import RELAY_EVENT_FORMAT, RelayEvent, relay_event_digest
from ..relay.projection import Projector
from ..relay.state import MaterializedSession, ProjectionState, TranscriptItem, TranscriptPage
from ..storage.protocols import Transactions, WriteContext
from ..storage.repositories import StoredProjection
from ._common import lock_session


class ProjectionService:
    """`store.projection`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments()
    def apply(
        self,
        session_id: Id,
        events: Annotated[Sequence[Given[RelayEvent]], sequence_of("RelayEvent")],
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> int:
        """Apply relay events in order, in one transaction; returns how many were new.

        An event at or below the applied frontier is skipped (at the frontier its digest must be
        the stored one); the next ordinal must name the stored digest as its previous digest and
        carry its own correct digest; a gap, a wrong digest or another format is `ChainBroken`.
        Any error rolls the whole sequence back.
        """
        checked = _checked(events)
        max_bytes = self._transactions.options.max_body_bytes

        def work(uow: WriteContext) -> int:
            lock_session(uow, session_id)
            stored = uow.projection.get(session_id) or StoredProjection(0, "", ProjectionState())
            ordinal, digest = stored.ordinal, stored.digest
            projector = Projector(stored.state)
            items: list[TranscriptItem] = []
            for event, computed in checked:
                if event.format != RELAY_EVENT_FORMAT:
                    raise ChainBroken(
                        f"session {session_id!r}, relay ordinal {event.ordinal}: "
                        f"unknown format {event.format}"
                    )
                if event.ordinal <= ordinal:
                    if event.ordinal == ordinal and event.digest != digest:
                        raise ChainBroken(
                            f"session {session_id!r}: ordinal {ordinal} was applied with digest "
                            f"{digest[:16]}..., not {event.digest[:16]}..."
                        )
                    continue
                _follows(session_id, event, computed, ordinal, digest)
                api_events, new_items = projector.apply(event)
                for body in api_events:
                    encoded = encode_json(
                        body, f"event of relay ordinal {event.ordinal}", max_bytes
                    )
                    uow.events.append_encoded(session_id, event.recorded_at_ms, encoded)
                items.extend(new_items)
                ordinal, digest = event.ordinal, event.digest
            applied = ordinal - stored.ordinal
            if applied:
                uow.projection.put(session_id, StoredProjection(ordinal, digest, projector.state))
                uow.projection.add_items(session_id, items)
            uow.commit()
            return applied

        return self._transactions.submit(work, f"apply relay events of {session_id!r}", uow)

    @validate_arguments()
    def load(
        self, session_id: Id, *, uow: Passed[WriteContext | None] = None
    ) -> MaterializedSession | None:
        """The session's materialized state and transcript; `None` if the session does not
        exist; ordinal 0 before its first relay event."""
        with self._transactions.reading(f"load materialized session {session_id!r}", uow) as read:
            if read.sessions.get(session_id) is None:
                return None
            stored = read.projection.get(session_id)
            if stored is None:
                return MaterializedSession(session_id=session_id)
            state = stored.state
            return MaterializedSession(
                session_id=session_id,
                applied_event_ordinal=stored.ordinal,
                applied_event_digest=stored.digest,
                active_turn=state.active_turn,
                last_turn_outcome=state.last_turn_outcome,
                pending_elicitations=[question.request for question in state.pending],
                transcript=read.projection.transcript(session_id),
            )

    @validate_arguments()
    def transcript(
        self,
        session_id: Id,
        *,
        before_position: Int64 | None = None,
        limit: int = 100,
        uow: Passed[WriteContext | None] = None,
    ) -> TranscriptPage | None:
        """A page of the session's transcript, newest first: the newest `limit` items (clamped
        to 1..1000) below `before_position` (`None`: from the newest item); page back with
        `before_position=page.next_before_position` until a page is empty. `None` if the
        session does not exist; one read."""
        with self._transactions.reading(f"read the transcript of {session_id!r}", uow) as read:
            if read.sessions.get(session_id) is None:
                return None
            items = read.projection.transcript_before(
                session_id, before_position, max(1, min(limit, MAX_TRANSCRIPT_PAGE))
            )
        oldest = items[-1].position if items else before_position or 0
        return TranscriptPage(session_id=session_id, items=items, next_before_position=oldest)


MAX_TRANSCRIPT_PAGE = 1000
"""The most items one `transcript` page holds."""


def _checked(events: Sequence[RelayEvent]) -> list[tuple[RelayEvent, str]]:
    """Each event (validated again by `validate_arguments`) with its computed digest, before
    touching the database."""
    checked = []
    for index, event in enumerate(events):
        check_json_depth(event.model_dump_json(), f"events[{index}]")
        try:
            checked.append((event, relay_event_digest(event)))
        except UnicodeEncodeError as error:
            raise InvalidRecord(f"events[{index}] cannot be encoded: {error}") from None
    return checked


def _follows(session_id: str, event: RelayEvent, computed: str, ordinal: int, digest: str) -> None:
    where = f"session {session_id!r}, relay ordinal {event.ordinal}"
    if event.ordinal != ordinal + 1:
        raise ChainBroken(f"{where}: gap after applied ordinal {ordinal}")
    if event.previous_digest != digest:
        raise ChainBroken(f"{where}: previous digest does not match the applied event")
    if event.digest != computed:
        raise ChainBroken(f"{where}: digest does not match the event")
