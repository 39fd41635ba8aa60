"""What every request passes before a route sees it: the token (header or cookie, never the
URL), the failed-authentication limit, `Host` (with `[::1]:port`), `Origin` and CORS, and the
scoping of a token bound to one workspace, endpoint by endpoint. On both backends."""

from __future__ import annotations

from typing import Any

import pytest

from session_journal import InvalidRecord, Store
from session_journal.web import WebSettings, create_app
from tests.web.client import ADMIN, TOKENS, W2_TOKEN, InProcess, bearer, serve

OURS = "session_journal_token_80"
"""The cookie's name for `InProcess`, whose `Host` is `localhost` (http: port 80)."""


def code(response: Any) -> tuple[int, str | None]:
    assert response.headers["cache-control"] == "no-store"
    if response.status_code < 400:
        return response.status_code, None
    assert response.headers["content-type"] == "application/problem+json"
    return response.status_code, response.json()["code"]


def test_a_token_is_required_and_compared(web: InProcess) -> None:
    missing = web.get("/api/events")
    assert code(missing) == (401, "unauthorized")
    assert missing.headers["www-authenticate"] == 'Bearer realm="session-journal"'
    assert code(web.get("/api/events", headers=bearer("z" * 43))) == (401, "unauthorized")
    assert code(web.get("/api/events", headers={"Authorization": f"Basic {ADMIN}"})) == (
        401,
        "unauthorized",
    )
    assert code(web.get("/api/events", headers=bearer(ADMIN + "x"))) == (401, "unauthorized")
    assert code(web.get("/api/events", headers=bearer())) == (200, None)
    assert code(web.get("/healthz")) == (200, None)  # no token, no data


def test_a_token_in_the_query_string_is_refused(web: InProcess) -> None:
    for name in ("token", "access_token", "session_journal_token"):
        response = web.get(f"/api/events?{name}={ADMIN}", headers=bearer())
        assert code(response) == (400, "bad_request")
        assert response.json()["parameter"] == name
        assert ADMIN not in response.text


