"""The JSON routes of `session_journal.web`, through an in-process client: each answers what
the store's read gives (byte for byte where the store has a JSON twin), snapshots carry
`as_of_seq`, the cursor rules are `load`'s, and every error is a problem document with its
`code`. On both backends."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from session_journal import ApiEventFilter, SessionRecord, SessionState, Store
from session_journal.aio import AsyncStore
from session_journal.web import WebSettings, create_app
from tests.web.client import TOKENS, W2_TOKEN, InProcess, bearer


def get(web: InProcess, path: str, status: int = 200) -> Any:
    response = web.get(path, headers=bearer())
    assert response.status_code == status, response.text
    assert response.headers["cache-control"] == "no-store"
    expected = "application/json" if status < 400 else "application/problem+json"
    assert response.headers["content-type"] == expected
    return response.json()


def problem(web: InProcess, path: str, status: int, code: str) -> dict[str, Any]:
    body: dict[str, Any] = get(web, path, status)
    assert (body["status"], body["code"]) == (status, code), body
    return body


def test_event_pages_are_the_stores_json_byte_for_byte(web: InProcess, served: Store) -> None:
    cases = {
        "/api/events?after_seq=0": served.events.load_json(after_seq=0),
        "/api/events": served.events.load_json(),
        "/api/events?after_seq=0&limit=1": served.events.load_json(after_seq=0, limit=1),
        "/api/events?after_seq=0&session_id=s-2": served.events.load_json(
            ApiEventFilter(session_id="s-2"), after_seq=0
        ),
        "/api/events?after_seq=0&workspace_id=w-1": served.events.load_json(
            ApiEventFilter(workspace_id="w-1"), after_seq=0
        ),
        "/api/events?after_seq=0&type=session_fault&type=turn_ended": served.events.load_json(
            ApiEventFilter(types=("session_fault", "turn_ended")), after_seq=0
        ),
        "/api/events?before_seq=3&limit=1": served.events.load_before_json(before_seq=3, limit=1),
        # A cursor above the frontier without waiting: `load`'s rule, an empty page.
        "/api/events?after_seq=99": served.events.load_json(after_seq=99),
    }
    for path, expected in cases.items():
        response = web.get(path, headers=bearer())
        assert (response.status_code, response.content) == (200, expected), path
    page = get(web, "/api/events?after_seq=0")
    assert [(e["seq"], e["session_id"], e["event"]["type"]) for e in page["events"]] == [
        (1, "s-1", "input_required"),
        (2, "s-2", "session_fault"),
    ]
    assert (page["next_after_seq"], page["latest_seq"], page["pruned_through"]) == (2, 2, 0)
    assert get(web, "/api/events?after_seq=0&type=turn_ended")["next_after_seq"] == 2


def test_a_long_poll_answers_when_an_event_commits(web: InProcess, served: Store) -> None:
    answers: list[Any] = []
    poll = threading.Thread(
        target=lambda: answers.append(get(web, "/api/events?after_seq=2&wait=20"))
    )
    poll.start()
    time.sleep(0.3)
    assert answers == []
    served.faults.record_startup_fault("s-1", "late")
    poll.join(20)
    [page] = answers
    assert [(e["seq"], e["event"]["data"]["message"]) for e in page["events"]] == [(3, "late")]
    # Nothing comes: the wait ends with an empty page at the cursor.
    began = time.monotonic()
    empty = get(web, "/api/events?after_seq=3&wait=0.2")
    assert time.monotonic() - began >= 0.2
    assert (empty["events"], empty["next_after_seq"]) == ([], 3)
    # Waiting from above the frontier would skip events: 409.
    problem(web, "/api/events?after_seq=9&wait=1", 409, "cursor_ahead")


def test_the_sessions_list_is_a_snapshot_newest_first(web: InProcess, served: Store) -> None:
    page = get(web, "/api/sessions")
    assert page["as_of_seq"] == 2
    assert [s["session"]["id"] for s in page["sessions"]] == [
        s.session.id for s in served.sessions.page().sessions
    ]
    assert page == {"as_of_seq": 2, **served.sessions.page().model_dump(mode="json")}
    first = get(web, "/api/sessions?limit=1")
    assert len(first["sessions"]) == 1 and first["next_before"] is not None
    rest = get(web, f"/api/sessions?limit=1&before={first['next_before']}")
    assert [s["session"]["id"] for s in first["sessions"] + rest["sessions"]] == [
        s["session"]["id"] for s in page["sessions"]
    ]
    assert rest["next_before"] is None
    assert get(web, "/api/sessions?workspace_id=w-2")["sessions"][0]["session"]["id"] == "s-2"
    assert get(web, "/api/sessions?state=closed")["sessions"] == []
    served.sessions.save(
        served.sessions.get("s-1").model_copy(update={"state": SessionState.CLOSED})  # type: ignore[union-attr]
    )
    closed = get(web, "/api/sessions?state=closed")
    assert [s["session"]["id"] for s in closed["sessions"]] == ["s-1"]
    problem(web, "/api/sessions?state=sleeping", 400, "bad_request")
    problem(web, "/api/sessions?before=not-a-cursor", 400, "bad_request")
    problem(web, "/api/sessions?limit=0", 400, "bad_request")


def test_session_counts_by_state_every_state_and_the_total(web: InProcess, served: Store) -> None:
    none = {state.value: 0 for state in SessionState}
    assert get(web, "/api/session-counts") == {
        "as_of_seq": 2,
        "workspace_id": None,
        "total": 2,
        "counts": {**none, "provisioning": 2},
    }
    served.sessions.save(SessionRecord(id="s-3", project_id="p", workspace_id="w-2"))
    errored = served.sessions.get("s-2").model_copy(update={"state": SessionState.ERROR})  # type: ignore[union-attr]
    served.sessions.save(errored)
    assert get(web, "/api/session-counts?workspace_id=w-2") == {
        "as_of_seq": 2,
        "workspace_id": "w-2",
        "total": 2,
        "counts": {**none, "provisioning": 1, "error": 1},
    }
    assert get(web, "/api/session-counts?workspace_id=w-9")["total"] == 0
    assert served.sessions.count_by_state(workspace_id="w-1") == {
        **{state: 0 for state in SessionState},
        SessionState.PROVISIONING: 1,
    }
    # A session named `counts` is a session like any other.
    served.sessions.save(SessionRecord(id="counts", project_id="p", workspace_id="w-1"))
    assert get(web, "/api/session-counts")["total"] == 4
    assert get(web, "/api/sessions/counts")["session"]["id"] == "counts"
    problem(web, "/api/session-counts?state=error", 400, "bad_request")
    problem(web, "/api/session-counts?workspace_id=a%2Fb", 400, "bad_request")


def test_the_event_rate_per_minute(web: InProcess, served: Store) -> None:
    rate = get(web, "/api/events/rate")
    assert rate["workspace_id"] is None and rate["minute_ms"] == 60_000
    assert len(rate["counts"]) == 15 and rate["start_ms"] % 60_000 == 0
    assert set(rate) == {"workspace_id", "as_of_seq", "as_of_ms", "start_ms", "counts", "minute_ms"}
    assert rate["as_of_seq"] == 2
    assert abs(rate["as_of_ms"] - time.time() * 1000) < 60_000
    assert sum(rate["counts"]) == 1  # the fault, stamped now; the question was recorded at 100
    assert len(get(web, "/api/events/rate?minutes=60")["counts"]) == 60
    assert sum(get(web, "/api/events/rate?workspace_id=w-1")["counts"]) == 0
    for query in ("minutes=0", "minutes=61", "minutes=x", "minutes=1&minutes=2"):
        assert problem(web, f"/api/events/rate?{query}", 400, "bad_request")["parameter"] == (
            "minutes"
        )
    problem(web, "/api/events/rate?session_id=s-1", 400, "bad_request")


def test_one_session_its_state_transcript_and_questions(web: InProcess, served: Store) -> None:
    one = get(web, "/api/sessions/s-1")
    assert one == {
        "as_of_seq": 2,
        "session": served.sessions.get("s-1").model_dump(mode="json"),  # type: ignore[union-attr]
        "activity": None,
        "checkpoint_operation": None,
    }
    state = get(web, "/api/sessions/s-1/state")
    materialized = served.projection.load("s-1")
    assert materialized is not None
    assert state == {
        "as_of_seq": 2,
        "state": materialized.model_dump(mode="json", exclude={"transcript"}),
    }
    transcript = get(web, "/api/sessions/s-1/transcript")
    assert [item["body"]["text"] for item in transcript["items"]] == [
        "naïve café ☃",
        "hello <script>alert(1)</script>",
    ]
    older = get(web, "/api/sessions/s-1/transcript?limit=1&before_position=1")
    assert [item["position"] for item in older["items"]] == [0]
    assert older["next_before_position"] == 0 and older["as_of_seq"] == 2
    questions = get(web, "/api/sessions/s-1/questions")
    assert [q["id"] for q in questions["questions"]] == ["question-1"]
    assert questions["session_id"] == "s-1" and questions["as_of_seq"] == 2
    for path in ("", "/state", "/transcript", "/questions"):
        problem(web, f"/api/sessions/nobody{path}", 404, "not_found")
        problem(web, f"/api/sessions/bad%20id{path}", 400, "bad_request")


def test_search_is_bounded(web: InProcess) -> None:
    hits = get(web, "/api/search?q=deploy")["hits"]
    assert sorted((hit["session_id"], hit["seq"]) for hit in hits) == [("s-1", 1), ("s-2", 1)]
    assert {
        hit["session_id"] for hit in get(web, "/api/search?q=deploy&session_id=s-2")["hits"]
    } == {"s-2"}
    assert get(web, "/api/search?q=deploy&limit=1")["hits"].__len__() == 1
    long = problem(web, "/api/search?q=" + "a" * 1001, 400, "bad_request")
    assert long["parameter"] == "q" and "1000" in long["detail"]
    words = problem(web, "/api/search?q=" + "+".join(["w"] * 33), 400, "bad_request")
    assert words["parameter"] == "q"
    problem(web, "/api/search", 400, "bad_request")
    problem(web, "/api/search?q=x&limit=1001", 400, "bad_request")


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/events?after_seq=-1", "after_seq"),
        ("/api/events?after_seq=1e3", "after_seq"),
        ("/api/events?after_seq=99999999999999999999", "after_seq"),
        ("/api/events?after_seq=1&after_seq=2", "after_seq"),
        ("/api/events?limit=0", "limit"),
        ("/api/events?limit=1001", "limit"),
        ("/api/events?wait=56", "wait"),
        ("/api/events?wait=nan", "wait"),
        ("/api/events?type=nope", "type"),
        ("/api/events?session_id=a%2Fb", "session_id"),
        ("/api/events?unknown=1", "unknown"),
        ("/api/events?after_seq=1&before_seq=5", "before_seq"),
        ("/api/events?before_seq=5&wait=1", "wait"),
        ("/api/events?after_seq=%FF", "query"),
        ("/api/sessions/s-1/transcript?before_position=x", "before_position"),
    ],
)
def test_a_bad_parameter_is_named(web: InProcess, path: str, parameter: str) -> None:
    assert problem(web, path, 400, "bad_request")["parameter"] == parameter


def test_errors_are_problem_documents(web: InProcess, served: Store) -> None:
    problem(web, "/api/nothing", 404, "not_found")
    refused = web.request("POST", "/api/events", headers=bearer())
    assert refused.status_code == 405 and refused.json()["code"] == "method_not_allowed"
    assert "GET" in refused.headers["allow"]
    long = web.get("/api/events?after_seq=" + "0" * 8200, headers=bearer())
    assert (long.status_code, long.json()["code"]) == (414, "uri_too_long")
    served.faults.record_startup_fault("s-2", "third")
    served.events.prune(through_seq=2)
    expired = problem(web, "/api/events?after_seq=1", 410, "cursor_expired")
    assert {
        k: expired[k] for k in ("cursor", "pruned_through", "oldest_retained_seq", "latest_seq")
    } == {
        "cursor": 1,
        "pruned_through": 2,
        "oldest_retained_seq": 3,
        "latest_seq": 3,
    }
    assert get(web, "/healthz")["ok"] is True


def test_status_counts_streams_and_refusals(web: InProcess) -> None:
    web.get("/api/events", headers=bearer("x" * 43))
    status = get(web, "/api/status")
    assert status["streams"] == 0 and status["auth_failures"] == 1
    assert status["max_streams"] == 1000


def test_an_async_store_is_served_alike(served: Store) -> None:
    with InProcess(None) as loop_only:
        async_store = loop_only.run(_async_view(served))
    with InProcess(create_app(async_store, WebSettings(tokens=TOKENS))) as web:
        assert web.get(
            "/api/events?after_seq=0", headers=bearer()
        ).content == served.events.load_json(after_seq=0)
        assert json.loads(web.get("/api/sessions", headers=bearer()).content)["as_of_seq"] == 2


async def _async_view(store: Store) -> AsyncStore:
    return AsyncStore.from_store(store)


def test_consumers_with_the_frontier_of_the_read(web: InProcess, served: Store) -> None:
    assert get(web, "/api/consumers") == {
        "as_of_seq": served.events.latest_seq(),
        "consumers": [],
    }
    served.consumers.register("all", start="now")
    served.consumers.register("w2-mailer", filter=ApiEventFilter(workspace_id="w-2"))
    served.consumers.acquire("all", "host-a:41", ttl_s=60)
    body = get(web, "/api/consumers")
    assert body["as_of_seq"] == served.events.latest_seq()
    expected = [status.model_dump(mode="json") for status in served.consumers.list()]
    for document in (*body["consumers"], *expected):
        document.pop("lag_seconds")  # read at another moment
    assert body["consumers"] == expected
    assert [(c["name"], c["holder"], c["stuck"]) for c in body["consumers"]] == [
        ("all", "host-a:41", False),
        ("w2-mailer", None, False),
    ]
    scoped = web.get("/api/consumers", headers=bearer(W2_TOKEN)).json()
    assert [c["name"] for c in scoped["consumers"]] == ["w2-mailer"]  # bound to its workspace
    problem(web, "/api/consumers?limit=5", 400, "bad_request")
