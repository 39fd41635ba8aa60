"""Errors as `application/problem+json` (RFC 9457) with a stable `code`, and the headers every
response carries."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

NO_STORE = (b"cache-control", b"no-store")
"""On every response: nothing the API answers may be cached (it is a moment of the log)."""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
"""The operator page's policy (on every response): its own scripts, styles, images and
requests only, no framing, and no string may reach a script sink (Trusted Types with no
policy: `innerHTML` and the like throw)."""
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
"""On every response, beside `Cache-Control: no-store`."""

TITLES = {
    "bad_request": (400, "A parameter is malformed or out of bounds"),
    "unauthorized": (401, "A valid token is required"),
    "host_not_allowed": (403, "The Host header names no allowed host"),
    "origin_not_allowed": (403, "Requests from this origin are not allowed"),
    "not_found": (404, "No such resource"),
    "method_not_allowed": (405, "The route does not take this method"),
    "cursor_ahead": (409, "The cursor is above the frontier of this log"),
    "cursor_expired": (410, "Events after the cursor were pruned"),
    "uri_too_long": (414, "The URL is longer than 8 KiB"),
    "rate_limited": (429, "Too many requests; retry later"),
    "internal": (500, "The server failed"),
    "unavailable": (503, "The store is unavailable; retry later"),
    "too_many_streams": (503, "Too many streams are open; retry later"),
}
"""Every `code` the API answers with, its status and title."""


class Problem(Exception):
    """An error response: `code` (a key of `TITLES`), a `detail` for people, extra members of
    the body (`extra`) and extra headers."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        extra: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.status, self.title = TITLES[code]
        self.detail = detail
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self) -> bytes:
        """The problem document: `type`, `title`, `status`, `detail`, `code` and the extras."""
        document: dict[str, object] = {
            "type": "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
            **self.extra,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    def raw_headers(self, body: bytes) -> list[tuple[bytes, bytes]]:
        """The response's headers, for a raw ASGI response."""
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            NO_STORE,
        ]
        headers += [(name.lower().encode(), value.encode()) for name, value in self.headers.items()]
        return headers

    async def send(self, send: Send) -> None:
        """Answer with this problem on a raw ASGI `send` (before any response started)."""
        body = self.body()
        await send(
            {
                "type": "http.response.start",
                "status": self.status,
                "headers": self.raw_headers(body),
            }
        )
        await send({"type": "http.response.body", "body": body})


def bad_request(parameter: str, detail: str) -> Problem:
    """400 naming the parameter."""
    return Problem("bad_request", f"{parameter}: {detail}", extra={"parameter": parameter})


def not_found(what: str) -> Problem:
    """404 (also for what another workspace holds: its existence is not told)."""
    return Problem("not_found", f"{what} not found")