def test_ten_failed_authentications_a_minute_are_then_refused(served: Store) -> None:
    with serve(served) as web:
        for _ in range(20):  # no token at all: refused, but no guess to count
            assert code(web.get("/api/events"))[0] == 401
        assert code(web.get("/api/events", headers=bearer())) == (200, None)
        for _ in range(10):
            assert code(web.get("/api/events", headers=bearer("z" * 43)))[0] == 401
        limited = web.get("/api/events", headers=bearer())  # even the right token, now
        assert code(limited) == (429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 61
    # Another address is not limited.
    with InProcess(create_app(served, WebSettings(tokens=TOKENS)), client=("10.0.0.2", 1)) as other:
        assert code(other.get("/api/events", headers=bearer())) == (200, None)


def test_the_cookie_is_set_by_the_header_token_and_then_accepted(web: InProcess) -> None:
    assert code(web.request("POST", "/api/session")) == (401, "unauthorized")
    made = web.request("POST", "/api/session", headers=bearer())
    assert made.status_code == 204
    cookie = made.headers["set-cookie"]
    assert cookie.startswith(f"{OURS}={ADMIN};")
    assert {"HttpOnly", "Path=/", "SameSite=strict"} <= {p.strip() for p in cookie.split(";")}
    with_cookie = {"Cookie": f"{OURS}={ADMIN}"}
    assert code(web.get("/api/events", headers=with_cookie)) == (200, None)
    # The cookie alone cannot make another cookie, and another site cannot use it.
    assert code(web.request("POST", "/api/session", headers=with_cookie)) == (401, "unauthorized")
    cross = {**with_cookie, "Sec-Fetch-Site": "cross-site"}
    assert code(web.get("/api/events", headers=cross)) == (403, "origin_not_allowed")
    bad = {"Cookie": f"{OURS}={'q' * 43}"}
    assert code(web.get("/api/events", headers=bad)) == (401, "unauthorized")
    # Another server's cookie on this host (another port: another name) is not this one's,
    # and presents no guess.
    for other in (f"session_journal_token_8765={ADMIN}", f"session_journal_token={ADMIN}"):
        assert code(web.get("/api/events", headers={"Cookie": other})) == (401, "unauthorized")


def cookie_set(web: InProcess, path: str, token: str, host: str = "localhost") -> str:
    """The name of the cookie `POST path` sets for `token`, asked through `Host: host`."""
    made = web.request("POST", path, headers={**bearer(token), "Host": host})
    assert made.status_code == 204
    name, equals, rest = made.headers["set-cookie"].partition("=")
    assert equals and rest.startswith(f"{token};")
    return name


def test_two_servers_on_two_ports_of_one_host_keep_a_cookie_each(served: Store) -> None:
    # Cookies ignore ports: what one browser sends to localhost:8001 it sends to :8002 too.
    with (
        serve(served, tokens={ADMIN: None}) as first,
        serve(served, tokens={W2_TOKEN: None}) as second,
    ):
        names = [
            cookie_set(first, "/api/session", ADMIN, "localhost:8001"),
            cookie_set(second, "/api/session", W2_TOKEN, "localhost:8002"),
        ]
        assert names == ["session_journal_token_8001", "session_journal_token_8002"]
        both = {"Cookie": f"{names[1]}={W2_TOKEN}; {names[0]}={ADMIN}"}
        for web, port in ((first, 8001), (second, 8002)):
            for _ in range(12):  # neither is the other's failed authentication
                answer = web.get("/api/events", headers={**both, "Host": f"localhost:{port}"})
                assert code(answer) == (200, None)
        # Without a port, the scheme's: a browser leaves out 80 for http.
        assert cookie_set(first, "/api/session", ADMIN) == "session_journal_token_80"
        assert cookie_set(first, "/api/session", ADMIN, "[::1]:8765") == (
            "session_journal_token_8765"
        )


def test_two_apps_under_two_mounts_keep_a_cookie_each(served: Store) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    prod = create_app(served, WebSettings(tokens={ADMIN: None}))
    staging = create_app(served, WebSettings(tokens={W2_TOKEN: None}))
    odd = create_app(served, WebSettings(tokens={ADMIN: None}))
    outer = Starlette(
        routes=[
            Mount("/prod", app=prod),
            Mount("/staging/v2", app=staging),
            Mount("/a_b.c/été", app=odd),
        ]
    )
    with InProcess(outer) as web:
        names = [
            cookie_set(web, "/prod/api/session", ADMIN, "localhost:8443"),
            cookie_set(web, "/staging/v2/api/session", W2_TOKEN, "localhost:8443"),
            cookie_set(web, "/a_b.c/%C3%A9t%C3%A9/api/session", ADMIN, "localhost:8443"),
        ]
        assert names == [
            "session_journal_token_8443_prod",
            "session_journal_token_8443_staging_v2",
            "session_journal_token_8443_a.5Fb.2Ec_.C3.A9t.C3.A9",
        ]
        both = {"Cookie": f"{names[1]}={W2_TOKEN}; {names[0]}={ADMIN}", "Host": "localhost:8443"}
        for prefix in ("/prod", "/staging/v2"):
            for _ in range(12):  # neither is the other's failed authentication
                assert code(web.get(prefix + "/api/events", headers=both)) == (200, None)


def test_no_answer_differs_with_the_tokens_but_by_accepting_or_refusing(served: Store) -> None:
    # A 401 that named a digest of the tokens would let a guess be checked offline, outside
    # the failed-authentication limit.
    requests: list[tuple[str, str, dict[str, str]]] = [
        ("GET", "/api/events", {}),
        ("GET", "/api/events", bearer("z" * 43)),
        ("GET", "/api/events/stream", {"Cookie": f"{OURS}={'z' * 43}"}),
        ("GET", "/api/status", {"Host": "localhost:8765"}),
        ("POST", "/api/session", {}),
        ("POST", "/api/session", bearer("z" * 43)),
        ("GET", "/api/events?token=x", {}),
        ("GET", "/healthz", {}),
        ("GET", "/", {}),
        ("GET", "/nope", {}),
    ]
    answers = []
    for tokens in ({ADMIN: None}, {W2_TOKEN: "w-2", "c" * 43: None}):
        with serve(served, tokens=tokens) as web:
            answered = []
            for method, path, headers in requests:
                response = web.request(method, path, headers=headers)
                answered.append(
                    (response.status_code, response.headers.multi_items(), response.text)
                )
            token = next(iter(tokens))
            made = web.request("POST", "/api/session", headers=bearer(token))
            answered.append((made.status_code, made.headers["set-cookie"].replace(token, "T"), ""))
            answers.append(answered)
    assert answers[0] == answers[1]
    statuses = [status for status, _, _ in answers[0]]
    assert statuses == [401] * 6 + [400, 200, 200, 401, 204]
    unauthorized = answers[0][0][2]
    assert "the session_journal_token_80 cookie" in unauthorized
    assert answers[0][3][2].count("session_journal_token_8765") == 1


def test_the_cookie_name_setting(served: Store) -> None:
    # Behind a proxy that rewrites Host to each replica's own port, one name for all.
    with serve(served, cookie_name="journal_prod") as web:
        for host in ("localhost", "localhost:8001", "localhost:8002"):
            assert cookie_set(web, "/api/session", ADMIN, host) == "journal_prod"
            answer = web.get(
                "/api/events", headers={"Cookie": f"journal_prod={ADMIN}", "Host": host}
            )
            assert code(answer) == (200, None)
        # The name of the port is not read then.
        assert code(web.get("/api/events", headers={"Cookie": f"{OURS}={ADMIN}"})) == (
            401,
            "unauthorized",
        )
    for bad in ("", "a b", "a;b", "a=b", "é", "x" * 129, "__Host-journal", "__secure-x", 7):
        with pytest.raises(InvalidRecord, match="cookie_name"):
            WebSettings(tokens=TOKENS, cookie_name=bad)  # type: ignore[arg-type]
    assert WebSettings(tokens=TOKENS, cookie_name="x" * 128).cookie_name == "x" * 128


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("localhost:8765", True),
        ("127.0.0.1:1", True),
        ("[::1]", True),
        ("[::1]:8765", True),
        ("LOCALHOST:80", True),
        ("evil.example", False),
        ("evil.example:8765", False),
        ("localhost.evil.example", False),
        ("[::1]x", False),
        ("[::2]:8765", False),
        ("localhost:http", False),
        ("", False),
    ],
)
def test_the_host_is_checked(web: InProcess, host: str, allowed: bool) -> None:
    response = web.get("/api/events", headers={**bearer(), "Host": host})
    assert code(response) == ((200, None) if allowed else (403, "host_not_allowed"))


