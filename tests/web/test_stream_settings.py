"""The stream's settings, served by uvicorn in a thread: heartbeats, rotation, the caps (503
over `max_streams` while JSON reads go on, 429 over `max_streams_per_token`), a stalled reader
closed after `send_timeout_s` without delaying the others, the counters of `/api/status`, and
frames whose data is ASCII JSON equal to the page's elements. On both backends."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from session_journal import ApiEventFilter, Store
from session_journal.web import WebSettings, create_app, shutdown_streams
from tests.helpers import append_raw, store_raw_body
from tests.web.client import ADMIN, TOKENS, W2_TOKEN, Frame, ThreadServer, bearer, fault, frames

pytestmark = pytest.mark.slow


def server(store: Store, **settings: Any) -> ThreadServer:
    return ThreadServer(create_app(store, WebSettings(tokens=TOKENS, **settings)))


class Reader:
    """A stream read in a thread: its frames as they come."""

    def __init__(self, base: str, path: str = "/api/events/stream", token: str = ADMIN) -> None:
        self.frames: list[Frame] = []
        self.status: int | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(base + path, token), daemon=True)
        self._thread.start()

    def _read(self, url: str, token: str) -> None:
        try:
            with httpx.stream("GET", url, headers=bearer(token), timeout=30) as response:
                self.status = response.status_code
                for frame in frames(response.iter_lines()):
                    self.frames.append(frame)
        except httpx.TransportError:
            pass
        finally:
            self.ended.set()

    def wait_for(self, kind: str | None, timeout: float = 10) -> Frame:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for frame in self.frames:
                if frame.event == kind and (kind is not None or frame.comment is not None):
                    return frame
            time.sleep(0.02)
        raise AssertionError(f"no {kind} frame: {[f.event for f in self.frames]}")

    def events(self) -> list[Frame]:
        return [frame for frame in self.frames if frame.event == "api_event"]


def status(base: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(base + "/api/status", headers=bearer()).json()
    return answer


def test_heartbeats_and_rotation(served: Store) -> None:
    with server(served, heartbeat_s=1, stream_lifetime_s=2.5) as live:
        reader = Reader(live.base)
        beat = reader.wait_for(None, timeout=3)
        assert beat.comment == "heartbeat"
        rotate = reader.wait_for("rotate", timeout=5)
        assert json.loads(rotate.fields["data"]) == {}
        assert reader.ended.wait(5)
        counters = status(live.base)
        assert counters["closes"]["rotate"] == 1 and counters["heartbeats"] >= 1


def test_caps_answer_503_and_429_while_json_reads_go_on(served: Store) -> None:
    with server(served, max_streams=2, max_streams_per_token=1) as live:
        first = Reader(live.base)
        first.wait_for("ready")
        same_token = httpx.get(live.base + "/api/events/stream", headers=bearer())
        assert (same_token.status_code, same_token.json()["code"]) == (429, "rate_limited")
        assert int(same_token.headers["retry-after"]) >= 1
        second = Reader(live.base, token=W2_TOKEN)
        second.wait_for("ready")
        third = httpx.get(live.base + "/api/events/stream", headers=bearer(W2_TOKEN))
        assert (third.status_code, third.json()["code"]) == (503, "too_many_streams")
        assert int(third.headers["retry-after"]) >= 1
        assert httpx.get(live.base + "/api/events", headers=bearer()).status_code == 200
        assert status(live.base)["streams"] == 2


def test_a_stalled_reader_is_closed_and_the_others_go_on(served: Store) -> None:
    append_raw(served, "s-1", fault("y" * 1000), count=10_000)  # more than socket buffers hold
    with server(served, send_timeout_s=1) as live:
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
        stalled.connect(("127.0.0.1", live.port))
        stalled.sendall(
            b"GET /api/events/stream?after_seq=0 HTTP/1.1\r\nHost: localhost\r\n"
            b"Authorization: Bearer " + ADMIN.encode() + b"\r\n\r\n"
        )  # and never read
        live_one = Reader(live.base)
        live_one.wait_for("ready")
        deadline = time.monotonic() + 15
        while status(live.base)["closes"].get("send_timeout") != 1:
            assert time.monotonic() < deadline, status(live.base)
            served.faults.record_startup_fault("s-2", "meanwhile")
            time.sleep(0.2)
        before = len(live_one.events())
        served.faults.record_startup_fault("s-2", "after")
        deadline = time.monotonic() + 5
        while len(live_one.events()) == before:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        stalled.close()


def test_frames_are_ascii_json_equal_to_the_page(served: Store) -> None:
    served.faults.record_startup_fault("s-1", "naïve ☃ 𝄞 \u2028 line\nbreak\r\ndata: injected")
    with server(served) as live:
        reader = Reader(live.base, "/api/events/stream?after_seq=0")
        deadline = time.monotonic() + 10
        while len(reader.events()) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        page = json.loads(served.events.load_json(after_seq=0))
        for frame, element in zip(reader.events(), page["events"], strict=True):
            assert set(frame.fields) == {"id", "event", "data"}
            assert frame.fields["data"].isascii()
            assert json.loads(frame.fields["data"]) == element
            assert frame.fields["id"] == str(element["seq"])
        # A live event comes once, in its own frame.
        served.faults.record_startup_fault("s-2", "live ✓")
        while len(reader.events()) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert json.loads(reader.events()[3].fields["data"])["event"]["data"]["message"] == "live ✓"
        counters = status(live.base)
        assert counters["streams"] == 1 and counters["lag_max"] == 0


def test_shutdown_streams_says_goodbye_and_refuses_new_ones(served: Store) -> None:
    append_raw(served, "s-1", fault("z" * 1000), count=10_000)  # more than socket buffers hold
    app = create_app(served, WebSettings(tokens=TOKENS))
    with ThreadServer(app) as live:
        reader = Reader(live.base)
        reader.wait_for("ready")
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", live.port))
        stalled.sendall(
            b"GET /api/events/stream?after_seq=0 HTTP/1.1\r\nHost: localhost\r\n"
            b"Authorization: Bearer " + ADMIN.encode() + b"\r\n\r\n"
        )  # and never read: its send blocks
        polls: list[httpx.Response] = []
        poll = threading.Thread(
            target=lambda: polls.append(
                httpx.get(live.base + "/api/events?wait=30", headers=bearer(), timeout=40)
            )
        )
        poll.start()
        deadline = time.monotonic() + 10
        while status(live.base)["streams"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
        # What an embedder's signal handling does, on the server's loop.
        began = time.monotonic()
        asyncio.run_coroutine_threadsafe(shutdown_streams(app), live.loop).result(5)
        assert time.monotonic() - began < 1.5
        assert reader.ended.wait(2)
        assert reader.frames[-1].event == "shutdown"
        poll.join(5)
        [answer] = polls
        assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")
        assert status(live.base)["streams"] == 0  # the stalled one too
        stalled.close()
        again = httpx.get(live.base + "/api/events/stream", headers=bearer())
        assert (again.status_code, again.json()["code"]) == (503, "unavailable")


def test_a_type_filtered_stream_admits_what_load_admits_old_bodies_included(
    served: Store,
) -> None:
    # A stored body of an earlier shape is served as a `legacy_notice` that keeps its stored
    # type; a type filter reads the stored type, in the database and in the app's frames alike.
    start = served.events.latest_seq()
    with server(served) as live:
        reader = Reader(live.base, "/api/events/stream?type=session_fault")
        reader.wait_for("ready")  # from here on, events come from the app's frames
        served.faults.record_startup_fault("s-2", "new shape")
        old = '{"type":"session_fault","data":{"message":"old shape"}}'
        store_raw_body(served, "s-1", old)
        served.faults.record_startup_fault("s-2", "new again")
        wanted = ApiEventFilter(types=("session_fault",))
        expected = [event.seq for event in served.events.load(wanted, after_seq=start).events]
        assert expected == [start + 1, start + 2, start + 3]
        deadline = time.monotonic() + 10
        while len(reader.events()) < 3:
            assert time.monotonic() < deadline, [f.fields for f in reader.events()]
            time.sleep(0.02)
        assert [int(frame.fields["id"]) for frame in reader.events()] == expected
