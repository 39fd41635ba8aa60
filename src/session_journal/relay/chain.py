"""Building a relay chain: what a relay does, and what tests need."""

from __future__ import annotations

from collections.abc import Iterable

from .._clock import now_ms
from .observations import RelayEvent, RelayObservation, relay_event_digest
from .state import MaterializedSession


class RelayChain:
    """Appends observations as chained relay events: each gets the next ordinal, the previous
    event's digest and its own digest."""

    def __init__(self, *, ordinal: int = 0, digest: str = "") -> None:
        self.ordinal = ordinal
        self.digest = digest

    @classmethod
    def after(cls, session: MaterializedSession) -> RelayChain:
        """A chain that continues from a session's applied frontier."""
        return cls(ordinal=session.applied_event_ordinal, digest=session.applied_event_digest)

    def append(
        self,
        observation: RelayObservation,
        *,
        recorded_at_ms: int | None = None,
        command_id: str | None = None,
    ) -> RelayEvent:
        """The next event of the chain (`recorded_at_ms` defaults to now)."""
        event = RelayEvent(
            ordinal=self.ordinal + 1,
            previous_digest=self.digest,
            digest="",
            recorded_at_ms=now_ms() if recorded_at_ms is None else recorded_at_ms,
            command_id=command_id,
            observation=observation,
        )
        event.digest = relay_event_digest(event)
        self.ordinal, self.digest = event.ordinal, event.digest
        return event

    def extend(
        self, observations: Iterable[RelayObservation], *, recorded_at_ms: int | None = None
    ) -> list[RelayEvent]:
        """Append each observation in order."""
        return [self.append(item, recorded_at_ms=recorded_at_ms) for item in observations]
