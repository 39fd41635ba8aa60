"""The checks every request passes before a route sees it, in the package's own code (pure
ASGI, around the whole app): the URL's length, `Host` (DNS rebinding; Starlette's
TrustedHostMiddleware mis-parses `[::1]:port`), `Origin`, the token (header or cookie, compared
in constant time, never from the URL), the failed-authentication limit, CORS, and
`Cache-Control: no-store` and the security headers (`Content-Security-Policy`,
`X-Content-Type-Options`, `Referrer-Policy`) on every answer."""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
import time
from collections import Counter, deque
from dataclasses import dataclass
from urllib.parse import parse_qsl

from ._problems import NO_STORE, SECURITY_HEADERS, Message, Problem, Receive, Scope, Send
from ._settings import WebSettings

MAX_URL_BYTES = 8192
"""The longest path and query string a request may have (414 above)."""
COOKIE = "session_journal_token"
"""The name of the cookie `POST /api/session` sets for the operator page, before the port and
the mount path the browser addresses (`cookie_name`)."""
FAILED_AUTH_LIMIT = 10
"""Failed authentications (a wrong token presented) one client address may make per
`FAILED_AUTH_WINDOW_S`; 429 after. A request without any token is refused but not counted."""
FAILED_AUTH_WINDOW_S = 60.0
_MAX_TRACKED_ADDRESSES = 10_000
_QUERY_TOKENS = frozenset({"token", "access_token", "session_journal_token", "authorization"})
_PORT = re.compile(r":[0-9]{1,5}")
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9-]")  # written .XX in a cookie's name
PUBLIC_PATHS = frozenset({"/healthz", "/", "/favicon.ico"})
"""Paths served without a token (no data): the health check, the operator page (which asks for
the token itself) and the icon browsers ask for unbidden (404: it must not count as a failed
authentication)."""
PUBLIC_PREFIX = "/page/"
"""The operator page's files (no data), served without a token."""
SESSION_PATH = "/api/session"
"""The route that exchanges the bearer token for the cookie (the header only)."""
METRICS_PATH = "/metrics"
"""Prometheus's route: with `WebSettings.metrics_open_on_loopback`, open without a token to
clients on a loopback address."""


@dataclass(frozen=True)
class Principal:
    """Who made a request: `key` (a digest of the token, or the client address when the
    server has no tokens; the per-token stream cap counts by it), the workspace the token is
    bound to (`None`: every workspace), and how it authenticated."""

    key: str
    workspace: str | None
    by_cookie: bool = False


def cookie_name(scope: Scope, port: str | None) -> str:
    """The cookie of a request whose `Host` names `port` (`None`: the scheme's default):
    `session_journal_token_PORT`, then `_SEGMENT` for each segment of the mount path
    (`root_path`), its characters but `[A-Za-z0-9-]` written `.XX` (hex of their UTF-8 bytes):
    `/journal` on port 8765 is `session_journal_token_8765_journal`. Cookies ignore ports: two
    servers on one host (two `serve`s, two SSH tunnels, two apps under two mounts) would
    otherwise overwrite each other's cookie, and each would present the other's token as a
    failed authentication. Made from what the browser addresses, never from the tokens: the
    same after a restart and on every worker and replica (`WebSettings.cookie_name` sets it
    instead, behind a proxy that rewrites `Host`)."""
    if port is None:
        port = _DEFAULT_PORTS.get(scope.get("scheme", "http"), "80")
    root: str = scope.get("root_path", "")
    return f"{COOKIE}_{port}{_mount_suffix(root)}" if root else f"{COOKIE}_{port}"


@functools.lru_cache(maxsize=64)
def _mount_suffix(root_path: str) -> str:
    """`_SEGMENT` for each segment of a mount path, as `cookie_name` writes them (a mount path
    is the server's, not the client's: few of them)."""
    segments = root_path.strip("/").split("/") if root_path.strip("/") else []
    return "".join(f"_{_NAME_UNSAFE.sub(_escape, segment)}" for segment in segments)


def _escape(match: re.Match[str]) -> str:
    return "".join(f".{byte:02X}" for byte in match[0].encode("utf-8", "surrogatepass"))


def app_path(scope: Scope) -> str:
    """The request's path inside this app: under a mount (`Mount("/journal", app)`), without
    the mount's prefix (`root_path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def split_host(value: str) -> tuple[str, str | None] | None:
    """`(name, port)` of a `Host` header or an origin's authority, the name lowercased (an IPv6
    address keeps its brackets); `None` when it is not of that form."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if not name or (rest and not _PORT.fullmatch(rest)):
        return None
    return name, rest[1:] or None


