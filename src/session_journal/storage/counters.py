"""This process's counts for one store since it opened (`store.metrics()`): write calls and
their latency, events appended, transactions committed, prunes, expired cursors and followers.

One `StoreCounters` per store, owned by its `Database` and shared by what counts: the write path
(each call's latency, each commit's events), the services (`CursorExpired` raised, prunes) and
the following of the log (followers started). Counting takes one uncontended lock and a few
additions per call; reading (`snapshot`) copies under the same lock, so a scrape sees whole
updates only. Histograms have fixed buckets (a bisect, no allocation)."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass

from ..records import Histogram

WRITE_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""The upper bounds (seconds) of the write-call latency histogram's buckets (and `+Inf`)."""
PRUNE_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
"""The upper bounds (seconds) of the prune-duration histogram's buckets (and `+Inf`)."""


class HistogramCounter:
    """Counts of observations by bucket (no lock of its own: its owner's, or one thread)."""

    __slots__ = ("bounds", "counts", "sum_s")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        """Count one observation of `seconds`."""
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum_s += seconds

    def read(self) -> Histogram:
        """The counts now."""
        return Histogram(bounds_s=self.bounds, counts=tuple(self.counts), sum_s=self.sum_s)


@dataclass(frozen=True)
class CountersSnapshot:
    """`StoreCounters` at one moment (see `StoreMetrics` for each count's meaning)."""

    opened_at_ms: int
    write_calls: int
    events_appended: int
    commits: int
    write_seconds: Histogram
    cursor_expired: int
    followers_started: int
    prunes: int
    prune_seconds: Histogram


class StoreCounters:
    """See the module docstring."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Every count back to 0, from now (a new lock: after `fork`, the parent's may have
        been held by a thread the child does not have)."""
        self._lock = threading.Lock()
        self.opened_at_ms = time.time_ns() // 1_000_000
        self._write_calls = 0
        self._events_appended = 0
        self._commits = 0
        self._write_seconds = HistogramCounter(WRITE_BUCKETS_S)
        self._cursor_expired = 0
        self._followers_started = 0
        self._prunes = 0
        self._prune_seconds = HistogramCounter(PRUNE_BUCKETS_S)

    def write_call(self, seconds: float) -> None:
        """A write call returned (committed, refused or failed) after `seconds`: from the
        caller's call to its answer, waiting for the write path included."""
        with self._lock:
            self._write_calls += 1
            self._write_seconds.observe(seconds)

    def committed(self, events: int) -> None:
        """A write transaction committed, with `events` appended."""
        with self._lock:
            self._commits += 1
            self._events_appended += events

    def cursor_expired(self) -> None:
        """A `CursorExpired` is about to be raised."""
        with self._lock:
            self._cursor_expired += 1

    def follower_started(self) -> None:
        """A follower (sync or async) was made."""
        with self._lock:
            self._followers_started += 1

    def pruned(self, seconds: float) -> None:
        """A prune (`events.prune`) ended after `seconds`."""
        with self._lock:
            self._prunes += 1
            self._prune_seconds.observe(seconds)

    def snapshot(self) -> CountersSnapshot:
        """The counts now, read together."""
        with self._lock:
            return CountersSnapshot(
                opened_at_ms=self.opened_at_ms,
                write_calls=self._write_calls,
                events_appended=self._events_appended,
                commits=self._commits,
                write_seconds=self._write_seconds.read(),
                cursor_expired=self._cursor_expired,
                followers_started=self._followers_started,
                prunes=self._prunes,
                prune_seconds=self._prune_seconds.read(),
            )
