"""The seam where the hub writes to a stream without a turn of the stream's own task: an ASGI
`send` begun at once, in the caller's step of the event loop.

A thousand streams at the frontier take the same write at each wake-up. Waking each stream's
task to make it costs a future, a callback, a task step and a pass of the stream's loop per
stream; the write itself, an ASGI server's `send` of a body, almost never waits (it waits only
while the client is slow to take what it was sent: the transport's buffer is full). So the hub
runs the `send` awaitable's first step itself, with the awaitable protocol (`__await__`,
`send`, `throw`, `close`): done there, nothing else runs; waiting, the rest of the same
awaitable goes to a task of its own (`_Rest`) that resumes it exactly where it stopped, on the
future it waits on, and the stream's task awaits that task before it writes again.

Both parts run in the stream's context (`contextvars`: a copy taken in the stream's task as it
starts), so a `send` wrapper that sets a context variable and resets it afterwards works as
when the stream's task sends. The limit: during the first step `asyncio.current_task()` is the
hub's task, not the stream's (Python 3.12's eager tasks would fix that, at the cost of a task
per write; the package supports 3.11). A host app mounting the feed behind middleware that
ties a `send` to its task (an `asyncio.timeout` around it, say) should wrap the whole app's
call instead.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Generator
from typing import Any


def send_now(
    send_awaitable: Awaitable[None], context: contextvars.Context
) -> asyncio.Task[None] | None:
    """Run `send_awaitable` (an ASGI `send(message)` not yet awaited) in the caller's step of
    the loop, in `context`: `None` when it completed there; else a task, in `context`, that
    completes it (its error, if it fails, is the task's; cancelled before it ran, the awaitable
    is closed). An error of the first step is raised here."""
    steps = send_awaitable.__await__()
    try:
        waits_on = context.run(steps.send, None)
    except StopIteration:
        return None
    task = asyncio.get_running_loop().create_task(_Rest(steps, waits_on).run(), context=context)
    task.add_done_callback(lambda _: steps.close())  # a no-op unless it never ran
    return task


class _Rest:
    """The rest of an awaitable whose first step ran already and yielded `waits_on` (what it
    waits on: a future, as a task expects of a step, or `None` to be run again at once)."""

    def __init__(self, steps: Generator[Any, Any, None], waits_on: Any) -> None:
        self._steps = steps
        self._waits_on = waits_on

    async def run(self) -> None:
        """The rest, awaited by the task that runs it."""
        await self

    def __await__(self) -> Generator[Any, Any, None]:
        steps, waits_on = self._steps, self._waits_on
        self._waits_on = None  # the task holds it now
        while True:
            try:
                sent = yield waits_on
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as error:  # cancelled, say: the awaitable is told
                try:
                    waits_on = steps.throw(error)
                except StopIteration:
                    return
                continue
            try:
                waits_on = steps.send(sent)
            except StopIteration:
                return