class FailedAuthentications:
    """Failed authentications per client address in the last minute (bounded memory)."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}
        self.refused = 0
        """Requests refused for a missing or wrong token (for `/api/status`)."""

    def retry_after(self, address: str, now: float) -> int | None:
        """Seconds to wait when `address` is over the limit, else `None`."""
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - FAILED_AUTH_WINDOW_S:
            failures.popleft()
        if len(failures) < FAILED_AUTH_LIMIT:
            return None
        return max(1, int(failures[0] + FAILED_AUTH_WINDOW_S - now + 1))

    def failed(self, address: str, now: float, *, guessed: bool = True) -> None:
        """Count a refusal of `address`; toward its limit only when it presented a token
        (`guessed`): a request with none guesses nothing (a signed-out page, a browser's own
        requests), and must not lock out the clients that share its address."""
        self.refused += 1
        if not guessed:
            return
        if address not in self._failures and len(self._failures) >= _MAX_TRACKED_ADDRESSES:
            self._forget(now)
        self._failures.setdefault(address, deque(maxlen=FAILED_AUTH_LIMIT)).append(now)

    def _forget(self, now: float) -> None:
        stale = [
            a for a, f in self._failures.items() if not f or f[-1] <= now - FAILED_AUTH_WINDOW_S
        ]
        for address in stale:
            del self._failures[address]
        if len(self._failures) >= _MAX_TRACKED_ADDRESSES:  # all recent: forget the oldest half
            oldest = sorted(self._failures, key=lambda a: self._failures[a][-1])
            for address in oldest[: len(oldest) // 2]:
                del self._failures[address]


class Guard:
    """The ASGI middleware of the checks (see the module docstring)."""

    def __init__(
        self,
        app: object,
        settings: WebSettings,
        failures: FailedAuthentications,
        answers: Counter[int] | None = None,
    ) -> None:
        """`answers`: the app's count of responses by status (`/metrics`), added to here."""
        self.app = app
        self.failures = failures
        self.answers: Counter[int] = Counter() if answers is None else answers
        self._cookie = settings.cookie_name  # else `cookie_name` of each request
        # The app's own copies of the settings, as compared.
        self._tokens = [(token.encode(), workspace) for token, workspace in settings.tokens.items()]
        self._hosts = frozenset(host.lower() for host in settings.allowed_hosts)
        self._origins = frozenset(origin.lower() for origin in settings.cors_origins)
        self._open_metrics = settings.metrics_open_on_loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # type: ignore[operator]
            return
        origin_headers: list[tuple[bytes, bytes]] = []  # filled as soon as Origin is judged
        try:
            self._check(scope, origin_headers)
        except Problem as problem:
            await problem.send(_with_headers(send, origin_headers, self.answers, []))
            return
        if scope["method"] == "OPTIONS" and any(
            name == b"access-control-allow-origin" for name, _ in origin_headers
        ):
            self.answers[204] += 1
            await _preflight(send, origin_headers)
            return
        started: list[int] = []  # the status, once the response started
        try:
            await self.app(
                scope, receive, _with_headers(send, origin_headers, self.answers, started)
            )  # type: ignore[operator]
        except Exception:  # answered 500 by the server's error middleware, outside this one
            if not started:
                self.answers[500] += 1
            raise

    def _check(self, scope: Scope, cors: list[tuple[bytes, bytes]]) -> None:
        """Every check of the request, in order, filling `cors` with the CORS headers its
        answer carries (an error's too, once the origin is judged). Raises the `Problem` of
        the first that fails."""
        if len(scope.get("raw_path") or b"") + len(scope["query_string"]) > MAX_URL_BYTES:
            raise Problem("uri_too_long", f"the URL is longer than {MAX_URL_BYTES} bytes")
        headers = _headers(scope)
        host = split_host(headers.get("host", ""))
        allowed = self._hosts
        if host is None or ("*" not in allowed and host[0] not in allowed):
            raise Problem(
                "host_not_allowed",
                "the Host header names no host this server answers for (allowed_hosts, "
                "serve --allowed-host)",
            )
        cors += self._origin(scope, headers, host)
        state = scope.setdefault("state", {})
        path = app_path(scope)
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX):
            return
        cookie = self._cookie or cookie_name(scope, host[1])
        state["cookie_name"] = cookie  # which `POST /api/session` sets
        for name, _ in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True):
            if name.lower() in _QUERY_TOKENS:
                raise Problem(
                    "bad_request",
                    f"{name}: tokens are never taken from the URL (URLs are logged); send "
                    "'Authorization: Bearer TOKEN'",
                    extra={"parameter": name},
                )
        if scope["method"] == "OPTIONS":
            return  # a preflight carries no credentials; answered when the origin is allowed
        presents = "authorization" in headers or _presented(headers, cookie)[0] is not None
        if self._open_metrics and path == METRICS_PATH and not presents:
            address = (scope.get("client") or ("",))[0]
            if _is_loopback(address):  # a scraper on this host: every workspace's numbers
                state["principal"] = Principal(key=f"address:{address}", workspace=None)
                return
        principal = self._authenticate(scope, headers, path, cookie)
        if principal.by_cookie and headers.get("sec-fetch-site") in ("cross-site", "same-site"):
            raise Problem(
                "origin_not_allowed", "a cookie-authenticated request came from another site"
            )
        state["principal"] = principal

    def _origin(
        self, scope: Scope, headers: dict[str, str], host: tuple[str, str | None]
    ) -> list[tuple[bytes, bytes]]:
        """The CORS headers for the request's `Origin`; `origin_not_allowed` for an origin that
        is neither the server's own nor one of `cors_origins`."""
        vary = [(b"vary", b"Origin")] if self._origins else []
        origin = headers.get("origin")
        if origin is None:
            return vary
        if origin.lower() in self._origins:
            return [*vary, (b"access-control-allow-origin", origin.encode("latin-1"))]
        scheme, sep, authority = origin.lower().partition("://")
        own = split_host(authority) if sep else None
        request_scheme = scope.get("scheme", "http")
        if own is not None and scheme == request_scheme and own[0] == host[0]:
            default = _DEFAULT_PORTS.get(scheme)
            if (own[1] or default) == (host[1] or default):
                return vary  # same origin
        raise Problem("origin_not_allowed", f"requests from origin {origin[:200]!r} are refused")

    def _authenticate(
        self, scope: Scope, headers: dict[str, str], path: str, cookie: str
    ) -> Principal:
        """The principal of the request's token (`Authorization`, else the cookie named
        `cookie`, but for `POST /api/session`); `Problem` when it is missing or wrong."""
        address = (scope.get("client") or ("unknown",))[0]
        now = time.monotonic()
        wait = self.failures.retry_after(address, now)
        if wait is not None:
            raise Problem(
                "rate_limited",
                f"too many failed authentications from this address; retry in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        taken = None if path == SESSION_PATH else cookie
        presented, by_cookie = _presented(headers, taken)
        if not self._tokens:  # allow_no_token: every client is its own address
            return Principal(key=f"address:{address}", workspace=None)
        if presented is not None:
            given = presented.encode("utf-8", "surrogateescape")
            match = None
            for token, workspace in self._tokens:  # every token compared: constant time
                if hmac.compare_digest(token, given) and match is None:
                    match = (token, workspace)
            if match is not None:
                key = hashlib.sha256(match[0]).hexdigest()[:32]
                return Principal(key=key, workspace=match[1], by_cookie=by_cookie)
        self.failures.failed(address, now, guessed=presented is not None)
        raise Problem(
            "unauthorized",
            "a valid token is required: 'Authorization: Bearer TOKEN'"
            + ("" if taken is None else f" or the {taken} cookie"),
            headers={"WWW-Authenticate": 'Bearer realm="session-journal"'},
        )


def _is_loopback(address: str) -> bool:
    """Whether the client's address (the ASGI scope's `client`) is a loopback address."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _presented(headers: dict[str, str], cookie: str | None) -> tuple[str | None, bool]:
    """The token the request presents, and whether it came in the cookie named `cookie`
    (`None`: a cookie is not taken)."""
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.strip().partition(" ")
        return (token.strip() if scheme.lower() == "bearer" else None), False
    if cookie is not None and "cookie" in headers:
        # Pair by pair, as browsers send them: another application's cookie on this host
        # (cookies ignore ports), however it is written, does not hide this one.
        for pair in headers["cookie"].split(";"):
            name, equals, value = pair.strip().partition("=")
            if equals and name.strip() == cookie:
                return value.strip().strip('"'), True
    return None, False


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name (repeated ones joined as HTTP joins them)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in headers:
            headers[name] += ("; " if name == "cookie" else ", ") + value
        else:
            headers[name] = value
    return headers


def _with_headers(
    send: Send, extra: list[tuple[bytes, bytes]], answers: Counter[int], started: list[int]
) -> Send:
    """`send`, adding `Cache-Control: no-store` (unless set), the security headers and `extra`
    to the response, counted by status in `answers` (and its status added to `started`)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            answers[message["status"]] += 1
            started.append(message["status"])
            headers = list(message.get("headers", []))
            if not any(name.lower() == b"cache-control" for name, _ in headers):
                headers.append(NO_STORE)
            message = {**message, "headers": [*headers, *SECURITY_HEADERS, *extra]}
        await send(message)

    return sending


async def _preflight(send: Send, cors: list[tuple[bytes, bytes]]) -> None:
    """The answer to a CORS preflight from an allowed origin."""
    headers = [
        *cors,
        (b"access-control-allow-methods", b"GET, POST"),
        (b"access-control-allow-headers", b"authorization, last-event-id"),
        (b"access-control-max-age", b"600"),
        NO_STORE,
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