def test_allowed_hosts_and_any_host(served: Store) -> None:
    with serve(served, allowed_hosts=("journal.internal",)) as web:
        assert (
            code(web.get("/api/events", headers={**bearer(), "Host": "journal.internal:443"}))[0]
            == 200
        )
        assert code(web.get("/api/events", headers={**bearer(), "Host": "localhost"}))[1] == (
            "host_not_allowed"
        )
    with serve(served, allowed_hosts=("*",)) as web:
        assert code(web.get("/api/events", headers={**bearer(), "Host": "anything"}))[0] == 200


def test_a_foreign_origin_is_refused_and_cors_is_off_unless_configured(
    web: InProcess, served: Store
) -> None:
    same = web.get("/api/events", headers={**bearer(), "Origin": "http://localhost"})
    assert code(same) == (200, None) and "access-control-allow-origin" not in same.headers
    for origin in ("http://evil.example", "https://localhost", "http://localhost:9", "null"):
        refused = web.get("/api/events", headers={**bearer(), "Origin": origin})
        assert code(refused) == (403, "origin_not_allowed"), origin
    # Even a request that a token would admit, and the cookie exchange.
    assert (
        code(
            web.request(
                "POST", "/api/session", headers={**bearer(), "Origin": "http://evil.example"}
            )
        )[1]
        == "origin_not_allowed"
    )
    with serve(served, cors_origins=("https://app.example",)) as cors:
        allowed = cors.get("/api/events", headers={**bearer(), "Origin": "https://app.example"})
        assert code(allowed) == (200, None)
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert allowed.headers["vary"] == "Origin"
        preflight = cors.request(
            "OPTIONS",
            "/api/events",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
        )
        assert preflight.status_code == 204
        assert "authorization" in preflight.headers["access-control-allow-headers"]
        other = cors.get("/api/events", headers={**bearer(), "Origin": "https://other.example"})
        assert code(other) == (403, "origin_not_allowed")


def test_a_workspace_token_sees_its_workspace_only(web: InProcess) -> None:
    workspace_scoping(web.get)


