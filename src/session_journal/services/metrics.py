"""`store.metrics()`: the store at one moment, for monitoring (`/metrics` serves it to
Prometheus)."""

from __future__ import annotations

from .._arguments import validate_arguments
from .._clock import now_ms
from ..follow.following import Following
from ..records import SessionState, StoreMetrics
from ..storage.protocols import Transactions
from .consumers import status_of


class MetricsService:
    """What `store.metrics()` reads: the database's part by one read transaction of three
    statements (the log's version, sessions counted by state, the consumers with the time of
    the first event after each one's position) and this process's counters."""

    def __init__(self, transactions: Transactions, following: Following | None) -> None:
        self._transactions = transactions
        self._following = following

    @validate_arguments()
    def read(self) -> StoreMetrics:
        """The store now (see `StoreMetrics`)."""
        with self._transactions.reading("read the store's metrics") as read:
            version = read.events.version()
            by_state = read.sessions.count_by_state()
            consumers = read.consumers.list_with_next()
            now = now_ms()
        latest, floor = version.latest_seq, version.pruned_through
        counts = self._transactions.counters.snapshot()
        following = self._following
        signal = None if following is None else following.signal
        return StoreMetrics(
            as_of_ms=now,
            latest_seq=latest,
            pruned_through=floor,
            events_retained_max=max(0, latest - floor),
            sessions_by_state={state.value: by_state.get(state.value, 0) for state in SessionState},
            consumers=tuple(
                status_of(stored, recorded, latest, now) for stored, recorded in consumers
            ),
            opened_at_ms=counts.opened_at_ms,
            write_calls=counts.write_calls,
            write_seconds=counts.write_seconds,
            events_appended=counts.events_appended,
            commits=counts.commits,
            wakeups=0 if signal is None else signal.generation,
            followers_started=counts.followers_started,
            followers_waiting=0 if signal is None else signal.waiting(),
            cursor_expired=counts.cursor_expired,
            prunes=counts.prunes,
            prune_seconds=counts.prune_seconds,
        )
