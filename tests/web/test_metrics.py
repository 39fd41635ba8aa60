"""`GET /metrics`: Prometheus's text format, read back with `prometheus-client`'s own parser;
every metric of docs/operations/metrics.md's table, with its type and labels, and the alert
rules' metrics; the route's token rules, the loopback opening (through the ASGI scope's
`client`), and a registry per app. On both backends."""

from __future__ import annotations

import re
from typing import Any

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from session_journal import ApiEventFilter, Store
from session_journal.aio import AsyncStore
from session_journal.web import WebSettings, create_app
from tests.docs import page
from tests.web.client import ADMIN, TOKENS, W2_TOKEN, InProcess, bearer, serve

PREFIX = "session_journal_"


def scrape(web: InProcess, **headers: str) -> dict[str, Any]:
    """The families of one scrape, by name (as the parser names them: counters without
    `_total`)."""
    response = web.get("/metrics", headers=headers or bearer())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == prometheus_client.CONTENT_TYPE_LATEST
    assert response.headers["cache-control"] == "no-store"
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(families: dict[str, Any], name: str, **labels: str) -> float:
    samples = [
        sample.value
        for sample in families[PREFIX + name].samples
        if sample.labels == labels and not sample.name.endswith(("_created", "_bucket"))
    ]
    assert len(samples) == 1, (name, labels, families[PREFIX + name].samples)
    return float(samples[0])


def documented() -> dict[str, tuple[str, set[str]]]:
    """docs/operations/metrics.md's table: each metric's name, type and labels."""
    rows = re.findall(
        r"^\| `(?P<name>[a-z_]+)` \| (?P<type>gauge|counter|histogram) \|(?P<labels>[^|]*)\|",
        page("operations/metrics.md"),
        re.MULTILINE,
    )
    return {
        PREFIX + name: (kind, set(re.findall(r"`([a-z_]+)`", labels)))
        for name, kind, labels in rows
    }


def test_every_documented_metric_is_written_with_its_type_and_labels(
    web: InProcess, served: Store
) -> None:
    served.consumers.register("projector", start="beginning")
    served.consumers.acquire("projector", "host-a:41", ttl_s=60)
    ahead = web.get("/api/events/stream?after_seq=99", headers=bearer())
    assert ahead.status_code == 409  # a stream refused: a close and an answer counted
    families = scrape(web)
    table = documented()
    assert len(table) == 25
    written = {
        name: (family.type, {label for s in family.samples for label in s.labels} - {"le"})
        for name, family in families.items()
    }
    assert written == table


def test_the_values_are_the_stores_and_the_servers(web: InProcess, served: Store) -> None:
    served.consumers.register("projector", start="beginning")
    served.consumers.acquire("projector", "host-a:41", ttl_s=60)
    assert web.get("/api/events/stream?after_seq=99", headers=bearer()).status_code == 409
    assert web.get("/api/events").status_code == 401
    families = scrape(web)
    metrics = served.metrics()
    assert value(families, "latest_seq") == metrics.latest_seq == 2
    assert value(families, "pruned_through") == 0
    assert value(families, "events_retained_max") == 2
    for state, count in metrics.sessions_by_state.items():
        assert value(families, "sessions", state=state) == count
    assert value(families, "consumer_position", consumer="projector") == 0
    assert value(families, "consumer_lag_events", consumer="projector") == 2
    assert value(families, "consumer_stuck", consumer="projector") == 0
    generation = {"consumer": "projector", "holder": "host-a:41"}
    assert value(families, "consumer_lease_generation", **generation) == 1
    assert value(families, "write_calls") == metrics.write_calls > 0
    assert value(families, "events_appended") == metrics.events_appended
    assert value(families, "http_responses", status="401") == 1
    assert value(families, "auth_failures") == 1
    assert value(families, "streams_open") == 0
    assert value(families, "streams_opened") == 0
    assert value(families, "streams_closed", reason="cursor_ahead") == 1
    assert value(families, "http_responses", status="409") == 1
    write = families[PREFIX + "write_seconds"]
    counts = [s.value for s in write.samples if s.name.endswith("_bucket")]
    assert counts == sorted(counts)  # cumulative, the last one `+Inf`
    assert [s.labels["le"] for s in write.samples if s.name.endswith("_bucket")][-1] == "+Inf"


def test_a_workspace_token_gets_404_and_a_missing_token_401(web: InProcess) -> None:
    assert web.get("/metrics", headers=bearer(W2_TOKEN)).json()["code"] == "not_found"
    assert web.get("/metrics", headers=bearer(W2_TOKEN)).status_code == 404
    assert web.get("/metrics").status_code == 401
    assert web.get("/metrics?name=x", headers=bearer()).json()["code"] == "bad_request"