def workspace_scoping(get: Any) -> None:
    """Every endpoint, for a token bound to w-2 (`get(path, headers=...)`: any client)."""
    scoped = bearer(W2_TOKEN)

    def answer(path: str) -> Any:
        response = get(path, headers=scoped)
        return code(response), response.json()

    (status, page) = answer("/api/events?after_seq=0")
    assert status == (200, None) and {e["session_id"] for e in page["events"]} == {"s-2"}
    (status, page) = answer("/api/events?before_seq=9")
    assert status == (200, None) and {e["session_id"] for e in page["events"]} == {"s-2"}
    assert answer("/api/events?after_seq=0&workspace_id=w-1")[0] == (404, "not_found")
    assert answer("/api/events?after_seq=0&session_id=s-1")[0] == (404, "not_found")
    assert answer("/api/events/stream?session_id=s-1")[0] == (404, "not_found")
    assert answer("/api/events/stream?workspace_id=w-1")[0] == (404, "not_found")
    (status, page) = answer("/api/sessions")
    assert [s["session"]["id"] for s in page["sessions"]] == ["s-2"]
    assert answer("/api/sessions?workspace_id=w-1")[0] == (404, "not_found")
    (status, counts) = answer("/api/session-counts")
    assert status == (200, None) and (counts["workspace_id"], counts["total"]) == ("w-2", 1)
    assert answer("/api/session-counts?workspace_id=w-1")[0] == (404, "not_found")
    (status, rate) = answer("/api/events/rate")
    assert status == (200, None) and (rate["workspace_id"], sum(rate["counts"])) == ("w-2", 1)
    assert answer("/api/events/rate?workspace_id=w-1")[0] == (404, "not_found")
    for path in ("", "/state", "/transcript", "/questions"):
        assert answer(f"/api/sessions/s-1{path}")[0] == (404, "not_found")
        assert answer(f"/api/sessions/s-2{path}")[0] == (200, None)
    (status, found) = answer("/api/search?q=deploy")
    assert {hit["session_id"] for hit in found["hits"]} == {"s-2"}
    assert answer("/api/search?q=deploy&session_id=s-1")[0] == (404, "not_found")
    assert answer("/api/status")[0] == (404, "not_found")  # server-wide: not for w-2


def test_the_settings_are_checked(served: Store) -> None:
    with pytest.raises(InvalidRecord, match="tokens is empty"):
        create_app(served)
    with pytest.raises(InvalidRecord, match="42 characters"):
        WebSettings(tokens={"a" * 42: None})
    with pytest.raises(InvalidRecord, match="token must be text"):
        WebSettings(tokens={"a" * 42 + " ": None})
    with pytest.raises(InvalidRecord, match="workspace"):
        WebSettings(tokens={ADMIN: "bad workspace"})
    with pytest.raises(InvalidRecord, match="allowed_hosts"):
        WebSettings(tokens=TOKENS, allowed_hosts=("http://x",))
    with pytest.raises(InvalidRecord, match="cors_origins"):
        WebSettings(tokens=TOKENS, cors_origins=("https://x/path",))
    with pytest.raises(InvalidRecord, match="heartbeat_s"):
        WebSettings(tokens=TOKENS, heartbeat_s=0)
    with pytest.raises(InvalidRecord, match="max_streams"):
        WebSettings(tokens=TOKENS, max_streams=0)
    with pytest.raises(InvalidRecord, match="store must be"):
        create_app("sqlite:///x.db", WebSettings(tokens=TOKENS))  # type: ignore[arg-type]
    open_server = WebSettings(allow_no_token=True)
    with InProcess(create_app(served, open_server)) as web:
        assert web.get("/api/events").status_code == 200


def test_another_applications_cookie_does_not_hide_ours(web: InProcess) -> None:
    # Cookies ignore ports: another application on this host may set any cookie.
    for other in ('prefs={"theme":"dark"}', "a=b=c", "junk", 'x="unterminated'):
        cookie = {"Cookie": f"{other}; {OURS}={ADMIN}; z=1"}
        assert code(web.get("/api/events", headers=cookie)) == (200, None), other


def test_under_a_mount_prefix(served: Store) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    feed = create_app(served, WebSettings(tokens=TOKENS))
    with InProcess(Starlette(routes=[Mount("/journal", app=feed)])) as web:
        assert code(web.get("/journal/healthz")) == (200, None)  # no token there
        assert code(web.get("/journal/api/events", headers=bearer())) == (200, None)
        assert code(web.get("/journal/api/events")) == (401, "unauthorized")
        with_cookie = {"Cookie": f"{OURS}_journal={ADMIN}"}  # the mount's own cookie
        assert code(web.get("/journal/api/events", headers=with_cookie)) == (200, None)
        # The cookie is made from the header's token only, under the prefix too.
        made = web.request("POST", "/journal/api/session", headers=with_cookie)
        assert code(made) == (401, "unauthorized")


def test_refusals_carry_cors_headers_and_slashes_do_not_redirect(served: Store) -> None:
    with serve(served, cors_origins=("https://app.example",)) as web:
        refused = web.get("/api/events", headers={"Origin": "https://app.example"})
        assert code(refused) == (401, "unauthorized")
        assert refused.headers["access-control-allow-origin"] == "https://app.example"
        assert refused.headers["vary"] == "Origin"
        assert code(web.get("/api/events/", headers=bearer())) == (404, "not_found")
        assert code(web.get("/healthz/", headers=bearer())) == (404, "not_found")
