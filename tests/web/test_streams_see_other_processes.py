"""A stream reading through the streams' window learns of another process's prune or delete
before its next write, though nothing told the server of it (the store's source of other
processes' commits is stopped: a notification not yet delivered): below the new floor it gets
`expired`, and no event of a deleted session follows the write in flight at the change. On both
backends, the app called as an ASGI server calls it."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from session_journal import SessionRecord, Store
from session_journal.web import WebSettings, create_app, shutdown_streams
from tests.web.client import TOKENS, fault
from tests.web.scenario import controller
from tests.web.test_hub_delivery import Client, request, until

_EVENT = re.compile(rb"^id: (\d+)\nevent: api_event\ndata: (.*)$", re.MULTILINE)


class HeldClient(Client):
    """A client whose first write with an event above `hold_above` waits until `open` is set
    (what it holds is in `held`): the stream is between two reads of the window then."""

    def __init__(self, hold_above: int) -> None:
        super().__init__()
        self.hold_above = hold_above
        self.held = b""
        self.holding = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        if (
            message["type"] == "http.response.body"
            and not self.holding.is_set()
            and any(int(seq) > self.hold_above for seq, _ in _EVENT.findall(body))
        ):
            self.held = body
            self.open.clear()
            self.holding.set()
        await super().send(message)

    def sessions(self, body: bytes | None = None) -> list[str]:
        text = bytes(self.body) if body is None else body
        return [json.loads(data)["session_id"] for _, data in _EVENT.findall(text)]


@pytest.mark.parametrize("what", ["prune", "delete"])
def test_a_stream_reading_through_the_window_learns_of_another_process_before_its_next_write(
    store: Store, migrated_url: str, what: str
) -> None:
    served = controller(store)
    for session_id in ("s-kept", "s-gone"):
        served.sessions.save(SessionRecord(id=session_id, project_id="p"))
    base = served.events.latest_seq()
    # 800 events of 2 kB, all in the window: the stream's first read (of the database) takes
    # about 1 MB, the rest comes from the window, about 30 events a write.
    for n in range(400):
        served.faults.record_startup_fault("s-kept", fault(f"kept {n} " + "k" * 2_000))
        served.faults.record_startup_fault("s-gone", fault(f"gone {n} " + "g" * 2_000))
    latest = served.events.latest_seq()
    app = create_app(served, WebSettings(tokens=TOKENS))
    asked = request()
    asked["query_string"] = f"after_seq={base}".encode()

    async def scenario() -> None:
        # Nothing tells the server of what other processes commit (its source stops before
        # the stream opens: stopping wakes followers once).
        served.following.watched_signal()
        source = served.following.source
        assert source is not None
        source.stop()
        client = HeldClient(hold_above=base + 600)
        task = asyncio.create_task(app(asked, client.receive, client.send))
        await asyncio.wait_for(client.holding.wait(), 20)

        def change() -> None:
            with Store.open(migrated_url) as other:
                if what == "prune":
                    other.events.prune(through_seq=latest)
                else:
                    assert other.sessions.delete("s-gone")

        await asyncio.to_thread(change)
        client.open.set()
        if what == "prune":
            await asyncio.wait_for(task, 20)  # the server ended the stream
            body = bytes(client.body)
            assert body.rstrip().split(b"\n\n")[-1].startswith(b"event: expired\n")
            seqs = [int(seq) for seq, _ in _EVENT.findall(body)]
            assert seqs == list(range(base + 1, base + 1 + len(seqs)))
            assert client.held in body
            assert seqs[-1] == int(_EVENT.findall(client.held)[-1][0])  # nothing read after
        else:
            await until(lambda: client.seqs()[-1:] == [latest - 1], "the stream is at the end")
            before = bytes(client.body).index(client.held) + len(client.held)
            after = client.sessions(bytes(client.body)[before:])
            assert after and set(after) == {"s-kept"}
            assert client.seqs() == sorted(set(client.seqs()))  # in order, none twice
            client.gone.set()
            await asyncio.wait_for(task, 10)
        await shutdown_streams(app)

    asyncio.run(scenario())


def test_a_stream_the_hub_wrote_to_learns_of_another_process_before_its_own_next_write(
    store: Store, migrated_url: str
) -> None:
    # A stream parked at the window's end: a commit of this process (100 events of 2 kB, more
    # than a write) wakes the hub, which reads the window and writes the first part to it;
    # the client is slow to take it, so the stream's task goes on with the rest. Meanwhile
    # another process deletes a session and nothing tells the server: the stream's own next
    # read checks the window first, as the hub's read for it counts as its read.
    served = controller(store)
    for session_id in ("s-kept", "s-gone"):
        served.sessions.save(SessionRecord(id=session_id, project_id="p"))
    base = served.events.latest_seq()
    app = create_app(served, WebSettings(tokens=TOKENS))
    hub = app.state.session_journal_hub

    async def scenario() -> None:
        served.following.watched_signal()
        source = served.following.source
        assert source is not None
        source.stop()
        client = HeldClient(hold_above=base)
        task = asyncio.create_task(app(request(), client.receive, client.send))
        await until(lambda: len(hub._parked) == 1, "the stream parked")

        def append() -> None:
            with served.unit_of_work() as uow:
                for n in range(50):
                    uow.events.append("s-kept", 1, fault(f"kept {n} " + "k" * 2_000))
                    uow.events.append("s-gone", 1, fault(f"gone {n} " + "g" * 2_000))
                uow.commit()

        await asyncio.to_thread(append)
        await asyncio.wait_for(client.holding.wait(), 20)  # the hub's write, held
        assert len(hub._parked) == 0  # the stream's task took over

        def delete() -> None:
            with Store.open(migrated_url) as other:
                assert other.sessions.delete("s-gone")

        await asyncio.to_thread(delete)
        client.open.set()
        latest = base + 100
        kept_last = latest - 1
        await until(lambda: client.seqs()[-1:] == [kept_last], "the stream is at the end")
        before = bytes(client.body).index(client.held) + len(client.held)
        after = client.sessions(bytes(client.body)[before:])
        assert after and set(after) == {"s-kept"}
        assert client.seqs() == sorted(set(client.seqs()))
        client.gone.set()
        await asyncio.wait_for(task, 10)
        await shutdown_streams(app)

    asyncio.run(scenario())
