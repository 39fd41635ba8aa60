"""Clients of the web app in tests: `InProcess` (httpx over ASGI, no server) and `LiveServer`
(`session-journal serve` in a process of its own on a free loopback port), with a reader of
Server-Sent Events that keeps each frame's fields as sent."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from session_journal import Store
from session_journal.web import WebSettings, create_app
from tests.asyncapi import LoopThread

ADMIN = "a" * 43
"""A token of every workspace."""
W2_TOKEN = "b" * 43
"""A token bound to workspace w-2."""
TOKENS: dict[str, str | None] = {ADMIN: None, W2_TOKEN: "w-2"}


def bearer(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def serve(store: Store, **settings: Any) -> InProcess:
    """The app on `store` (with `TOKENS` unless `tokens` is given), called in process."""
    settings.setdefault("tokens", TOKENS)
    return InProcess(create_app(store, WebSettings(**settings)))


class InProcess:
    """A client of an ASGI app in this process (httpx's ASGI transport), on a loop thread of
    its own; the app sees the client address 127.0.0.1 and the Host `localhost`."""

    def __init__(self, app: Any, *, client: tuple[str, int] = ("127.0.0.1", 50000)) -> None:
        self._loop = LoopThread()
        transport = httpx.ASGITransport(app=app, client=client)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://localhost")

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._loop.run(self._client.request(method, path, **kwargs))

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def run(self, coroutine: Any) -> Any:
        return self._loop.run(coroutine)

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.close()

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Frame:
    """One Server-Sent Event as sent: its fields (`id`, `event`, `data`, `retry`), or a
    comment (`comment`)."""

    fields: dict[str, str] = field(default_factory=dict)
    comment: str | None = None

    @property
    def event(self) -> str | None:
        return self.fields.get("event")


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    """The frames of an event stream's lines (as `httpx.Response.iter_lines` gives them)."""
    current = Frame()
    for line in lines:
        if line == "":
            if current.fields or current.comment is not None:
                yield current
            current = Frame()
        elif line.startswith(":"):
            current.comment = line[1:].strip()
        else:
            name, _, value = line.partition(":")
            current.fields[name] = value.removeprefix(" ")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveServer:
    """`session-journal serve` on `url`, in a process of its own; `base` is its address, its
    output goes to `log` (stdout and stderr together)."""

    def __init__(
        self,
        url: str,
        directory: Path,
        *extra: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        token_lines: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.log = directory / f"serve-{self.port}-{time.monotonic_ns()}.log"
        arguments = ["--url", url, "serve", "--host", host, "--port", str(self.port), *extra]
        if token_lines is not None:
            tokens = directory / "tokens"
            tokens.write_text(token_lines)
            arguments += ["--token-file", str(tokens)]
        environment = dict(os.environ)
        environment.pop("SESSION_JOURNAL_WEB_TOKEN", None)  # only the one the test gives
        environment.update(env or {})
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "session_journal", *arguments],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        shown = f"[{host}]" if ":" in host else host
        self.base = f"http://{shown}:{self.port}"
        try:
            self._wait_until_serving()
        except BaseException:
            self.close()  # a server that did not start leaves neither its process nor its log
            raise

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.output()}")
            if "serving on" in self.output():
                return
            time.sleep(0.05)
        raise AssertionError(f"serve did not start: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 10) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._out.close()

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class ThreadServer:
    """An app served by uvicorn in a thread of this process on a free loopback port (for the
    settings `serve` does not take: heartbeats, lifetimes, caps)."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.base = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.server.serve(),), daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        try:
            while not self.server.started:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.02)
        except BaseException:
            self.close()  # a server that did not start leaves neither its thread nor its loop
            raise

    def close(self) -> None:
        self.server.handle_exit(signal.SIGTERM, None)  # what uvicorn does on SIGTERM
        self._thread.join(20)
        if not self._thread.is_alive():
            self.loop.close()  # else a ResourceWarning (an unclosed loop) when it is collected

    def __enter__(self) -> ThreadServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fault(message: str = "x") -> str:
    """A stored `session_fault` body."""
    data = {"reason": "startup_failed", "message": message, "command_id": None}
    return json.dumps({"type": "session_fault", "data": data}, separators=(",", ":"))
