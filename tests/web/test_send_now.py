"""The seam where the hub writes to a stream without a turn of the stream's task (`send_now`):
a send that does not wait is over when the call returns; one that waits goes on in a task of
its own, from where it stopped, its result, error or cancellation its own; both parts run in
the stream's context."""

from __future__ import annotations

import asyncio
import contextvars

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


def started_waiting(transport: Transport, fail: bool = False) -> asyncio.Task[None]:
    """`send_now` of a write of `b"a"` while the client takes nothing: the task of its rest."""
    transport.writable.clear()
    rest = send_now(transport.send(b"a", fail), contextvars.copy_context())
    assert rest is not None
    return rest


def test_a_send_that_does_not_wait_is_over_when_the_call_returns() -> None:
    async def scenario() -> None:
        transport = Transport()
        transport.writable.set()

        async def immediate(body: bytes) -> None:
            transport.written.append(body)

        assert send_now(immediate(b"a"), contextvars.copy_context()) is None
        assert transport.written == [b"a"]

    asyncio.run(scenario())


def test_a_send_that_waits_goes_on_in_a_task_from_where_it_stopped() -> None:
    async def scenario() -> None:
        transport = Transport()
        rest = started_waiting(transport)
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
        rest = started_waiting(transport, fail=True)
        transport.writable.set()
        with pytest.raises(OSError, match="went away"):
            await rest

        async def broken(body: bytes) -> None:
            raise OSError(body.decode())

        with pytest.raises(OSError, match="first"):
            send_now(broken(b"first"), contextvars.copy_context())

    asyncio.run(scenario())


def test_a_send_cancelled_while_it_waits_is_told() -> None:
    async def scenario() -> None:
        transport = Transport()
        rest = started_waiting(transport)
        await asyncio.sleep(0)
        rest.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rest
        assert transport.steps == ["begin a", "end a"] and transport.written == []

    asyncio.run(scenario())


def test_a_send_cancelled_before_it_ran_again_is_closed() -> None:
    async def scenario() -> None:
        transport = Transport()
        rest = started_waiting(transport)
        rest.cancel()  # before the task's first step
        with pytest.raises(asyncio.CancelledError):
            await rest
        assert transport.steps == ["begin a", "end a"] and transport.written == []

    asyncio.run(scenario())


SENDER = contextvars.ContextVar[str]("SENDER", default="nobody")


def test_both_parts_run_in_the_context_given() -> None:
    """A send wrapper that sets a context variable and resets it afterwards (as tracing
    middleware does) sees its own value in both parts, and the caller's context is left as it
    was."""

    async def scenario() -> None:
        transport = Transport()
        seen: list[str] = []

        async def wrapper(body: bytes) -> None:
            seen.append(SENDER.get())
            token = SENDER.set("the wrapper")
            try:
                await transport.send(body)
                seen.append(SENDER.get())
            finally:
                SENDER.reset(token)  # raises in another context

        async def stream() -> contextvars.Context:
            SENDER.set("the stream")
            return contextvars.copy_context()

        context = await asyncio.get_running_loop().create_task(stream())
        transport.writable.clear()
        rest = send_now(wrapper(b"a"), context)
        assert rest is not None
        transport.writable.set()
        await rest
        assert seen == ["the stream", "the wrapper"]
        assert context[SENDER] == "the stream" and SENDER.get() == "nobody"
        assert transport.written == [b"a"]

    asyncio.run(scenario())
