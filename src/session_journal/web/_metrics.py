"""`GET /metrics`: the store's metrics (`store.metrics()`) and the app's own (streams, answers,
commit to frame), in Prometheus's text format, written by `prometheus-client` from a
`CollectorRegistry` of the app's own (never the process-wide default one: two apps in one
process, and the host's own metrics, never mix). Every metric is made from one `Scrape` read
just before it is written; nothing is kept between scrapes. Consumers' names and lease
holders, the only text among the labels, pass the app's redaction as `/api/consumers`' do. The
names, types and labels are listed in docs/operations/metrics.md, which a test holds to this
module."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from starlette.requests import Request
from starlette.responses import Response

from session_journal import Histogram, StoreMetrics
from session_journal.aio import AsyncStore

from ._guard import FailedAuthentications, Principal
from ._problems import not_found
from ._query import Query
from ._redaction import Redaction
from ._streams import _Hub

PREFIX = "session_journal_"


@dataclass(frozen=True)
class Scrape:
    """What one scrape writes: the store's metrics and the app's counts, read together."""

    store: StoreMetrics
    consumer_labels: tuple[tuple[str, str], ...]
    """Each consumer's name and lease holder ("" for none), redacted, in `store.consumers`'
    order."""
    streams_open: int
    streams_opened: int
    streams_closed: dict[str, int]
    heartbeats: int
    answers: dict[int, int]
    auth_failures: int
    commit_to_frame: Histogram


def families(scrape: Scrape) -> Iterator[Metric]:
    """The metric families of `scrape`, as `/metrics` writes them."""
    store = scrape.store
    yield _gauge("latest_seq", "The frontier: the largest seq ever assigned.", store.latest_seq)
    yield _gauge(
        "pruned_through", "The floor of the pruned log (0: never pruned).", store.pruned_through
    )
    yield _gauge(
        "events_retained_max",
        "latest_seq - pruned_through: at most this many events are stored.",
        store.events_retained_max,
    )
    sessions = GaugeMetricFamily(PREFIX + "sessions", "Sessions in each state.", labels=["state"])
    for state, count in store.sessions_by_state.items():
        sessions.add_metric([state], count)
    yield sessions
    yield from _consumers(store, scrape.consumer_labels)
    yield _counter(
        "write_calls", "Write calls answered by this process (committed or not).", store.write_calls
    )
    yield _histogram(
        "write_seconds",
        "Write calls' latency in this process, from the call to its answer.",
        store.write_seconds,
    )
    yield _counter(
        "events_appended", "Events appended by this process's commits.", store.events_appended
    )
    yield _counter("commits", "Write transactions this process committed.", store.commits)
    yield _counter(
        "wakeups", "Times this process's followers were woken by a commit.", store.wakeups
    )
    yield _counter("followers_started", "Followers this process made.", store.followers_started)
    yield _gauge(
        "followers_waiting", "Followers waiting for a commit now.", store.followers_waiting
    )
    yield _counter(
        "cursor_expired",
        "CursorExpired errors raised in this process (a cursor below the floor).",
        store.cursor_expired,
    )
    yield _histogram("prune_seconds", "Prunes this process ran, by duration.", store.prune_seconds)
    yield _gauge("streams_open", "Server-Sent Events streams open now.", scrape.streams_open)
    yield _counter("streams_opened", "Streams opened (answered 200).", scrape.streams_opened)
    closed = CounterMetricFamily(
        PREFIX + "streams_closed", "Streams closed, by reason.", labels=["reason"]
    )
    for reason, count in sorted(scrape.streams_closed.items()):
        closed.add_metric([reason], count)
    yield closed
    yield _counter("heartbeats", "Heartbeat comments written to streams.", scrape.heartbeats)
    answers = CounterMetricFamily(
        PREFIX + "http_responses", "HTTP responses, by status.", labels=["status"]
    )
    for status, count in sorted(scrape.answers.items()):
        answers.add_metric([str(status)], count)
    yield answers
    yield _counter(
        "auth_failures", "Requests refused for a missing or wrong token.", scrape.auth_failures
    )
    yield _histogram(
        "commit_to_frame_seconds",
        "From an event's recorded_at_ms to its stream frame's first making, once per event.",
        scrape.commit_to_frame,
    )


def _consumers(store: StoreMetrics, names: tuple[tuple[str, str], ...]) -> Iterator[Metric]:
    labels = ["consumer"]
    position = GaugeMetricFamily(
        PREFIX + "consumer_position", "The seq through which the consumer acked.", labels=labels
    )
    lag = GaugeMetricFamily(
        PREFIX + "consumer_lag_events",
        "latest_seq - position, in seqs (other filters' events and holes included).",
        labels=labels,
    )
    lag_seconds = GaugeMetricFamily(
        PREFIX + "consumer_lag_seconds",
        "How long ago the first event after the consumer's position was recorded (0: none).",
        labels=labels,
    )
    stuck = GaugeMetricFamily(
        PREFIX + "consumer_stuck",
        "1 when events wait for the consumer and it has not acked for stuck_after_s.",
        labels=labels,
    )
    generation = GaugeMetricFamily(
        PREFIX + "consumer_lease_generation",
        "The generation of the consumer's latest lease (0: none ever), with its holder.",
        labels=[*labels, "holder"],
    )
    for status, (consumer, holder) in zip(store.consumers, names, strict=True):
        name = [consumer]
        position.add_metric(name, status.position)
        lag.add_metric(name, status.lag)
        lag_seconds.add_metric(name, status.lag_seconds)
        stuck.add_metric(name, 1 if status.stuck else 0)
        generation.add_metric([consumer, holder], status.generation)
    yield from (position, lag, lag_seconds, stuck, generation)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, documentation, value=value)


def _histogram(name: str, documentation: str, histogram: Histogram) -> HistogramMetricFamily:
    bounds = [*(_bound(bound) for bound in histogram.bounds_s), "+Inf"]
    buckets = list(zip(bounds, histogram.cumulative(), strict=True))
    return HistogramMetricFamily(
        PREFIX + name, documentation, buckets=buckets, sum_value=histogram.sum_s
    )


def _bound(seconds: float) -> str:
    return repr(float(seconds))


async def _redacted_names(redaction: Redaction, store: StoreMetrics) -> tuple[tuple[str, str], ...]:
    """Each consumer's name and holder, redacted by the app's rules (one text for all of them);
    a name that redaction made equal to another's gets its place in the list after it, so that
    no two consumers share a series."""
    pairs = [[status.name, status.holder or ""] for status in store.consumers]
    redacted = json.loads(await redaction.json_text(json.dumps(pairs)))
    seen: set[str] = set()
    names = []
    for index, (name, holder) in enumerate(redacted):
        if name in seen:
            name = f"{name} ({index + 1})"
        seen.add(name)
        names.append((name, holder))
    return tuple(names)


class _Collector:
    """The registry's one collector: the families of the scrape being written (`current`,
    set only while `generate_latest` runs, which awaits nothing)."""

    def __init__(self) -> None:
        self.current: Scrape | None = None

    def collect(self) -> Iterator[Metric]:
        if self.current is not None:
            yield from families(self.current)


class MetricsRoute:
    """`GET /metrics` of one app (see the module docstring). A workspace-bound token gets 404,
    as for `/api/status`: the numbers are every workspace's."""

    def __init__(
        self,
        store: AsyncStore,
        hub: _Hub,
        answers: Counter[int],
        failures: FailedAuthentications,
    ) -> None:
        self._store = store
        self._hub = hub
        self._answers = answers
        self._failures = failures
        self._collector = _Collector()
        self.registry = CollectorRegistry(auto_describe=False)
        """The app's own registry (`prometheus_client`), holding its one collector."""
        self.registry.register(self._collector)

    async def scrape(self, request: Request) -> Response:
        Query(request.scope["query_string"], frozenset())
        principal: Principal = request.state.principal
        if principal.workspace is not None:
            raise not_found("metrics (for tokens of every workspace)")
        store = await self._store.metrics()
        hub = self._hub
        names = await _redacted_names(hub.redaction, store)
        self._collector.current = Scrape(
            store=store,
            consumer_labels=names,
            streams_open=len(hub.streams),
            streams_opened=hub.opened,
            streams_closed=dict(hub.closes),
            heartbeats=hub.heartbeats,
            answers=dict(self._answers),
            auth_failures=self._failures.refused,
            commit_to_frame=hub.frames.delays(),
        )
        try:  # nothing awaited until it is cleared: a concurrent scrape writes its own
            body = generate_latest(self.registry)
        finally:
            self._collector.current = None
        return Response(body, media_type=CONTENT_TYPE_LATEST)
