"""`shutdown_streams` of an app made on a sync `Store` and mounted in a host app (which runs no
lifespan of the feed's) closes the async view the app made: no thread of it is left, the
requests in flight answer normally or 503 `unavailable`, every later request that needs the
store answers 503 `unavailable`, and the caller's `Store` stays open. On both backends."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Mount

from session_journal import Store
from session_journal.web import WebSettings, create_app, shutdown_streams
from tests.web.client import ADMIN, TOKENS, W2_TOKEN, bearer
from tests.web.scenario import controller

WORKER = "session-journal async"
"""The name prefix of an async store's threads."""
AFTER = [
    ("/api/events?after_seq=0", ADMIN),
    ("/api/events?after_seq=0&wait=5", ADMIN),
    ("/api/events?before_seq=3", ADMIN),
    ("/api/events/stream", ADMIN),
    ("/api/events/stream?session_id=s-2", W2_TOKEN),
    ("/api/sessions", ADMIN),
    ("/api/sessions/s-1", ADMIN),
    ("/api/sessions/s-1/state", ADMIN),
    ("/api/sessions/s-1/transcript", ADMIN),
    ("/api/sessions/s-1/questions", ADMIN),
    ("/api/search?q=deploy", ADMIN),
    ("/api/search?q=deploy&session_id=s-2", W2_TOKEN),
]
"""The routes that need the store, asked after `shutdown_streams`."""


def workers(before: set[threading.Thread]) -> list[str]:
    """The names of the async stores' worker threads alive now that were not at `before` (the
    suite's other tests may hold stores of their own)."""
    return sorted(
        t.name for t in threading.enumerate() if t.name.startswith(WORKER) and t not in before
    )


def new_threads(before: set[threading.Thread]) -> list[str]:
    """The names of the threads alive now that were not alive at `before`."""
    return sorted(t.name for t in threading.enumerate() if t not in before)


def answer(response: httpx.Response) -> tuple[int, str | None]:
    """The status and, for a problem document, its `code`."""
    if response.headers["content-type"] == "application/problem+json":
        code: str = response.json()["code"]
        return response.status_code, code
    return response.status_code, None


def test_shutdown_streams_closes_the_view_it_made_and_later_requests_answer_503(
    migrated_url: str,
) -> None:
    before = set(threading.enumerate())
    with Store.open(migrated_url) as store:
        controller(store)

        async def main() -> dict[str, Any]:
            feed = create_app(store, WebSettings(tokens=TOKENS))
            host = Starlette(routes=[Mount("/journal", app=feed)])  # the feed's lifespan: never
            transport = httpx.ASGITransport(app=host, client=("127.0.0.1", 50000))
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:

                async def get(path: str, token: str = ADMIN) -> tuple[int, str | None]:
                    return answer(await c.get("/journal" + path, headers=bearer(token)))

                served = [
                    await get(path)
                    for path in ("/api/events?after_seq=0", "/api/sessions", "/api/sessions/s-1")
                ]
                serving = len(workers(before)) > 0
                hub = feed.state.session_journal_hub
                poll = asyncio.create_task(get("/api/events?wait=30"))
                async with asyncio.timeout(10):
                    while not hub.polls:
                        await asyncio.sleep(0.001)
                in_flight = [
                    asyncio.create_task(get(path))
                    for path in ("/api/sessions", "/api/events?after_seq=0") * 10
                ]
                await asyncio.sleep(0)  # handed to the app: some reach a worker
                await shutdown_streams(feed)
                left = workers(before)
                flying = set(await asyncio.gather(*in_flight))
                after = {path: await get(path, token) for path, token in AFTER}
                outside = [await get("/api/status"), answer(await c.get("/journal/healthz"))]
                return {
                    "served": served,
                    "serving": serving,
                    "left": left,
                    "poll": await poll,
                    "flying": flying,
                    "after": after,
                    "outside": outside,
                }

        outcome = asyncio.run(main())
        # The caller's store is still open.
        assert store.events.load(after_seq=0).latest_seq == 2
    # In flight at the shutdown: the normal answer or 503, never 500.
    assert outcome.pop("flying") <= {(200, None), (503, "unavailable")}
    assert outcome == {
        "served": [(200, None)] * 3,
        "serving": True,
        "left": [],
        "poll": (503, "unavailable"),
        "after": {path: (503, "unavailable") for path, _ in AFTER},
        "outside": [(200, None), (200, None)],
    }
    assert new_threads(before) == []
