"""`session_journal.web.run`, an application's entry point: a FastAPI application mounting two
feeds (one nested two mounts deep) with a stream open on each stops on SIGTERM or SIGINT within
3 s, both streams told `event: shutdown`, and `run` returns (the code after it runs); an
application that mounts no feed, and calls it cannot serve, are refused before serving. On
both backends."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Host, Mount, Router

from session_journal import InvalidRecord, Store
from session_journal.web import WebSettings, create_app, run, shutdown_streams
from session_journal.web._app import feeds_of
from tests.web.client import ADMIN, frames, free_port

APPLICATION = """
import sys

from fastapi import FastAPI
from starlette.routing import Mount, Router

from session_journal import Store
from session_journal.web import WebSettings, create_app, run

store = Store.open(sys.argv[1])
settings = WebSettings(tokens={{"{token}": None}})
app = FastAPI()
app.mount("/journal", create_app(store, settings))
app.mount("/team", Router(routes=[Mount("/feed", app=create_app(store, settings))]))
run(app, host="127.0.0.1", port={port}, log_level="warning"{options})
store.close()
print("run returned; the store closed", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "stop",
    [signal.SIGTERM, signal.SIGINT, None],
    ids=["SIGTERM", "SIGINT", "uvicorn's limit_max_requests"],
)
def test_an_application_mounting_feeds_stops_within_3_s_every_stream_told(
    migrated_url: str, tmp_path: Path, stop: signal.Signals | None
) -> None:
    """However uvicorn is asked to stop (`None`: it stops itself once one request has been
    answered, a `/healthz` after the streams opened), the streams are told first."""
    port = free_port()
    script = tmp_path / "application.py"
    options = ", limit_max_requests=1" if stop is None else ""
    source = APPLICATION.format(token=ADMIN, port=port, options=options)
    script.write_text(textwrap.dedent(source))
    process = subprocess.Popen(
        [sys.executable, str(script), migrated_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    received: dict[str, list[str | None]] = {"/journal": [], "/team/feed": []}
    ready = threading.Barrier(3, timeout=30)

    def follow(prefix: str) -> None:
        url = f"http://127.0.0.1:{port}{prefix}/api/events/stream"
        deadline = time.monotonic() + 30
        while True:  # until it listens
            try:
                with httpx.stream("GET", url, headers={"Authorization": f"Bearer {ADMIN}"}) as r:
                    for frame in frames(r.iter_lines()):
                        received[prefix].append(frame.event)
                        if frame.event == "ready":
                            ready.wait()
                return
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    followers = [threading.Thread(target=follow, args=(prefix,)) for prefix in received]
    try:
        for follower in followers:
            follower.start()
        ready.wait()
        stopped = time.monotonic()
        if stop is None:
            httpx.get(f"http://127.0.0.1:{port}/journal/healthz").raise_for_status()
        else:
            process.send_signal(stop)
        output, _ = process.communicate(timeout=10)
        elapsed = time.monotonic() - stopped
        for follower in followers:
            follower.join(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    assert (process.returncode, output.splitlines()[-1:]) == (
        0,
        ["run returned; the store closed"],
    ), output
    assert elapsed < 3, output
    assert received == {
        "/journal": [None, "ready", "shutdown"],  # `retry:` first, a frame without an event
        "/team/feed": [None, "ready", "shutdown"],
    }


def feed(store: Store) -> Starlette:
    return create_app(store, WebSettings(tokens={ADMIN: None}))


def test_feeds_are_found_where_they_are_mounted(writer: Store) -> None:
    first, second, third = feed(writer), feed(writer), feed(writer)
    host = Starlette(
        routes=[
            Mount("/a", app=first),
            Mount("/b", routes=[Mount("/c", app=Router(routes=[Mount("/d", app=second)]))]),
            Host("journal.internal", app=third),
            Mount("/again", app=first),
        ]
    )
    assert feeds_of(host) == [first, third, second]  # by depth, each once
    assert feeds_of(first) == [first]
    assert feeds_of(Starlette()) == []
    for app in (first, second, third):
        asyncio.run(_shut(app))


async def _shut(app: Any) -> None:
    await shutdown_streams(app)


def refused(app: Any, **options: Any) -> str:
    with pytest.raises(InvalidRecord) as refusal:
        run(app, port=free_port(), **options)
    return str(refusal.value)


def test_calls_that_cannot_serve_are_refused_before_serving(writer: Store) -> None:
    app = feed(writer)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        assert refused(Starlette()) == (
            "run: app neither is nor mounts an app made by session_journal.web.create_app"
        )
        assert refused(app, reload=True) == "run: reload is not an option of run"
        assert refused(app, workers=2) == "run: workers is not an option of run"
        assert refused(app, colour="yes").startswith("run: TypeError: ")  # not Config's
        assert refused(app, uds="/tmp/x.sock") == "run: uds is not an option of run"
        assert refused(app, log_level="loud").startswith("run: KeyError: ")
        assert refused(app, ssl_certfile="/no/such.pem", ssl_keyfile="/no/such.key").startswith(
            "run: FileNotFoundError: "
        )
        assert refused(app, timeout_graceful_shutdown="soon") == (
            "run: timeout_graceful_shutdown must be seconds, got 'soon'"
        )
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(InvalidRecord) as in_use:
                run(app, port=port)
        assert str(in_use.value) == (
            f"serve cannot listen on 127.0.0.1:{port}: address already in use"
        )

        async def inside_a_loop() -> str:
            return refused(app)

        assert asyncio.run(inside_a_loop()) == (
            "run: called inside an event loop; it runs one of its own"
        )
        answers: list[str] = []
        thread = threading.Thread(target=lambda: answers.append(refused(app)))
        thread.start()
        thread.join()
        assert answers == ["run: call it from the main thread (it handles SIGTERM and SIGINT)"]
    finally:
        asyncio.run(_shut(app))
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
    assert refused(app) == "run: a feed of app was shut down already (shutdown_streams)"
