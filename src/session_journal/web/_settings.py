"""`WebSettings`: who may read the feed over HTTP, from which hosts and origins, and the bounds
of its streams; checked once, when the app is made."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from session_journal import ApiEventFilter, InvalidRecord

MIN_TOKEN_CHARS = 43
"""The shortest token accepted: 43 characters of base64url carry 256 bits
(`secrets.token_urlsafe(32)`)."""
MAX_TOKEN_CHARS = 512
"""The longest token accepted (a header or a cookie holds it)."""
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The `Host` names accepted unless `allowed_hosts` says otherwise (with any port)."""

_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]+")  # RFC 6750's b64token: no space, no quote, no ';'
_ORIGIN = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")
_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+|\*")
_COOKIE_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")  # RFC 6265's token


@dataclass(frozen=True)
class WebSettings:
    """How `session_journal.web.create_app` serves the feed. Every field is checked when the
    app is made (`InvalidRecord` naming the field): a bad setting never reaches a request."""

    tokens: Mapping[str, str | None] = field(default_factory=dict)
    """Bearer token → the workspace it is bound to (`None`: every workspace). Each token is
    43 to 512 characters of `[A-Za-z0-9._~+/=-]` (`secrets.token_urlsafe(32)` makes one). A
    token bound to a workspace sees only that workspace's sessions, events and index rows
    (another workspace's ids answer 404)."""
    allow_no_token: bool = False
    """Serve without any token when `tokens` is empty (for a loopback-only server); without
    this an empty `tokens` is refused."""
    allowed_hosts: tuple[str, ...] = DEFAULT_HOSTS
    """The names the `Host` header may carry (with any port): a host name, an IPv4 address,
    a bracketed IPv6 address (`[::1]`), or `*` for any (behind a proxy that checks it).
    Checked on every request, against DNS rebinding."""
    cors_origins: tuple[str, ...] = ()
    """Origins (`https://app.example:8443`, exactly) whose pages may call the API from a
    browser; none by default (CORS off). Any other `Origin` but the server's own is refused."""
    heartbeat_s: float = 15.0
    """A comment line on every stream that sent nothing for this long (1 to 300 seconds)."""
    max_streams: int = 1000
    """The most streams open at once; over it a stream is answered 503 (JSON reads go on)."""
    max_streams_per_token: int = 16
    """The most streams one token (one client without tokens) holds at once; over it, 429."""
    stream_lifetime_s: float = 3600.0
    """A stream is asked to reconnect (`event: rotate`) after this long, ± 10 % (1 second
    to a day), so that connections move between servers and no connection lives forever."""
    send_timeout_s: float = 30.0
    """A stream whose client has not taken a write for this long is closed (1 to 600 seconds);
    the others are not delayed meanwhile."""
    page_hidden_close_s: float = 60.0
    """The operator page closes its browser's one stream when every tab of it has been hidden
    for this long (1 second to a day), and opens it again when one is shown."""
    cookie_name: str | None = None
    """The name of the cookie the operator page signs in with (`POST /api/session`): 1 to 128
    of the characters a cookie's name may hold (`` [A-Za-z0-9!#$%&'*+.^_`|~-] ``), not starting
    `__Host-` or `__Secure-` (such a cookie needs HTTPS all the way to this server). `None`: a
    name of the port in the request's `Host` and the mount path (`session_journal_token_8765`,
    `session_journal_token_443_journal`), so that servers on one host keep a cookie each; set
    it behind a proxy that rewrites `Host` to each replica's own port."""
    redact: bool = True
    """Redact secrets from the free text of everything served (`session_journal.Redactor`'s
    rules, with `[REDACTED]`): event pages and frames, sessions, states, transcripts, questions
    and search hits. `False` serves what the store holds, as `load_json` gives it."""
    metrics_open_on_loopback: bool = False
    """Let a request to `GET /metrics` without a token in when it comes from a loopback address
    (127.0.0.0/8, ::1: a Prometheus on the same host). A request that presents a token is
    checked as any other. Behind a reverse proxy on the same host every request comes from
    loopback: leave this off there."""

    def __post_init__(self) -> None:
        """Every field is checked here (`InvalidRecord` naming it); nothing is changed: the
        app keeps its own copies (`Guard`)."""
        tokens = _tokens(self.tokens)
        if not tokens and not self.allow_no_token:
            raise InvalidRecord(
                "tokens is empty: give at least one token, or allow_no_token=True for a server "
                "that only loopback clients reach"
            )
        _hosts(self.allowed_hosts)
        _origins(self.cors_origins)
        for name, low, high in (
            ("heartbeat_s", 1.0, 300.0),
            ("stream_lifetime_s", 1.0, 86400.0),
            ("send_timeout_s", 1.0, 600.0),
            ("page_hidden_close_s", 1.0, 86400.0),
        ):
            _number(name, getattr(self, name), low, high)
        for name, high in (("max_streams", 1_000_000), ("max_streams_per_token", 1_000_000)):
            _count(name, getattr(self, name), high)
        _cookie_name(self.cookie_name)
        if not isinstance(self.allow_no_token, bool):
            raise InvalidRecord("allow_no_token must be True or False")
        if not isinstance(self.redact, bool):
            raise InvalidRecord("redact must be True or False")
        if not isinstance(self.metrics_open_on_loopback, bool):
            raise InvalidRecord("metrics_open_on_loopback must be True or False")


