"""Streams without a filter at the window's end are parked with the hub, which writes what
comes next to each of them without a turn of its task: every event once and in order; a client
slow to take its write does not hold up the others, its own task takes the write over and it
gets everything in order once it reads again; it is parked again afterwards. The hub's one
registration with the loop's `Fanout` ends with its last parked stream, commits or not. On both
backends, the app called as an ASGI server calls it."""

from __future__ import annotations

import asyncio
import contextvars
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


def test_the_hub_s_registration_ends_with_its_last_parked_stream(store: Store) -> None:
    served = controller(store)
    app = create_app(served, WebSettings(tokens=TOKENS))
    hub = app.state.session_journal_hub

    async def scenario() -> None:
        clients = [Client(), Client()]
        tasks = [
            asyncio.create_task(app(request(), client.receive, client.send)) for client in clients
        ]
        await until(lambda: len(hub._parked) == 2, "both parked")
        fanout = hub.fanout
        assert fanout.registered() == 1  # the hub's, for both
        for client in clients:
            client.gone.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        # No commit comes: the delivery ends as its last stream leaves.
        await until(lambda: fanout.registered() == 0, "the hub's registration ended")
        assert hub._delivering is None or hub._delivering.done()
        assert fanout.signal.waiting() == 0
        await shutdown_streams(app)

    asyncio.run(scenario())


REQUEST_ID = contextvars.ContextVar[str]("REQUEST_ID", default="none")


def test_a_host_s_send_wrapper_sees_its_stream_s_context_slow_client_or_not(
    store: Store,
) -> None:
    """The feed mounted behind middleware that sets a context variable per request and one
    per send, reset after the send (as tracing does): each send, the hub's included, sees its
    own request's value, and the slow client's stream goes on once the client reads."""
    served = controller(store)
    inner = create_app(served, WebSettings(tokens=TOKENS))
    hub = inner.state.session_journal_hub
    seen: list[tuple[str, str]] = []
    sending = contextvars.ContextVar[str]("sending", default="no")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        REQUEST_ID.set(scope["client"][0])

        async def wrapped(message: dict[str, Any]) -> None:
            token = sending.set("yes")
            try:
                seen.append((REQUEST_ID.get(), scope["client"][0]))
                await send(message)
            finally:
                sending.reset(token)  # raises ValueError in another context

        await inner(scope, receive, wrapped)

    async def scenario() -> None:
        slow, fast = Client(), Client()
        tasks = [
            asyncio.create_task(app({**request(), "client": (name, 1)}, c.receive, c.send))
            for name, c in (("slow", slow), ("fast", fast))
        ]
        await until(lambda: len(hub._parked) == 2, "both parked")
        slow.open.clear()
        first = await asyncio.to_thread(served.faults.record_startup_fault, "s-1", fault())
        assert first
        await until(lambda: len(fast.seqs()) == 1, "the fast one has it")
        slow.open.set()
        await until(lambda: slow.seqs() == fast.seqs(), "the slow one has it")
        await until(lambda: len(hub._parked) == 2, "both parked again")
        assert not any(task.done() for task in tasks)
        assert seen and all(request_id == client for request_id, client in seen)
        for client in (slow, fast):
            client.gone.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        await shutdown_streams(inner)

    asyncio.run(scenario())
