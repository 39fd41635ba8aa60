"""The seam where the hub writes to a stream without a turn of the stream's task (`send_now`):
a send that does not wait is over when the call returns; one that waits goes on in a task of
its own, from where it stopped, its result, error or cancellation its own."""

from __future__ import annotations

import asyncio

import pytest

from session_journal.web._eager import send_now


class Transport:
    """An ASGI `send` whose writes wait while `paused` is set (a client slow to take them)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.steps: list[str] = []
        self.writable = asyncio.Event()
        self.writable.set()

    async def send(self, body: bytes, fail: bool = False) -> None:
        self.steps.append(f"begin {body.decode()}")
        try:
            await self.writable.wait()
            await asyncio.sleep(0)  # a second step after the wait
            if fail:
                raise OSError("the client went away")
            self.written.append(body)
        finally:
            self.steps.append(f"end {body.decode()}")


def test_a_send_that_does_not_wait_is_over_when_the_call_returns() -> None:
    async def scenario() -> None:
        transport = Transport()
        transport.writable.set()

        async def immediate(body: bytes) -> None:
            transport.written.append(body)

        assert send_now(immediate(b"a")) is None
        assert transport.written == [b"a"]

    asyncio.run(scenario())


def test_a_send_that_waits_goes_on_in_a_task_from_where_it_stopped() -> None:
    async def scenario() -> None:
        transport = Transport()
        transport.writable.clear()
        rest = send_now(transport.send(b"a"))
        assert rest is not None
        assert transport.steps == ["begin a"]  # its first step ran in the caller's
        await asyncio.sleep(0.01)
        assert not rest.done() and transport.written == []
        transport.writable.set()
        assert await rest is None
        assert transport.written == [b"a"] and transport.steps == ["begin a", "end a"]

    asyncio.run(scenario())


def test_the_error_of_a_send_is_its_task_s_or_the_caller_s() -> None:
    async def scenario() -> None:
        transport = Transport()
        transport.writable.clear()
        rest = send_now(transport.send(b"a", fail=True))
        assert rest is not None
        transport.writable.set()
        with pytest.raises(OSError, match="went away"):
            await rest

        async def broken(body: bytes) -> None:
            raise OSError(body.decode())

        with pytest.raises(OSError, match="first"):
            send_now(broken(b"first"))

    asyncio.run(scenario())


def test_a_send_cancelled_while_it_waits_is_told() -> None:
    async def scenario() -> None:
        transport = Transport()
        transport.writable.clear()
        rest = send_now(transport.send(b"a"))
        assert rest is not None
        await asyncio.sleep(0)
        rest.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rest
        assert transport.steps == ["begin a", "end a"] and transport.written == []

    asyncio.run(scenario())