def _tokens(value: object) -> dict[str, str | None]:
    if not isinstance(value, Mapping):
        raise InvalidRecord(f"tokens must be a mapping of token to workspace, got {value!r}")
    tokens: dict[str, str | None] = {}
    for token, workspace in value.items():
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise InvalidRecord(
                "a token must be text of [A-Za-z0-9._~+/=-] (secrets.token_urlsafe(32) makes one)"
            )
        if not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS:
            raise InvalidRecord(
                f"a token of {len(token)} characters was refused: tokens are "
                f"{MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} characters (secrets.token_urlsafe(32) "
                "makes one of 43)"
            )
        if workspace is not None:
            try:
                ApiEventFilter(workspace_id=workspace)
            except ValueError:
                raise InvalidRecord(
                    f"a token's workspace must be a workspace id or None, got {workspace!r}"
                ) from None
        tokens[token] = workspace
    return tokens


def _hosts(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise InvalidRecord(f"allowed_hosts must be a tuple of host names, got {value!r}")
    hosts = []
    for host in value:
        if not isinstance(host, str) or not _HOST.fullmatch(host):
            raise InvalidRecord(
                f"allowed_hosts: {host!r} is not a host name, an IP address, a bracketed IPv6 "
                "address or '*'"
            )
        hosts.append(host.lower())
    if not hosts:
        raise InvalidRecord("allowed_hosts is empty: no request could be served")
    return tuple(hosts)


def _cookie_name(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not _COOKIE_NAME.fullmatch(value):
        raise InvalidRecord(
            f"cookie_name must be None or 1 to 128 characters of [A-Za-z0-9!#$%&'*+.^_`|~-] "
            f"(a cookie's name), got {value!r}"
        )
    if value.lower().startswith(("__host-", "__secure-")):
        raise InvalidRecord(
            f"cookie_name: {value!r} has a prefix browsers keep only for a Secure cookie, which "
            "this server sets only on requests that reach it over HTTPS; choose another name"
        )


def _origins(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise InvalidRecord(f"cors_origins must be a tuple of origins, got {value!r}")
    for origin in value:
        if not isinstance(origin, str) or not _ORIGIN.fullmatch(origin):
            raise InvalidRecord(
                f"cors_origins: {origin!r} is not an origin (scheme://host[:port], no path)"
            )
    return tuple(origin.lower() for origin in value)


def _number(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRecord(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidRecord(f"{name} must be from {low:g} to {high:g} seconds, got {value!r}")


def _count(name: str, value: object, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidRecord(f"{name} must be an integer from 1 to {high:,}, got {value!r}")
