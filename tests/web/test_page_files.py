"""The operator page's files as the app serves them (no browser): `/` and `/page/*` without a
token and with exactly the security headers the issue names, on every answer of the app; only
the listed files; the icon a browser asks for unbidden is no failed authentication; the page's
scripts never hand a string to an HTML or script sink, and use no API that only a secure context
has but Web Locks, tested for first. On both backends where a store serves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest

from session_journal import InvalidRecord, SessionState, Store
from session_journal.api_events import EVENT_TYPES
from session_journal.web import WebSettings, create_app
from session_journal.web._page import PAGE_FILES
from tests.web.client import ADMIN, TOKENS, InProcess, bearer
from tests.web.scenario import controller

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
PAGE = resources.files("session_journal.web") / "page"
SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\b|new\s+Function|"
    r"srcdoc|createContextualFragment|DOMParser|setHTMLUnsafe|parseHTMLUnsafe|"
    r"set(?:Timeout|Interval)\(\s*['\"`]"
)

SECURE_CONTEXT_ONLY = re.compile(
    r"randomUUID|crypto\.subtle|navigator\.(?:clipboard|serviceWorker|storage|credentials|"
    r"geolocation|mediaDevices|share|usb|serial|hid|bluetooth)|\bNotification\b|"
    r"show(?:Open|Save)FilePicker|showDirectoryPicker|\bcaches\b"
)
"""APIs a page on plain HTTP to a LAN address does not have (not a secure context)."""
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


@pytest.fixture
def web(store: Store) -> Iterator[InProcess]:
    controller(store)
    app = create_app(store, WebSettings(tokens=TOKENS, page_hidden_close_s=2.5))
    with InProcess(app) as client:
        yield client


def secured(response: httpx.Response, *, stream: bool = False) -> None:
    headers = response.headers
    assert headers["content-security-policy"] == POLICY
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == ("no-store, no-transform" if stream else "no-store")


def test_the_page_and_its_files_need_no_token_and_carry_the_headers(web: InProcess) -> None:
    index = web.get("/?view=feed&session=s-1")
    assert index.status_code == 200
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    secured(index)
    assert '<meta name="session-journal-page-hidden-close-s" content="2.5">' in index.text
    assert '<script type="module" src="page/app.js"></script>' in index.text
    for name, media_type in PAGE_FILES.items():
        answer = web.get(f"/page/{name}")
        assert (answer.status_code, answer.headers["content-type"]) == (200, media_type), name
        assert answer.content == (PAGE / name).read_bytes()
        secured(answer)
    listed = {file.name for file in PAGE.iterdir()} - {"index.html"}
    assert listed == set(PAGE_FILES)  # every file shipped is served, none forgotten


def test_only_the_listed_files_are_served(web: InProcess) -> None:
    for path in ("/page/nope.js", "/page/index.html", "/page/..%2F_page.py", "/page/"):
        answer = web.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["code"] == "not_found"
        secured(answer)
    assert web.request("POST", "/").status_code == 405


def test_every_answer_carries_the_headers(web: InProcess) -> None:
    secured(web.get("/api/events", headers=bearer()))
    secured(web.get("/api/events"))  # a refusal too
    secured(web.get("/healthz"))
    secured(web.get("/api/events/stream?after_seq=99", headers=bearer()))  # a stream's 409
    # A stream's own answer: test_live_streams.stream_frames checks its headers.


def test_the_icon_browsers_ask_for_is_no_failed_authentication(web: InProcess) -> None:
    for _ in range(15):  # more than the failed-authentication limit
        assert web.get("/favicon.ico").status_code == 404
    assert web.get("/api/status", headers=bearer()).json()["auth_failures"] == 0


def test_the_hidden_close_delay_is_checked() -> None:
    for value in (0.5, 86401, float("nan"), "60", True):
        with pytest.raises(InvalidRecord, match="page_hidden_close_s"):
            WebSettings(tokens={ADMIN: None}, page_hidden_close_s=value)  # type: ignore[arg-type]


def test_the_page_scripts_never_hand_a_string_to_an_html_or_script_sink() -> None:
    scripts = {name: (PAGE / name).read_text() for name in PAGE_FILES if name.endswith(".js")}
    assert len(scripts) >= 5
    for name, text in scripts.items():
        assert not SINKS.findall(text), (name, SINKS.findall(text))
    assert SINKS.search("node.innerHTML = x") and SINKS.search("setTimeout('go()')")
    html = (PAGE / "index.html").read_text()
    # Nothing inline (the policy refuses it): no script body, no style, no handler attribute.
    assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", html)


def test_the_page_scripts_need_no_secure_context() -> None:
    # Served over plain HTTP on a LAN address the page is not a secure context; an API that
    # is missing there left it at "connecting" with no message.
    for name in PAGE_FILES:
        if not name.endswith(".js"):
            continue
        code = COMMENTS.sub("", (PAGE / name).read_text())
        assert not SECURE_CONTEXT_ONLY.findall(code), (name, SECURE_CONTEXT_ONLY.findall(code))
        if "navigator.locks." in code:  # Web Locks only where the browser has them
            assert "!!navigator.locks" in code, name
    assert SECURE_CONTEXT_ONLY.search("this.id = crypto.randomUUID();")
    assert not SECURE_CONTEXT_ONLY.search(COMMENTS.sub("", "a(); // no crypto.randomUUID"))


def test_the_page_knows_every_session_state() -> None:
    listed = re.search(r"export const STATES = \[([^\]]*)\]", (PAGE / "views.js").read_text())
    assert listed is not None
    assert re.findall(r"'([^']+)'", listed[1]) == [state.value for state in SessionState]


def test_the_page_has_a_summary_for_every_event_type() -> None:
    # The summaries' table (page/summaries.js) as Node reads the module, against the server's
    # types: a new type with no summary would be shown by its tag alone.
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing: CI checks the page's summaries")
        pytest.skip("node missing: the page's summaries are checked in CI")
    module = Path(str(PAGE / "summaries.js")).as_uri()
    script = f"import {{ SUMMARIES }} from {json.dumps(module)};"
    script += "console.log(JSON.stringify(Object.keys(SUMMARIES)));"
    shown = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    assert sorted(json.loads(shown.stdout)) == list(EVENT_TYPES)


def test_the_page_preloads_the_modules_of_its_first_view() -> None:
    # Without the preloads the browser finds the modules one level of imports at a time: each
    # level a round trip before the first view can draw. The stream's modules are imported
    # once the first view is drawn, and not preloaded: they would compete with the view's.
    html = (PAGE / "index.html").read_text()
    preloaded = set(re.findall(r'<link rel="modulepreload" href="page/([a-z]+\.js)">', html))
    static: set[str] = set()
    todo = ["app.js"]
    while todo:
        for name in re.findall(r"from '\./([a-z]+\.js)'", (PAGE / todo.pop()).read_text()):
            if name not in static:
                static.add(name)
                todo.append(name)
    assert "stream.js" not in static and "import('./stream.js')" in (PAGE / "app.js").read_text()
    assert preloaded == static
