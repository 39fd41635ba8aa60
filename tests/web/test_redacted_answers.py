"""Secrets in what the app serves: with the default settings every route answers the free text
of events, sessions, activity, transcripts, questions and search hits redacted (`[REDACTED]`,
the rules of `session_journal.Redactor`), in valid JSON of the same shape, the events without
secrets byte for byte as the store gives them; a stream's frames are redacted, those the hub
keeps included, whether they come from the hub or from the database. `WebSettings(redact=False)`
serves what the store holds. On both backends."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    InvalidRecord,
    SessionRecord,
    Store,
)
from session_journal.elicitation import ElicitationRequest
from session_journal.relay import AgentMessage, ElicitationRequested, RelayChain
from session_journal.web import WebSettings, create_app
from tests.helpers import append_raw
from tests.web.client import ADMIN, TOKENS, InProcess, ThreadServer, bearer, fault
from tests.web.scenario import LEAKS, OPENAI_KEY, SECRETS, controller, index_row
from tests.web.test_stream_settings import Reader

STORED = list(LEAKS)
SERVED = list(LEAKS.values())


def leaky(store: Store) -> Store:
    """The scenario (seqs 1 and 2), then s-3 in w-1 whose every text holds secrets: its last
    error (seq 3, its `session_fault`), its activity's label (seq 4), a question (seq 5, its
    `input_required`), a transcript item per entry of `LEAKS`, a `session_fault` per entry of
    `LEAKS` (seqs 6 to 14), and an index row."""
    controller(store)
    store.sessions.save(
        SessionRecord(id="s-3", project_id="p", workspace_id="w-1", last_error=STORED[2])
    )
    label = ApiActivityDetails(kind=ApiActivityKind.TURN, label=STORED[3])
    busy = ApiActivityState(
        state="busy", details=label, is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    store.activity.record([("s-3", busy)], recorded_at_ms=1_764_000_000_000)
    question = ElicitationRequest(
        id="question-3",
        session_id="native-3",
        message=STORED[0],
        requested_schema={"type": "object", "properties": {}},
    )
    said = [AgentMessage(message_id=f"m-{n}", text=text) for n, text in enumerate(STORED)]
    chain = RelayChain().extend([*said, ElicitationRequested(request=question)], recorded_at_ms=100)
    store.projection.apply("s-3", chain)
    for text in STORED:
        append_raw(store, "s-3", fault(text))
    store.index.insert([index_row("s-3", 1, f"deploy with {STORED[2]}")])
    return store


def redacted(event: dict[str, Any]) -> dict[str, Any]:
    """An event of `leaky` as the app serves it (changed in place): its text of `LEAKS` as
    served."""
    data = event["event"]["data"]
    if "message" in data and data["message"] in LEAKS:  # faults
        data["message"] = LEAKS[data["message"]]
    if "request" in data:  # questions
        data["request"]["message"] = LEAKS.get(
            data["request"]["message"], data["request"]["message"]
        )
    if "activity" in data:
        details = data["activity"]["details"]
        details["label"] = LEAKS[details["label"]]
    return event


@pytest.fixture
def served(store: Store) -> Store:
    return leaky(store)


def answer(web: InProcess, path: str) -> tuple[bytes, Any]:
    """The body of a 200 answer, and its JSON."""
    response = web.get(path, headers=bearer())
    assert response.status_code == 200, response.text
    return response.content, response.json()


def assert_no_secret(text: bytes | str) -> None:
    """None of `SECRETS` is in `text` (they are ASCII: JSON text holds them as they are)."""
    shown = text.decode() if isinstance(text, bytes) else text
    assert [secret for secret in SECRETS if secret in shown] == []


def faults(page: dict[str, Any]) -> list[str]:
    """The messages of the events of seqs 6 to 14 of a page."""
    return [e["event"]["data"]["message"] for e in page["events"] if 6 <= e["seq"] <= 14]


def test_event_pages_serve_each_shape_redacted(web: InProcess, served: Store) -> None:
    stored = json.loads(served.events.load_json(after_seq=0))
    assert faults(stored) == STORED
    body, page = answer(web, "/api/events?after_seq=0")
    assert_no_secret(body)
    assert faults(page) == SERVED
    # Nothing else changed, and the events without a secret are the store's bytes.
    assert page == {**stored, "events": [redacted(event) for event in stored["events"]]}
    texts = served.events.load_json_events(after_seq=0).events
    for text in (texts[0], texts[1], texts[-1]):  # the last: non-ASCII, no secret
        assert text.encode() in body
    # History and long-polls too.
    body, page = answer(web, "/api/events?before_seq=15&limit=9")
    assert_no_secret(body)
    assert faults(page) == SERVED[::-1]
    body, page = answer(web, "/api/events?after_seq=5&wait=1")
    assert_no_secret(body)
    assert faults(page) == SERVED


def test_sessions_activity_transcripts_questions_and_hits_are_served_redacted(
    web: InProcess,
) -> None:
    body, document = answer(web, "/api/sessions/s-3")
    assert_no_secret(body)
    assert document["session"]["last_error"] == SERVED[2]
    assert document["activity"]["details"]["label"] == SERVED[3]
    body, page = answer(web, "/api/sessions?workspace_id=w-1")
    assert_no_secret(body)
    [row] = [row for row in page["sessions"] if row["session"]["id"] == "s-3"]
    assert row["session"]["last_error"] == SERVED[2]
    assert row["activity"]["details"]["label"] == SERVED[3]

    body, page = answer(web, "/api/sessions/s-3/transcript")
    assert_no_secret(body)
    assert [item["body"]["text"] for item in page["items"]][::-1] == SERVED  # newest first
    body, document = answer(web, "/api/sessions/s-3/questions")
    assert_no_secret(body)
    assert [q["message"] for q in document["questions"]] == [SERVED[0]]
    body, document = answer(web, "/api/sessions/s-3/state")
    assert_no_secret(body)
    assert [q["message"] for q in document["state"]["pending_elicitations"]] == [SERVED[0]]

    body, document = answer(web, "/api/search?q=deploy&session_id=s-3")
    assert [hit["snippet"] for hit in document["hits"]] == [f"[deploy] with {SERVED[2]}"]
    # A hit on the secret itself: the match's marks around it do not hide it from the rules.
    body, document = answer(web, "/api/search?q=hunter2")
    assert_no_secret(body)
    assert [hit["snippet"] for hit in document["hits"]] == [f"deploy with {SERVED[2]}"]


def test_frames_are_redacted_from_the_hub_and_from_the_database(served: Store) -> None:
    stored = json.loads(served.events.load_json(after_seq=0))["events"]
    app = create_app(served, WebSettings(tokens=TOKENS))
    with ThreadServer(app) as live:
        # Every event: the hub's frames; one workspace: always read from the database.
        everything = Reader(live.base, "/api/events/stream?after_seq=0")
        workspace = Reader(live.base, "/api/events/stream?after_seq=0&workspace_id=w-1")
        for reader in (everything, workspace):
            reader.wait_for("ready")
        for text in STORED:  # seqs 15 to 23, live
            append_raw(served, "s-3", fault(text))
        live_ones = json.loads(served.events.load_json(after_seq=14))["events"]
        expected = [redacted(event) for event in stored + live_ones]
        deadline = time.monotonic() + 10
        while len(everything.events()) < 23 or len(workspace.events()) < 22:
            assert time.monotonic() < deadline, (len(everything.events()), len(workspace.events()))
            time.sleep(0.02)
        for reader, events in ((everything, expected), (workspace, expected[:1] + expected[2:])):
            frames = reader.events()
            assert [json.loads(frame.fields["data"]) for frame in frames] == events
            assert all(frame.fields["data"].isascii() for frame in frames)
            assert_no_secret("".join(frame.fields["data"] for frame in frames))
        # What the app keeps of each event it served from the window is its redacted frame.
        held = app.state.session_journal_hub.frames.held()
        by_seq = {event["seq"]: event for event in expected}
        assert [int(frame[4 : frame.index(b"\n")]) for frame in held] == list(range(11, 24))
        assert [json.loads(frame.split(b"data: ")[1]) for frame in held] == [
            by_seq[seq] for seq in range(11, 24)
        ]
        assert_no_secret(b"".join(held))


def test_with_redact_false_everything_is_served_as_stored(served: Store) -> None:
    settings = WebSettings(tokens=TOKENS, redact=False)
    with InProcess(create_app(served, settings)) as web:
        body, page = answer(web, "/api/events?after_seq=0")
        assert body == served.events.load_json(after_seq=0)
        assert faults(page) == STORED
        body, document = answer(web, "/api/sessions/s-3")
        assert document["session"]["last_error"] == STORED[2]
        assert document["activity"]["details"]["label"] == STORED[3]
        body, page = answer(web, "/api/sessions/s-3/transcript")
        assert [item["body"]["text"] for item in page["items"]][::-1] == STORED
        body, document = answer(web, "/api/search?q=deploy&session_id=s-3")
        assert [hit["snippet"] for hit in document["hits"]] == [f"[deploy] with {STORED[2]}"]
    with ThreadServer(create_app(served, settings)) as live:
        reader = Reader(live.base, "/api/events/stream?after_seq=5")
        deadline = time.monotonic() + 10
        while len(reader.events()) < 9:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        data = [json.loads(frame.fields["data"]) for frame in reader.events()]
        assert [event["event"]["data"]["message"] for event in data] == STORED
        assert OPENAI_KEY in reader.events()[0].fields["data"]


def test_redact_must_be_a_bool() -> None:
    with pytest.raises(InvalidRecord, match="redact must be True or False"):
        WebSettings(tokens={ADMIN: None}, redact="no")  # type: ignore[arg-type]
