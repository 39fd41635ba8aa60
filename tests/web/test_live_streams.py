"""The stream against a real `session-journal serve` on a free loopback port: it resumes
exactly (every event once, in commit order) while events are appended and connections are cut
every few events, filtered or not, across a server restart; progress frames spare a filtered
reconnect the rescan; an expired cursor is 410 before a stream and `event: expired` in-band;
SIGTERM closes every stream within its bound. On both backends."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from session_journal import ApiEventFilter, SessionRecord, Store
from tests.helpers import append_raw
from tests.web.client import ADMIN, W2_TOKEN, Frame, LiveServer, bearer, fault, frames
from tests.web.test_guard import workspace_scoping
from tests.web.test_page_files import secured

pytestmark = pytest.mark.slow

TOKEN_LINES = f"# tokens of the tests\n{ADMIN}\n{W2_TOKEN} w-2\n"
RESOLVED = (
    '{"type":"input_resolved","data":{"elicitation_id":"e-1","action":"accept","turn_id":null}}'
)


@pytest.fixture
def live(writer: Store, migrated_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(migrated_url, tmp_path, token_lines=TOKEN_LINES) as server:
        yield server


def stream_frames(
    base: str, path: str, headers: dict[str, str], *, read_s: float = 20
) -> Iterator[Frame]:
    """The frames of one stream (status 200 asserted), until the server ends it."""
    timeout = httpx.Timeout(10, read=read_s)
    with (
        httpx.Client(timeout=timeout) as client,
        client.stream("GET", base + path, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-store, no-transform"
        assert response.headers["x-accel-buffering"] == "no"
        secured(response, stream=True)
        yield from frames(response.iter_lines())


SHAPES = {
    # query, token, the filter that says which events the client must get
    "every event": ("", ADMIN, ApiEventFilter()),
    "one session": ("&session_id=s-2", ADMIN, ApiEventFilter(session_id="s-2")),
    "two types": (
        "&type=input_resolved&type=turn_ended",
        ADMIN,
        ApiEventFilter(types=("input_resolved", "turn_ended")),
    ),
    "a workspace token": ("", W2_TOKEN, ApiEventFilter(workspace_id="w-2")),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_stream_resumes_exactly_across_cuts_and_a_restart(
    writer: Store, live: LiveServer, migrated_url: str, tmp_path: Path, shape: str
) -> None:
    query, token, wanted = SHAPES[shape]
    appended = threading.Event()

    def append() -> None:
        for n in range(240):
            append_raw(writer, "s-1" if n % 4 else "s-2", RESOLVED if n % 3 == 0 else fault(f"{n}"))
            time.sleep(0.004)
        # A tail that matches no filter but "every event": a filtered stream's progress
        # frame must then carry its cursor to the frontier.
        append_raw(writer, "s-1", fault("tail"), count=10)
        appended.set()

    # A filtered stream carries fewer events (the workspace's, 60): cut it more often, so that
    # every shape reconnects more than five times.
    cut_every = 23 if wanted == ApiEventFilter() else 11
    server = [live]
    received: list[int] = []
    cursor: int | None = None
    progress: list[int] = []
    readies: list[dict[str, int]] = []
    restarted = shutdowns = 0
    threading.Thread(target=append, daemon=True).start()
    deadline = time.monotonic() + 90
    expected: list[int] | None = None
    try:  # the restarted server is this test's to close, also when it fails
        while time.monotonic() < deadline:
            if appended.is_set() and expected is None:
                expected = [e.seq for e in _all(writer, wanted, after=2)]
                latest = writer.events.latest_seq()
            if (
                expected is not None
                and received == expected
                and (wanted == ApiEventFilter() or (progress and progress[-1] == latest))
            ):
                break
            if restarted == 0 and len(received) >= 30:  # a restart midway: the same port
                assert server[0].terminate() == 0
                server[0].close()
                server[0] = LiveServer(
                    migrated_url, tmp_path, token_lines=TOKEN_LINES, port=server[0].port
                )
                restarted = 1
            headers = bearer(token)
            path = f"/api/events/stream?after_seq=2{query}"
            if cursor is not None:
                headers["Last-Event-ID"] = str(cursor)  # wins over after_seq
            taken = 0
            try:
                for frame in stream_frames(server[0].base, path, headers, read_s=5):
                    if frame.event == "ready":
                        readies.append(json.loads(frame.fields["data"]))
                    elif frame.event == "api_event":
                        seq = int(frame.fields["id"])
                        assert json.loads(frame.fields["data"])["seq"] == seq
                        assert not received or seq > received[-1], (received[-3:], seq)
                        received.append(seq)
                        cursor = seq
                        taken += 1
                    elif frame.event == "progress":
                        scanned = json.loads(frame.fields["data"])["scanned_through"]
                        assert int(frame.fields["id"]) == scanned
                        # Above every id the client has: never one it sent or was sent.
                        assert scanned > (2 if cursor is None else cursor), (cursor, scanned)
                        progress.append(scanned)
                        cursor = scanned
                        break
                    elif frame.event == "shutdown":
                        shutdowns += 1
                        break
                    if taken == cut_every:  # cut the connection every few events
                        break
                    if expected is not None and received == expected and wanted == ApiEventFilter():
                        break
            except httpx.TransportError:
                time.sleep(0.05)  # the server restarts: try again
    finally:
        server[0].close()
    assert expected is not None and received == expected, (
        shape,
        len(received),
        len(expected or []),
    )
    assert restarted == 1 and len(readies) > 5
    if wanted != ApiEventFilter():
        assert progress and progress[-1] == latest
        # A reconnect from the progress id starts there: nothing before it is scanned again.
        with LiveServer(migrated_url, tmp_path, token_lines=TOKEN_LINES) as again:
            headers = {**bearer(token), "Last-Event-ID": str(progress[-1])}
            lines = stream_frames(again.base, f"/api/events/stream?after_seq=2{query}", headers)
            opening = [next(lines), next(lines)]
            assert json.loads(opening[1].fields["data"])["cursor"] == latest


def _all(store: Store, wanted: ApiEventFilter, after: int) -> list:
    events = []
    while True:
        page = store.events.load(wanted, after_seq=after, limit=1000)
        events += page.events
        if page.next_after_seq == after:
            return events
        after = page.next_after_seq


def test_an_expired_cursor_is_410_before_and_expired_in_band(
    writer: Store, live: LiveServer
) -> None:
    append_raw(writer, "s-1", fault("x" * 200), count=6000)
    latest = writer.events.latest_seq()
    # A small receive buffer, read slowly: the server is still paging the database behind.
    transport = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    got: list[Frame] = []
    with (
        httpx.Client(transport=transport, timeout=httpx.Timeout(30)) as client,
        client.stream(
            "GET", live.base + "/api/events/stream?after_seq=2", headers=bearer()
        ) as response,
    ):
        lines = response.iter_lines()
        for frame in frames(lines):
            got.append(frame)
            if frame.event == "api_event":
                break
        writer.events.prune(through_seq=latest)
        got += list(frames(lines))  # until the server ends the stream
    kinds = [frame.event for frame in got]
    assert kinds[:2] == [None, "ready"] and kinds[-1] == "expired", kinds[-3:]
    expired = json.loads(got[-1].fields["data"])
    assert expired["code"] == "cursor_expired"
    assert (expired["pruned_through"], expired["latest_seq"]) == (latest, latest)
    assert expired["oldest_retained_seq"] is None and 2 < expired["cursor"] < latest
    seqs = [int(frame.fields["id"]) for frame in got if frame.event == "api_event"]
    assert seqs == list(range(3, 3 + len(seqs)))
    # Before a stream: 410 with the same members, nothing streamed.
    refused = httpx.get(live.base + "/api/events/stream?after_seq=5", headers=bearer())
    assert refused.status_code == 410
    body = refused.json()
    assert body["code"] == "cursor_expired"
    assert {
        k: body[k] for k in ("cursor", "pruned_through", "oldest_retained_seq", "latest_seq")
    } == {
        "cursor": 5,
        "pruned_through": latest,
        "oldest_retained_seq": None,
        "latest_seq": latest,
    }
    # From 0 (the oldest retained event) or the floor, a stream starts.
    ready = next(iter(stream_frames(live.base, "/api/events/stream?after_seq=0", bearer())))
    assert ready.event is None and ready.fields["retry"].isdigit()


def test_a_stream_from_zero_never_gets_the_events_of_a_session_another_process_deleted(
    writer: Store, live: LiveServer
) -> None:
    # The server reads s-3's 50 events into its window (a first stream from 0 gets them all);
    # then this process, not the server's, deletes s-3.
    writer.sessions.save(SessionRecord(id="s-3", project_id="p"))
    append_raw(writer, "s-3", fault("doomed"), count=50)
    doomed = [event.seq for event in _all(writer, ApiEventFilter(session_id="s-3"), after=0)]
    first = _seqs_through(live, doomed[-1])
    assert set(doomed) <= set(first)
    assert writer.sessions.delete("s-3")
    append_raw(writer, "s-1", fault("after the delete"))
    marker = writer.events.latest_seq()
    # A new stream from 0 gets every event the log holds now, none of s-3's: as a page does.
    again = _seqs_through(live, marker)
    assert again == [event.seq for event in _all(writer, ApiEventFilter(), after=0)]
    assert not set(doomed) & set(again)


def _seqs_through(live: LiveServer, last: int) -> list[int]:
    """The event ids a stream from 0 sends, up to `last`."""
    seqs: list[int] = []
    for frame in stream_frames(live.base, "/api/events/stream?after_seq=0", bearer()):
        if frame.event == "api_event":
            seqs.append(int(frame.fields["id"]))
            if seqs[-1] >= last:
                return seqs
    raise AssertionError(f"the stream ended at {seqs[-3:]}")


def test_a_cursor_ahead_is_409_and_last_event_id_is_digits(writer: Store, live: LiveServer) -> None:
    ahead = httpx.get(live.base + "/api/events/stream?after_seq=99", headers=bearer())
    assert (ahead.status_code, ahead.json()["code"]) == (409, "cursor_ahead")
    bad = httpx.get(
        live.base + "/api/events/stream", headers={**bearer(), "Last-Event-ID": "1; drop"}
    )
    assert (bad.status_code, bad.json()["parameter"]) == (400, "Last-Event-ID")
    # Last-Event-ID wins over after_seq.
    lines = stream_frames(
        live.base, "/api/events/stream?after_seq=99", {**bearer(), "Last-Event-ID": "1"}
    )
    opening = [next(lines), next(lines), next(lines)]
    assert opening[0].fields.keys() == {"retry"}
    ready = json.loads(opening[1].fields["data"])
    assert ready == {"cursor": 1, "latest_seq": 2, "pruned_through": 0, "heartbeat_s": 15.0}
    assert opening[2].fields["id"] == "2"
    assert 1500 <= int(opening[0].fields["retry"]) <= 4500


def test_sigterm_closes_every_stream_and_exits_in_time(writer: Store, live: LiveServer) -> None:
    ended: list[tuple[str | None, float]] = []
    opened = threading.Barrier(4)

    def hold() -> None:
        last = None
        for frame in stream_frames(live.base, "/api/events/stream", bearer(), read_s=30):
            if frame.event == "ready":
                opened.wait(10)
            last = frame.event
        ended.append((last, time.monotonic()))

    readers = [threading.Thread(target=hold) for _ in range(3)]
    for reader in readers:
        reader.start()
    opened.wait(10)
    began = time.monotonic()
    assert live.terminate(timeout=10) == 0
    exited = time.monotonic() - began
    for reader in readers:
        reader.join(10)
    assert [kind for kind, _ in ended] == ["shutdown"] * 3
    assert all(at - began <= 1.0 for _, at in ended), [at - began for _, at in ended]
    assert exited <= 3.0


def test_hosts_origins_and_tokens_on_a_live_server(
    writer: Store, live: LiveServer, migrated_url: str, tmp_path: Path
) -> None:
    def get(path: str, **headers: str) -> httpx.Response:
        return httpx.get(live.base + path, headers={**bearer(), **headers})

    assert get("/api/events", Host=f"[::1]:{live.port}").status_code == 200
    assert get("/api/events", Host=f"localhost:{live.port}").status_code == 200
    assert get("/api/events", Host="rebind.example").json()["code"] == "host_not_allowed"
    assert get("/api/events", Origin="http://rebind.example").json()["code"] == "origin_not_allowed"
    secret = "s" * 43
    refused = httpx.get(live.base + f"/api/events?access_token={secret}")
    assert (refused.status_code, refused.json()["code"]) == (400, "bad_request")
    assert live.terminate() == 0
    log = live.output()
    assert "GET /api/events HTTP/1.1" in log and "access_token" not in log
    assert secret not in log and ADMIN not in log
    # Bound to [::1]: reached there, and the bind host is allowed.
    with LiveServer(migrated_url, tmp_path, host="::1", token_lines=TOKEN_LINES) as six:
        answer = httpx.get(six.base + "/api/events", headers=bearer())
        assert answer.status_code == 200 and answer.json()["latest_seq"] == 2


def test_a_workspace_token_on_a_live_server(writer: Store, live: LiveServer) -> None:
    with httpx.Client(base_url=live.base, timeout=10) as client:
        workspace_scoping(client.get)


TEXTS = {"ascii": "x", "cjk": "\u6f22", "emoji": "\U0001f600"}
"""The character of the messages of the stalled streams' events: one byte in UTF-8, three (six
once escaped in a frame), four (twelve)."""


def rss_bytes(pid: int) -> int:
    """The resident set size of process `pid`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def settled_rss(pid: int, *, at_least_s: float) -> int:
    """The process's RSS once it stopped growing (unchanged for a second), after `at_least_s`."""
    began, last, since = time.monotonic(), rss_bytes(pid), time.monotonic()
    while time.monotonic() - began < 60:
        time.sleep(0.2)
        now = rss_bytes(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 1 and time.monotonic() - began >= at_least_s:
            return now
    return last


@pytest.mark.parametrize("text", list(TEXTS))
def test_stalled_streams_pin_a_bounded_number_of_bytes(
    writer: Store, live: LiveServer, text: str
) -> None:
    # 800 events of 12,000 characters each, then 40 clients that open a stream from the oldest
    # event with a small receive window and read nothing. Each stream reads the database (the
    # hub's frames hold the newest only) and stalls with what it read: whatever the text, the
    # server grows by at most 3.5 MiB a stream.
    data = {"reason": "startup_failed", "message": TEXTS[text] * 12_000, "command_id": None}
    body = json.dumps({"type": "session_fault", "data": data}, ensure_ascii=False)
    for _ in range(8):
        append_raw(writer, "s-1", body, count=100)
    warm = stream_frames(live.base, "/api/events/stream?after_seq=0", bearer())
    assert [next(warm).event, next(warm).event] == [None, "ready"]  # the hub runs now
    warm.close()
    before = settled_rss(live.process.pid, at_least_s=1)
    request = (
        "GET /api/events/stream?after_seq=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {ADMIN}\r\n\r\n"
    ).encode()
    clients = []
    try:
        for _ in range(40):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.connect(("127.0.0.1", live.port))
            client.sendall(request)
            clients.append(client)
        grown = settled_rss(live.process.pid, at_least_s=5) - before
    finally:
        for client in clients:
            client.close()
    assert grown / 40 <= 3.5 * 1024 * 1024, f"{grown / 40 / 2**20:.2f} MiB a stream"
