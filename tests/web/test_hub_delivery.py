"""Streams without a filter at the window's end are parked with the hub, which writes what
comes next to each of them without a turn of its task: every event once and in order; a client
slow to take its write does not hold up the others, its own task takes the write over and it
gets everything in order once it reads again; it is parked again afterwards. On both backends,
the app called as an ASGI server calls it."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from session_journal import Store
from session_journal.web import WebSettings, create_app, shutdown_streams
from tests.web.client import ADMIN, TOKENS, fault
from tests.web.scenario import controller

_ID = re.compile(rb"^id: (\d+)\nevent: api_event\n", re.MULTILINE)


class Client:
    """One stream's client, as an ASGI server sees it: what it was sent, and a gate its writes
    wait on while closed (a client slow to take them)."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.open = asyncio.Event()
        self.open.set()
        self.gone = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            await self.open.wait()
            self.body += message["body"]

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def seqs(self) -> list[int]:
        return [int(found) for found in _ID.findall(bytes(self.body))]


def request() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/events/stream",
        "raw_path": b"/api/events/stream",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {ADMIN}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }


async def until(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def test_parked_streams_are_written_by_the_hub_and_a_slow_one_holds_up_nobody(
    store: Store,
) -> None:
    served = controller(store)
    base = served.events.latest_seq()
    app = create_app(served, WebSettings(tokens=TOKENS))
    hub = app.state.session_journal_hub

    async def append(count: int) -> list[int]:
        def run() -> list[int]:
            for _ in range(count):
                served.faults.record_startup_fault("s-1", fault())
            return list(range(base + 1, served.events.latest_seq() + 1))

        return await asyncio.to_thread(run)

    async def scenario() -> None:
        fast, slow, other = Client(), Client(), Client()
        tasks = [
            asyncio.create_task(app(request(), client.receive, client.send))
            for client in (fast, slow, other)
        ]
        await until(lambda: len(hub._parked) == 3, "the three streams parked")
        slow.open.clear()  # its next write waits
        first = await append(5)
        await until(lambda: fast.seqs() == first == other.seqs(), "the others have the five")
        assert slow.seqs() == []
        parked = {stream.send for stream in hub._parked}
        assert len(parked) == 2  # the slow one's task took its write over
        everything = await append(5)
        await until(lambda: fast.seqs() == everything == other.seqs(), "the others go on")
        slow.open.set()
        await until(lambda: slow.seqs() == everything, "the slow one has all ten, in order")
        await until(lambda: len(hub._parked) == 3, "parked again")
        for client in (fast, slow, other):
            client.gone.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        await shutdown_streams(app)

    asyncio.run(scenario())