def test_open_on_loopback_lets_a_loopback_scraper_in_without_a_token(served: Store) -> None:
    with serve(served, metrics_open_on_loopback=True) as local:
        assert PREFIX + "latest_seq" in scrape(local, accept="text/plain")
        assert local.get("/api/status").status_code == 401  # only /metrics is opened
        wrong = local.get("/metrics", headers=bearer("z" * 43))
        assert wrong.status_code == 401  # a token presented is checked
        assert local.get("/metrics", headers=bearer(W2_TOKEN)).status_code == 404
    for address in ("::1", "127.0.0.2"):
        with InProcess(
            create_app(served, WebSettings(tokens=TOKENS, metrics_open_on_loopback=True)),
            client=(address, 50000),
        ) as client:
            assert client.get("/metrics").status_code == 200, address
    for address in ("203.0.113.5", "10.0.0.1", "::ffff:127.0.0.1", "testclient"):
        with InProcess(
            create_app(served, WebSettings(tokens=TOKENS, metrics_open_on_loopback=True)),
            client=(address, 50000),
        ) as remote:
            assert remote.get("/metrics").status_code == 401, address
            assert remote.get("/metrics", headers=bearer(ADMIN)).status_code == 200
    with serve(served) as closed:  # off by default
        assert closed.get("/metrics").status_code == 401


def test_each_app_has_a_registry_of_its_own(served: Store) -> None:
    with serve(served) as first, serve(served) as second:
        assert first.get("/api/events").status_code == 401
        one, two = scrape(first), scrape(second)
        assert value(one, "http_responses", status="401") == 1
        assert PREFIX + "http_responses" not in two or not [
            s for s in two[PREFIX + "http_responses"].samples if s.labels["status"] == "401"
        ]
    default = {family.name for family in prometheus_client.REGISTRY.collect()}
    assert not {name for name in default if name.startswith(PREFIX)}


def test_the_alert_rules_name_metrics_the_server_writes(web: InProcess, served: Store) -> None:
    served.consumers.register("w2-mailer", filter=ApiEventFilter(workspace_id="w-2"))
    families = scrape(web)
    rules = page("operations/metrics.md").split("## Alert rules", 1)[1]
    named = set(re.findall(r"session_journal_[a-z_]+", rules))
    assert named
    for name in named:
        base = name.removesuffix("_bucket")
        assert base in families, name
        if name.endswith("_bucket"):
            assert families[base].type == "histogram"


def test_consumer_names_and_holders_pass_the_apps_redaction(served: Store) -> None:
    secret = "sk-abcdefghijklmnopqrstuvwxyz0123"
    served.consumers.register(secret)
    served.consumers.register(secret + "4")  # redacted alike: still a series of its own
    served.consumers.acquire(secret, "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", ttl_s=60)
    with serve(served) as web:
        response = web.get("/metrics", headers=bearer())
        families = scrape(web)
    assert "sk-abc" not in response.text and "ghp_a1B2" not in response.text
    names = [s.labels["consumer"] for s in families[PREFIX + "consumer_position"].samples]
    assert len(names) == len(set(names)) == 2
    assert all("[REDACTED]" in name for name in names)
    holders = {s.labels["holder"] for s in families[PREFIX + "consumer_lease_generation"].samples}
    assert holders == {"[REDACTED]", ""}
    with serve(served, redact=False) as plain:
        assert secret in plain.get("/metrics", headers=bearer()).text


def test_a_token_in_the_cookie_is_checked_on_loopback_too(served: Store) -> None:
    with serve(served, metrics_open_on_loopback=True) as local:
        cookie = {"Cookie": "session_journal_token_80=" + "z" * 43}
        assert local.get("/metrics", headers=cookie).status_code == 401
        scoped = {"Cookie": f"session_journal_token_80={W2_TOKEN}"}
        assert local.get("/metrics", headers=scoped).status_code == 404
        admin = {"Cookie": f"session_journal_token_80={ADMIN}"}
        assert local.get("/metrics", headers=admin).status_code == 200


def test_preflights_errors_and_head_requests_are_counted_as_they_are(
    served: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(served, cors_origins=("https://app.example",)) as web:
        preflight = web.request(
            "OPTIONS",
            "/metrics",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
        )
        assert preflight.status_code == 204
        assert web.request("HEAD", "/api/events/stream", headers=bearer()).status_code == 200

        async def failing(self: object) -> None:
            raise RuntimeError("a scrape failed")

        with monkeypatch.context() as patched:
            patched.setattr(AsyncStore, "metrics", failing)
            with pytest.raises(RuntimeError, match="a scrape failed"):
                web.get("/metrics", headers=bearer())  # 500, and raised to the test's client
        families = scrape(web)
    assert value(families, "http_responses", status="204") == 1
    assert value(families, "http_responses", status="500") == 1
    assert value(families, "streams_opened") == 0  # a HEAD opens no stream
    assert not families[PREFIX + "streams_closed"].samples
