"""The operator page in a real browser (Debian's headless Chromium, through Selenium) against
a real `session-journal serve` on a free loopback port: every view shows the store, an event
appended after the page loaded shows within 2 s, agent text with markup runs nothing and shows
as text, a pruned cursor shows which seqs went and recovers, the stream closes when every tab
has been hidden for the delay (2 s here) and opens when one is shown, filters in the URL survive
a reload, seven tabs share one stream (and another tab takes it over when its holder closes),
the page works under a mount prefix and outside a secure context (plain HTTP to a name that is
not loopback, each tab with a stream of its own), and its cookie is named by the server's port:
two servers on one host keep a cookie each, and a restart with another token added keeps the
page signed in. The printed link pasted into an open tab signs it in and leaves neither the
address nor the tab's history holding the token; opened during a lockout (429), it is kept,
one countdown shows, and the page signs in once the lockout ends. No policy violation is
reported on any view. Each test writes a PNG of its view (`make screenshots` writes them to
docs/img/operator-page). On both backends."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from selenium.webdriver.support.ui import Select
from starlette.applications import Starlette
from starlette.routing import Mount

from session_journal import (
    ActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiTurnOutcome,
    CommandEnded,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    InputResolved,
    LegacyNotice,
    OutcomeReason,
    SessionRecord,
    SessionState,
    Store,
    TurnEnded,
    TurnOutcome,
    TurnResultKind,
    TurnStarted,
)
from session_journal._clock import now_ms
from session_journal.api_events import EVENT_TYPES
from session_journal.relay import AgentMessage, RelayChain
from session_journal.web import WebSettings, _guard, create_app, shutdown_streams
from session_journal.web._guard import FAILED_AUTH_LIMIT
from tests.helpers import append_raw
from tests.web.browser import (
    INSECURE_HOST,
    VIOLATION_RECORDER,
    open_browser,
    screenshot,
    set_hidden,
    text_of,
    violations,
    wait_for,
)
from tests.web.client import ADMIN, LiveServer, ThreadServer, bearer, fault
from tests.web.scenario import LEAKS, SECRETS

pytestmark = pytest.mark.slow

PLUS = "a+b/c=" + "d" * 40
"""A token with the characters a URL's query would change."""
REFRESH_S = 5.0
"""The views' refresh without events (views.js REFRESH_MS)."""
LIVE_S = 2.0
"""The issue's bound: an event appended after the page loaded is shown within this."""
HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    '<a href="javascript:window.__pwned = 3">click me</a></script><b>bold?</b>'
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = open_browser()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser, left with one blank tab, shown, and no cookies after the test."""
    yield browser
    handles = browser.window_handles
    for handle in handles[1:]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(handles[0])
    set_hidden(browser, False)
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.get("about:blank")


@pytest.fixture
def live(writer: Store, migrated_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(
        migrated_url, tmp_path, "--page-hidden-close", "2", token_lines=f"{ADMIN}\n{PLUS}\n"
    ) as server:
        yield server


def rows(driver: Any) -> list[int]:
    """The seqs of the feed's rows, top (newest) first."""
    found: list[int] = driver.execute_script(
        "return [...document.querySelectorAll('#feed tbody tr')].map((r) => +r.dataset.seq);"
    )
    return found


def connection(driver: Any) -> str:
    return text_of(driver, "connection")


def open_page(driver: Any, address: str, *, token: bool = True, fragment: str = "") -> None:
    """Load the page at `address` (the token in the fragment) and wait until it is live."""
    driver.get(address + (f"#token={fragment or ADMIN}" if token or fragment else ""))
    wait_for(lambda: connection(driver) == "live", 10, f"{address} live")


def refusals(base: str) -> int:
    status = httpx.get(base + "/api/status", headers=bearer()).json()
    count: int = status["auth_failures"]
    return count


def streams(base: str, host: str | None = None) -> int:
    """The streams open on the server at `base` (asked with `Host: host` when given)."""
    headers = bearer() if host is None else {**bearer(), "Host": host}
    status = httpx.get(base + "/api/status", headers=headers).json()
    count: int = status["streams"]
    return count


def busier(store: Store) -> int:
    """Sessions in more states, with activity and an open checkpoint operation (what the
    screenshots show); the latest seq."""
    turn = ApiActivityDetails(kind=ApiActivityKind.TURN, label="running the tests")
    working = ApiActivityState(
        state="busy", details=turn, is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    waiting = dataclasses.replace(working, details=None, waiting_for_input=True)
    store.sessions.save(SessionRecord(id="s-3", project_id="p", state=SessionState.RUNNING))
    store.sessions.save(SessionRecord(id="s-4", project_id="p", state=SessionState.RUNNING))
    store.checkpoints.begin(
        SessionRecord(id="s-4", project_id="p", state=SessionState.CHECKPOINTING), "cmd-7"
    )
    store.activity.record([("s-3", working), ("s-1", waiting)], recorded_at_ms=1_764_000_000_000)
    latest: int = store.events.load(after_seq=0, limit=1).latest_seq
    return latest


def test_every_view_shows_the_store_and_an_event_appended_after_it_loaded(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    latest = busier(writer)
    open_page(page, live.base + "/")
    sessions = text_of(page, "view")
    assert "s-1" in sessions and "s-2" in sessions and "w-2" in sessions
    assert "busy · running the tests" in sessions and "busy · waiting for input" in sessions
    assert "cmd-7" in sessions and "checkpointing" in sessions
    served = httpx.get(live.base + "/api/session-counts", headers=bearer()).json()["counts"]
    states = [
        f"{served[state.value]} {state.value}" for state in SessionState if served[state.value]
    ]
    shown = page.execute_script("return document.querySelector('#sessions .counts').textContent;")
    assert shown == f"4 sessions: {' · '.join(states)}" and len(states) >= 2
    assert ADMIN not in page.current_url  # the fragment is dropped once traded for the cookie
    cookie = page.get_cookie(f"session_journal_token_{live.port}")  # one per port
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert page.execute_script("return document.cookie;") == ""  # no script reads it
    screenshot(page, "sessions", tmp_path)

    open_page(page, live.base + "/?view=feed", token=False)
    shown = list(range(latest, 0, -1))
    assert rows(page) == shown
    append_raw(writer, "s-1", fault("appended after the page loaded"))
    wait_for(lambda: rows(page) == [latest + 1, *shown], LIVE_S, "the new event on the feed")
    assert "appended after the page loaded" in text_of(page, "feed")

    open_page(page, live.base + "/?view=session&id=s-1", token=False)
    wait_for(lambda: "Which directory?" in text_of(page, "session"), 5, "the pending question")
    shown = text_of(page, "session")
    assert "hello <script>alert(1)</script>" in shown and "naïve café ☃" in shown
    append_raw(writer, "s-1", fault("the session's own event"))
    wait_for(lambda: "the session's own event" in text_of(page, "session"), LIVE_S, "live")
    screenshot(page, "session", tmp_path)

    box = page.find_element("id", "search-box")
    box.send_keys("deploy\n")
    wait_for(lambda: "[deploy] failed in w-1" in text_of(page, "search"), 5, "search hits")
    assert "view=search" in page.current_url and "q=deploy" in page.current_url
    screenshot(page, "search", tmp_path)
    assert violations(page) == []


def test_markup_in_agent_text_and_events_runs_nothing_and_shows_as_text(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    writer.sessions.save(SessionRecord(id="s-3", project_id="p", workspace_id="w-1"))
    said = [AgentMessage(message_id="m-1", text=HOSTILE)]
    writer.projection.apply("s-3", RelayChain().extend(said, recorded_at_ms=100))
    append_raw(writer, "s-3", fault(HOSTILE))
    open_page(page, live.base + "/?view=session&id=s-3")
    wait_for(lambda: HOSTILE in text_of(page, "session"), 5, "the transcript item as text")
    shown = page.execute_script(
        "return [...document.querySelectorAll('#session .transcript .text')]"
        ".map((n) => n.textContent);"
    )
    assert shown == [HOSTILE]
    open_page(page, live.base + "/?view=feed", token=False)
    page.execute_script("document.querySelector('#feed tbody tr details.json summary').click();")
    wait_for(  # the event's JSON, as text
        lambda: HOSTILE.replace('"', '\\"') in text_of(page, "feed"), 5, "the JSON shown"
    )
    assert summaries(page)[-1] == ["⚠ fault", f"fault · startup failed: {HOSTILE}"]
    time.sleep(0.5)  # an image's error handler would have run by now
    assert page.execute_script("return typeof window.__pwned;") == "undefined"
    assert (
        page.execute_script(
            "return document.querySelectorAll('main img, main script, main a, main b').length;"
        )
        == 0
    )
    assert violations(page) == []
    # The recorder works: a string reaching a script sink is refused and reported.
    page.execute_script(
        "try { document.body.insertAdjacentHTML('beforeend', '<i>x</i>'); } catch (e) {}"
    )
    assert any("trusted-types" in v for v in violations(page)), violations(page)


T0 = 1_764_000_000_000
"""When the turn of `every_type` starts (ms)."""


def every_type(store: Store) -> list[tuple[str, str]]:
    """After the scenario's question (seq 1) and fault (seq 2), an event of every other type in
    s-1 (seqs 3 to 11); the alert word and the one line each must read as, oldest first."""
    turn = ApiActivityDetails(kind=ApiActivityKind.TURN, label="fix the failing test")
    working = ApiActivityState(
        state="busy", details=turn, is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    idle = dataclasses.replace(
        working, details=ApiActivityDetails(kind=ApiActivityKind.IDLE), is_idle=True
    )

    def ended(command: str, outcome: CommandResultKind, why: OutcomeReason, text: str) -> Any:
        result = CommandResult(
            owner=CommandOwner.DAEMON,
            command_id=command,
            command_kind="checkpoint",
            outcome=outcome,
            reason=why,
            message=text,
        )
        return CommandEnded(result=result)

    def turn_ended(kind: TurnResultKind, stop: str | None, message: str | None = None) -> Any:
        outcome = TurnOutcome(kind=kind, stop_reason=stop, message=message)
        return TurnEnded(
            turn=ApiTurnOutcome(command_id="prompt-7", accepted_ordinal=3, outcome=outcome)
        )

    bodies = [
        (
            0,
            TurnStarted(turn_id=3, command_id="prompt-7", started_at_ms=T0),
            "",
            "turn 3 started · prompt-7",
        ),
        (1_000, ActivityChanged(activity=working), "", "activity · turn: fix the failing test"),
        (
            2_000,
            InputResolved(elicitation_id="question-1", action="accept", turn_id=3),
            "",
            "answered · accept",
        ),
        (
            41_000,
            turn_ended(TurnResultKind.COMPLETED, "end_turn"),
            "",
            "turn 3 ended · completed (end_turn) · after 41 s",
        ),
        (
            42_000,
            ActivityChanged(activity=idle),
            "",
            "activity · idle · was turn: fix the failing test",
        ),
        (
            43_000,
            ended(
                "checkpoint-2",
                CommandResultKind.REJECTED,
                OutcomeReason.CHECKPOINT_DEFERRED,
                "a turn is in progress",
            ),
            "rejected",
            "checkpoint-2 rejected · checkpoint deferred: a turn is in progress",
        ),
        (
            44_000,
            ended(
                "checkpoint-3",
                CommandResultKind.FAILED,
                OutcomeReason.CHECKPOINT_FAILED,
                "disk full",
            ),
            "failed",
            "checkpoint-3 failed · checkpoint failed: disk full",
        ),
        (
            45_000,
            turn_ended(TurnResultKind.FAILED, None, "the agent exited"),
            "failed",
            "turn 3 ended · failed · after 45 s · the agent exited",
        ),
        (
            46_000,
            LegacyNotice(original_type="session_restarted", message="kept from an older version"),
            "",
            "legacy session_restarted · kept from an older version",
        ),
    ]
    with store.unit_of_work() as uow:
        for after, body, _, _ in bodies:
            uow.events.append("s-1", T0 + after, body.model_dump_json())
        uow.commit()
    return [
        ("", "question · Which directory?"),
        ("fault", "fault · startup failed: the image is missing"),
        *[(alert, text) for _, _, alert, text in bodies],
    ]


def summaries(driver: Any) -> list[list[str]]:
    """Each feed row's alert badge and one line, oldest first."""
    found: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#feed tbody tr')].reverse().map((r) => ["
        "(r.querySelector('.badge') || {textContent: ''}).textContent,"
        "r.querySelector('.summary-text').textContent]);"
    )
    return found


def test_each_event_reads_as_one_line_for_its_type_and_its_json_is_one_click_away(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    expected = every_type(writer)
    answer = httpx.get(live.base + "/api/events?after_seq=0&limit=100", headers=bearer())
    stored = answer.json()["events"]
    assert {item["event"]["type"] for item in stored} == set(EVENT_TYPES)  # every type is here
    open_page(page, live.base + "/?view=feed")
    assert summaries(page) == [[f"⚠ {alert}" if alert else "", text] for alert, text in expected]
    marked = page.execute_script(
        "return [...document.querySelectorAll('#feed tbody tr.alert')].map((r) => +r.dataset.seq);"
    )
    assert marked == [10, 9, 8, 2]  # in words (the badge) and in colour (the row's class)
    # Its rows are laid out as a grid (see below), and still read as a table (explicit roles).
    fault_row = page.find_element("css selector", '#feed tbody tr[data-seq="2"]')
    assert page.find_element("css selector", "#feed table").aria_role == "table"
    assert fault_row.aria_role == "row"
    assert fault_row.find_element("css selector", "td").aria_role == "cell"
    assert page.find_element("css selector", "#feed thead th").aria_role == "columnheader"
    # The fault's JSON expands in place and is the event as served.
    served = httpx.get(live.base + "/api/events?after_seq=1&limit=1", headers=bearer()).json()
    row = "document.querySelector('#feed tbody tr[data-seq=\"2\"]')"
    assert page.execute_script(f"return {row}.querySelector('details.json').open;") is False
    # Closed, a row holds no node of its JSON (written when first opened).
    unopened = f"return {row}.querySelector('pre.json, details.json button');"
    assert page.execute_script(unopened) is None
    page.find_element("css selector", '#feed tbody tr[data-seq="2"] details.json summary').click()
    wait_for(
        lambda: page.execute_script(f"return {row}.querySelector('pre.json') !== null;"),
        5,
        "the JSON shown",
    )
    text = page.execute_script(f"return {row}.querySelector('pre.json').textContent;")
    assert json.loads(text) == served["events"][0]
    page.find_element("css selector", '#feed tbody tr[data-seq="2"] details.json button').click()
    assert page.execute_script("return getSelection().toString();").strip() == text.strip()
    # A live event is summarized too, with what the page holds (the turn it ends started).
    with writer.unit_of_work() as uow:
        ending = TurnEnded(
            turn=ApiTurnOutcome(
                command_id="prompt-7",
                accepted_ordinal=3,
                outcome=TurnOutcome(
                    kind=TurnResultKind.INTERRUPTED, reason=OutcomeReason.CONTROLLER_RESTARTED
                ),
            )
        )
        uow.events.append("s-1", T0 + 90_000, ending.model_dump_json())
        uow.commit()
    wait_for(lambda: rows(page)[0] == 12, LIVE_S, "the live event")
    assert summaries(page)[-1] == [
        "",
        "turn 3 ended · interrupted · after 1 min 30 s · controller restarted",
    ]
    # Nothing older than these twelve is retained: "Load older" says so.
    older = page.find_element("css selector", "#feed > button")
    assert older.text == "Nothing older is retained" and not older.is_enabled()
    page.execute_script("getSelection().removeAllRanges(); window.scrollTo(0, 0);")
    screenshot(page, "feed", tmp_path)
    assert violations(page) == []


def rate_bars(driver: Any) -> list[int]:
    """The feed's rate chart: each minute's count, oldest first."""
    found: list[int] = driver.execute_script(
        "return [...document.querySelectorAll('#feed-rate rect')].map((r) => +r.dataset.count);"
    )
    return found


def test_the_feed_charts_the_event_rate_and_it_moves_as_events_arrive(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    open_page(page, live.base + "/?view=feed&session=s-1")  # the filters do not apply to it
    wait_for(lambda: len(rate_bars(page)) == 15, 5, "the chart")
    served = httpx.get(live.base + "/api/events/rate", headers=bearer()).json()["counts"]
    assert sum(rate_bars(page)) == sum(served) == 1  # the fault of s-2, recorded now
    append_raw(writer, "s-2", fault("counted live"), count=3)  # recorded at 1: not counted
    with writer.unit_of_work() as uow:
        for _ in range(4):
            uow.events.append("s-2", now_ms(), fault("this minute"))
        uow.commit()
    wait_for(lambda: sum(rate_bars(page)) == 5, LIVE_S, "the live events counted")
    time.sleep(0.2)
    assert sum(rate_bars(page)) == 5 and rows(page) == [1]  # the feed itself keeps its filter
    titles = page.execute_script(
        "return [...document.querySelectorAll('#feed-rate title')].map((t) => t.textContent);"
    )
    assert len(titles) == 15
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC: \d+ events?", t) for t in titles)
    assert violations(page) == []  # drawn under the page's policy (Trusted Types included)


def timeline(driver: Any) -> list[dict[str, Any]]:
    """The session's timeline: each turn and mark, in time order (its class, width, and the
    summary it shows)."""
    found: list[dict[str, Any]] = driver.execute_script(
        "return [...document.querySelectorAll('#session-timeline g[data-key]')].map((g) => ({"
        "kind: g.getAttribute('class'), width: +(g.dataset.width || 0),"
        "label: g.getAttribute('aria-label'), sign: (g.querySelector('text') || {}).textContent"
        " || ''}));"
    )
    return found


def test_a_session_s_timeline_draws_its_turns_and_marks_and_a_running_turn_grows(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    writer.sessions.save(SessionRecord(id="s-t", project_id="p", state="running"))
    now = now_ms()

    def ended(turn: int, kind: TurnResultKind) -> str:
        outcome = TurnOutcome(kind=kind, stop_reason="end_turn")
        return TurnEnded(
            turn=ApiTurnOutcome(command_id=f"c-{turn}", accepted_ordinal=turn, outcome=outcome)
        ).model_dump_json()

    def started(turn: int, at: int) -> str:
        return TurnStarted(turn_id=turn, command_id=f"c-{turn}", started_at_ms=at).model_dump_json()

    with writer.unit_of_work() as uow:
        for at, body in [
            (now - 120_000, started(1, now - 120_000)),
            (now - 100_000, ended(1, TurnResultKind.COMPLETED)),
            (now - 90_000, fault("image pull failed")),
            (now - 60_000, started(2, now - 60_000)),
            (now - 50_000, ended(2, TurnResultKind.FAILED)),
            (now - 10_000, started(3, now - 10_000)),
        ]:
            uow.events.append("s-t", at, body)
        uow.commit()
    open_page(page, live.base + "/?view=session&id=s-t")
    wait_for(lambda: len(timeline(page)) == 4, 5, "the timeline")
    drawn = timeline(page)
    assert [item["kind"] for item in drawn] == [
        "turn completed",
        "mark fault alert",
        "turn failed",
        "turn running",
    ]
    assert drawn[2]["sign"] == "!" and drawn[1]["sign"] == "!"  # not by colour alone
    assert drawn[1]["label"].endswith(" · fault · startup failed: image pull failed")
    assert " · turn 1 ended · completed (end_turn) · after 20 s" in drawn[0]["label"]
    assert re.search(r" · turn 3 running · for \d+ s so far$", drawn[3]["label"])
    # The running turn grows with the clock.
    grown = wait_for(
        lambda: timeline(page)[3]["width"] > drawn[3]["width"] + 5 and timeline(page), 5, "growth"
    )
    assert [item["width"] for item in grown[:3]] == [item["width"] for item in drawn[:3]]
    # Keyboard: Tab onto the first, then → to the next; each says what it is.
    page.execute_script(
        "document.querySelector('#session-timeline g[data-key]').focus();"
        "document.querySelector('#session-timeline svg').dispatchEvent("
        "new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}));"
    )
    detail = page.execute_script("return document.querySelector('.timeline-detail').textContent;")
    assert detail == timeline(page)[1]["label"]
    focused = page.execute_script("return document.activeElement.getAttribute('class');")
    assert focused == "mark fault alert"
    stops = page.execute_script(
        "return [...document.querySelectorAll('#session-timeline g[data-key]')]"
        ".map((g) => g.getAttribute('tabindex'));"
    )
    assert stops == ["-1", "0", "-1", "-1"]  # one Tab stop: the item focused last
    time.sleep(1.5)  # the running turn grew meanwhile: the focus stayed where it was
    assert page.execute_script("return document.activeElement.getAttribute('class');") == focused
    # The running turn ends: its bar says how, at once.
    with writer.unit_of_work() as uow:
        uow.events.append("s-t", now_ms(), ended(3, TurnResultKind.COMPLETED))
        uow.commit()
    wait_for(lambda: timeline(page)[-1]["kind"] == "turn completed", LIVE_S, "the end, live")
    screenshot(page, "session-timeline", tmp_path)
    assert violations(page) == []  # drawn under the page's policy (Trusted Types included)


def test_a_timeline_of_many_turns_shows_the_newest_and_earlier_ones_on_demand(
    page: Any, live: LiveServer, writer: Store
) -> None:
    writer.sessions.save(SessionRecord(id="s-many", project_id="p", state="running"))
    start = now_ms() - 3_600_000
    with writer.unit_of_work() as uow:
        for turn in range(1, 61):
            at = start + turn * 30_000
            body = TurnStarted(turn_id=turn, command_id=f"c-{turn}", started_at_ms=at)
            uow.events.append("s-many", at, body.model_dump_json())
            outcome = TurnOutcome(kind=TurnResultKind.COMPLETED)
            ending = TurnEnded(
                turn=ApiTurnOutcome(command_id=f"c-{turn}", accepted_ordinal=turn, outcome=outcome)
            )
            uow.events.append("s-many", at + 20_000, ending.model_dump_json())
        uow.commit()
    open_page(page, live.base + "/?view=session&id=s-many")

    def caption() -> str:
        text: str = page.execute_script(
            "return document.querySelector('#session-timeline figcaption').textContent;"
        )
        return text

    wait_for(lambda: "turns 11 to 60 of the 60 held" in caption(), 5, "the newest fifty")
    assert len(timeline(page)) == 50
    page.find_element("css selector", "#session-timeline figcaption button").click()
    wait_for(lambda: "turns 1 to 10 of the 60 held" in caption(), 5, "the earlier ten")
    assert len(timeline(page)) == 10
    buttons = page.find_elements("css selector", "#session-timeline figcaption button")
    assert [b.is_enabled() for b in buttons] == [False, True]
    buttons[1].click()
    wait_for(lambda: "turns 11 to 60" in caption(), 5, "back to the newest")
    assert violations(page) == []


def consumer_rows(driver: Any) -> list[list[str]]:
    """The consumers view's rows: name, state's class, state in words, holder, sparkline."""
    found: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#consumers tbody tr')].map((r) => ["
        "r.dataset.name, r.className, r.querySelector('.consumer-state').textContent,"
        "r.children[4].textContent, r.querySelector('polyline').getAttribute('points')]);"
    )
    return found


def test_the_consumers_view_says_which_consumer_is_stuck_and_draws_its_lag(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    writer.consumers.register("projector", start="now", stuck_after_s=1)
    writer.consumers.register("mailer", start="now")
    lease = writer.consumers.acquire("mailer", "host-a", ttl_s=60)
    with writer.unit_of_work() as uow:
        for _ in range(3):
            uow.events.append("s-2", now_ms(), fault("waiting for the projector"))
        uow.commit()
    writer.consumers.ack("mailer", writer.events.latest_seq(), lease=lease)
    time.sleep(1.2)  # the projector has not acked for longer than its 1 s
    open_page(page, live.base + "/?view=consumers")
    wait_for(lambda: len(consumer_rows(page)) == 2, 5, "the consumers")
    by_name = {row[0]: row for row in consumer_rows(page)}
    assert by_name["projector"][1:3] == [
        "consumer stuck",
        "⚠ stuckno ack for over 1 s while 3 events wait",
    ]
    assert by_name["mailer"][1:4] == ["consumer caught-up", "caught up", "host-a · generation 1"]
    # Each poll adds a point to the lag's sparkline.
    wait_for(lambda: len(consumer_rows(page)[0][4].split()) >= 2, 12, "a second poll")
    screenshot(page, "consumers", tmp_path)
    assert violations(page) == []


def test_times_show_their_zone_and_follow_the_zone_chosen_in_any_tab(
    page: Any, live: LiveServer, writer: Store
) -> None:
    every_type(writer)
    kolkata = {"timezoneId": "Asia/Kolkata"}  # the browser's zone (each tab is told)
    first = page.current_window_handle
    page.execute_cdp_cmd("Emulation.setTimezoneOverride", kolkata)
    try:
        open_page(page, live.base + "/?view=feed")
        cell = "document.querySelector('#feed tbody tr[data-seq=\"3\"] td.when')"
        assert page.execute_script(f"return {cell}.textContent;") == "2025-11-24 16:00:00 UTC"
        assert page.execute_script(f"return {cell}.querySelector('time').title;") == (
            "2025-11-24 16:00:00.000 UTC"
        )
        zone = page.find_element("id", "time-zone")
        assert zone.get_attribute("value") == "utc"
        assert Select(zone).options[1].text == "this browser's (UTC+05:30)"
        Select(zone).select_by_value("local")
        assert page.execute_script(f"return {cell}.textContent;") == (
            "2025-11-24 21:30:00 UTC+05:30"
        )
        page.switch_to.new_window("tab")  # another tab keeps the choice
        page.execute_cdp_cmd("Emulation.setTimezoneOverride", kolkata)
        open_page(page, live.base + "/?view=feed", token=False)
        assert page.execute_script(f"return {cell}.textContent;") == (
            "2025-11-24 21:30:00 UTC+05:30"
        )
        # Relative times where they read better: the sessions were created just now.
        open_page(page, live.base + "/?view=sessions", token=False)
        created = page.execute_script(
            "return [...document.querySelectorAll('#sessions time')].map((t) => t.textContent);"
        )
        assert created and all(re.fullmatch(r"just now|\d+ s ago", text) for text in created)
        Select(page.find_element("id", "time-zone")).select_by_value("utc")  # UTC again...
        page.switch_to.window(first)  # ...in the first tab too, at once
        wait_for(
            lambda: page.execute_script(f"return {cell}.textContent;").endswith(" UTC"),
            5,
            "the other tab's choice",
        )
        assert violations(page) == []
    finally:
        page.switch_to.window(first)
        page.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_the_zone_chosen_holds_where_storage_refuses_to_keep_it(
    page: Any, live: LiveServer, writer: Store
) -> None:
    refuse = (
        "Storage.prototype.setItem = () => { throw new DOMException('no', 'QuotaExceededError'); };"
    )
    script = page.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": refuse})
    page.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    try:
        open_page(page, live.base + "/?view=feed")
        Select(page.find_element("id", "time-zone")).select_by_value("local")
        append_raw(writer, "s-1", fault("after choosing local"))
        wait_for(lambda: rows(page)[0] == 3, LIVE_S, "the new row")
        shown = page.execute_script(
            "return [...document.querySelectorAll('#feed td.when')].map((t) => t.textContent);"
        )
        assert [text.rpartition(" ")[2] for text in shown] == ["UTC+05:30"] * 3
    finally:
        page.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", script)
        page.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_load_older_while_live_rows_drop_off_leaves_no_hole_and_no_double(
    page: Any, live: LiveServer, writer: Store
) -> None:
    append_raw(writer, "s-1", fault("old"), count=300)
    slow = """
      const original = window.fetch;
      window.fetch = (...args) => {
        const text = String(args[0]);
        const older = text.includes('before_seq=') && !text.includes('before_seq=9007199254740991');
        return older ? new Promise((r) => setTimeout(r, 2000)).then(() => original(...args))
          : original(...args);
      };"""  # pages of history answer 2 s late
    script = page.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": slow})
    try:
        open_page(page, live.base + "/?view=feed")
        append_raw(writer, "s-1", fault("live"), count=900)
        wait_for(lambda: len(rows(page)) == 1000, 20, "1,000 rows")
        # Rows out of sight are not rendered (the browser skips their style, layout and paint)
        # until scrolled to: a thousand rows cost what those in sight cost.
        seen = (
            "return [...document.querySelectorAll('#feed tbody td.what')]"
            ".map((cell) => cell.checkVisibility({contentVisibilityAuto: true}));"
        )
        wait_for(lambda: page.execute_script(seen)[0], 5, "the newest row rendered")
        assert not page.execute_script(seen)[-1]
        page.execute_script("document.querySelector('#feed tbody tr:last-child').scrollIntoView();")
        wait_for(lambda: page.execute_script(seen)[-1], 5, "the last row rendered once in sight")
        older = page.find_element("css selector", "#feed > button")
        wait_for(older.is_enabled, 5, "Load older enabled")
        bottom = rows(page)[-1]
        older.click()
        append_raw(writer, "s-1", fault("more live"), count=50)  # the bottom rows drop off
        wait_for(lambda: rows(page)[-1] > bottom, 5, "rows dropped")
        assert not older.is_enabled()  # the page on its way decides
        wait_for(older.is_enabled, 5, "the late page dropped")
        shown = rows(page)
        assert shown == list(range(shown[0], shown[0] - 1000, -1))  # each once, no hole
        older.click()  # from the new bottom
        wait_for(lambda: len(rows(page)) == 1000 and rows(page)[-1] < shown[-1], 5, "older")
        shown = rows(page)
        assert shown == list(range(shown[0], shown[0] - 1000, -1))
    finally:
        page.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", script)


def test_an_unknown_session_is_not_found_and_empty_views_say_so_in_words(
    page: Any, live: LiveServer, writer: Store
) -> None:
    open_page(page, live.base + "/?view=session&id=no-such-session")
    wait_for(lambda: "Not found" in text_of(page, "session"), 5, "not found")
    assert text_of(page, "error") == ""
    assert page.title == "not found · session-journal"
    open_page(page, live.base + "/?view=feed&type=turn_started", token=False)
    wait_for(lambda: "No retained events match these filters." in text_of(page, "feed"), 5, "empty")
    writer.sessions.save(SessionRecord(id="s-9", project_id="p"))
    open_page(page, live.base + "/?view=session&id=s-9", token=False)
    wait_for(lambda: "No transcript items yet." in text_of(page, "session"), 5, "no items")
    assert "None." in text_of(page, "session")  # no pending question
    assert violations(page) == []


def test_keys_move_between_views(page: Any, live: LiveServer) -> None:
    open_page(page, live.base + "/?view=sessions")
    body = page.find_element("css selector", "body")
    body.send_keys("f")
    wait_for(lambda: "view=feed" in page.current_url, 5, "f: the feed")
    assert page.find_element("id", "nav-feed").get_attribute("aria-current") == "page"
    body.send_keys("s")
    wait_for(lambda: "view=sessions" in page.current_url, 5, "s: the sessions")
    body.send_keys("/")
    assert page.switch_to.active_element.get_attribute("id") == "search-box"
    page.switch_to.active_element.send_keys("sf")  # typed into the box: no view changes
    assert "view=sessions" in page.current_url


def test_a_phone_shows_every_view_with_no_horizontal_scrolling(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    every_type(writer)
    busier(writer)
    metrics = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        for view, element in (
            ("sessions", "sessions"),
            ("feed", "feed"),
            ("session&id=s-1", "session"),
            ("search&q=deploy", "search"),
        ):
            open_page(page, live.base + f"/?view={view}")
            wait_for(lambda e=element: text_of(page, e) != "", 5, view)
            time.sleep(0.3)  # the view's first page drawn
            widths = page.execute_script(
                "const d = document.documentElement; return [d.scrollWidth, d.clientWidth];"
            )
            assert widths[0] <= widths[1], (view, widths)
            if view == "feed":
                screenshot(page, "feed-phone", tmp_path)
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_secrets_show_redacted_in_the_transcript_and_the_feed(
    page: Any, live: LiveServer, writer: Store
) -> None:
    writer.sessions.save(SessionRecord(id="s-3", project_id="p", workspace_id="w-1"))
    said = [AgentMessage(message_id=f"m-{n}", text=text) for n, text in enumerate(LEAKS)]
    writer.projection.apply("s-3", RelayChain().extend(said, recorded_at_ms=100))
    for text in LEAKS:
        append_raw(writer, "s-3", fault(text))  # seqs 3 to 11
    open_page(page, live.base + "/?view=session&id=s-3")
    wait_for(lambda: "[REDACTED]" in text_of(page, "session"), 5, "the transcript, redacted")
    shown = page.execute_script(
        "return [...document.querySelectorAll('#session .transcript .text')]"
        ".map((n) => n.textContent);"
    )
    assert sorted(shown) == sorted(LEAKS.values())
    assert [secret for secret in SECRETS if secret in text_of(page, "session")] == []

    open_page(page, live.base + "/?view=feed", token=False)
    assert rows(page)[:9] == list(range(11, 2, -1))
    append_raw(writer, "s-3", fault(next(iter(LEAKS))))  # seq 12, live: the hub's frame
    wait_for(lambda: rows(page)[0] == 12, LIVE_S, "the live event on the feed")
    feed = text_of(page, "feed")
    assert "the key is [REDACTED]" in feed and "password=[REDACTED]" in feed
    assert [secret for secret in SECRETS if secret in feed] == []
    assert violations(page) == []


def test_a_pruned_cursor_says_which_seqs_went_and_the_page_recovers(
    page: Any, live: LiveServer, writer: Store, tmp_path: Path
) -> None:
    open_page(page, live.base + "/?view=feed")
    assert rows(page) == [2, 1] and streams(live.base) == 1
    set_hidden(page, True)  # every tab hidden: the stream closes after the delay (2 s here)
    wait_for(lambda: streams(live.base) == 0, 10, "the stream closed while hidden")
    assert connection(page) == "paused"
    append_raw(writer, "s-1", fault("pruned"), count=2)  # seqs 3 and 4
    append_raw(writer, "s-2", fault("kept"))  # seq 5
    writer.events.prune(through_seq=4)
    set_hidden(page, False)  # shown: the stream opens from seq 2, which was pruned
    wait_for(lambda: "Events 3\u20134 were pruned" in text_of(page, "notice"), 10, "the notice")
    wait_for(lambda: connection(page) == "live", 10, "live again")
    wait_for(lambda: rows(page) == [5], 5, "the feed reloaded")
    assert streams(live.base) == 1
    append_raw(writer, "s-2", fault("after the recovery"))  # seq 6
    wait_for(lambda: rows(page) == [6, 5], LIVE_S, "live after the recovery")
    screenshot(page, "expired", tmp_path)
    assert violations(page) == []


def test_filters_in_the_url_survive_a_reload_and_apply_to_live_events(
    page: Any, live: LiveServer, writer: Store
) -> None:
    writer.sessions.save(
        SessionRecord(id="s-2", project_id="p", workspace_id="w-2", state=SessionState.ERROR)
    )
    open_page(page, live.base + "/?view=sessions&state=error&workspace=w-2")
    counts = "#sessions .counts"
    for _ in range(2):  # as loaded, then after a reload
        wait_for(lambda: "s-2" in text_of(page, "sessions"), 5, "the filtered list")
        assert "s-1" not in text_of(page, "sessions")
        wait_for(
            lambda: (
                page.execute_script(f"return document.querySelector('{counts}').textContent;")
                == "1 session: 1 error"
            ),
            5,
            "w-2's counts",
        )
        pressed = page.execute_script(
            f"return [...document.querySelectorAll('{counts} button')].map((b) => b.ariaPressed);"
        )
        assert pressed == ["true"]  # the state filtered on
        assert page.execute_script(
            "return [...document.querySelectorAll('#sessions select, #sessions input')]"
            ".map((n) => n.value);"
        ) == ["error", "w-2"]
        page.refresh()
    select = wait_for(  # the page draws its view after it loaded
        lambda: page.find_element("css selector", "#sessions select"), 5, "the filters again"
    )
    select.send_keys("provisioning")  # a change applies at once
    wait_for(lambda: "state=provisioning" in page.current_url, 5, "the URL follows the filter")
    wait_for(lambda: "No sessions match." in text_of(page, "sessions"), 5, "none in w-2")

    for name in ("constructor", "__proto__", "toString"):  # not views: the sessions list
        open_page(page, live.base + f"/?view={name}", token=False)
        wait_for(lambda: "s-1" in text_of(page, "sessions"), 5, f"view={name}")

    open_page(page, live.base + "/?view=feed&session=s-2&type=session_fault", token=False)
    assert rows(page) == [2]
    page.refresh()
    wait_for(lambda: connection(page) == "live", 10, "live after the reload")
    assert rows(page) == [2]
    append_raw(writer, "s-1", fault("another session"))  # seq 3: filtered out
    append_raw(writer, "s-2", fault("this session"))  # seq 4
    wait_for(lambda: rows(page) == [4, 2], LIVE_S, "the live event the filter admits")


def test_seven_tabs_share_one_stream_and_another_takes_it_over(
    page: Any, live: LiveServer, writer: Store
) -> None:
    open_page(page, live.base + "/?view=feed")
    tabs = [page.current_window_handle]
    for _ in range(6):
        page.switch_to.new_window("tab")
        open_page(page, live.base + "/?view=feed", token=False)
        tabs.append(page.current_window_handle)
    assert streams(live.base) == 1
    for seq, holders in ((3, tabs), (4, tabs[1:])):
        append_raw(writer, "s-1", fault(f"seen by {len(holders)} tabs"))
        deadline = time.monotonic() + LIVE_S
        for tab in holders:
            page.switch_to.window(tab)
            left = max(0.05, deadline - time.monotonic())
            wait_for(lambda s=seq: rows(page)[0] == s, left, f"seq {seq} in every tab")
        if seq == 3:  # the first tab holds the stream: close it, another tab takes it over
            page.switch_to.window(tabs[0])
            page.get("about:blank")
            page.switch_to.window(tabs[1])
            wait_for(lambda: streams(live.base) == 1, 10, "one stream after the takeover")


@contextmanager
def in_thread(page: Any, app: Any, feed: Any) -> Iterator[str]:
    """`app` (holding `feed`, made by `create_app`) served by uvicorn in a thread; its address.
    Afterwards the page is left and `feed`'s streams are closed, so that the server stops."""
    with ThreadServer(app) as server:
        try:
            yield server.base
        finally:
            page.get("about:blank")
            asyncio.run_coroutine_threadsafe(shutdown_streams(feed), server.loop).result(10)


def test_the_page_under_a_mount_prefix(page: Any, writer: Store) -> None:
    feed = create_app(writer, WebSettings(tokens={ADMIN: None}))
    with in_thread(page, Starlette(routes=[Mount("/journal", app=feed)]), feed) as base:
        open_page(page, base + "/journal/?view=feed")
        assert rows(page) == [2, 1]
        append_raw(writer, "s-1", fault("under a prefix"))
        wait_for(lambda: rows(page) == [3, 2, 1], LIVE_S, "live under the prefix")
        page.find_element("id", "nav-sessions").click()
        wait_for(lambda: "s-2" in text_of(page, "sessions"), 5, "sessions under the prefix")
        assert page.current_url == base + "/journal/?view=sessions"
        assert violations(page) == []


def test_outside_a_secure_context_the_page_goes_live_with_a_stream_per_tab(
    page: Any, writer: Store
) -> None:
    # Plain HTTP to a name that is not loopback (a LAN address): no crypto.randomUUID, no Web
    # Locks. The traffic stays on loopback: the browser maps the name to 127.0.0.1.
    feed = create_app(writer, WebSettings(tokens={ADMIN: None}, allowed_hosts=(INSECURE_HOST,)))
    with in_thread(page, feed, feed) as base:
        port = base.rpartition(":")[2]
        address, host = f"http://{INSECURE_HOST}:{port}", f"{INSECURE_HOST}:{port}"
        open_page(page, address + "/?view=feed")
        assert page.execute_script(
            "return [window.isSecureContext, typeof crypto.randomUUID, !!navigator.locks];"
        ) == [False, "undefined", False]
        assert rows(page) == [2, 1]
        assert page.get_cookie(f"session_journal_token_{port}")["value"] == ADMIN
        tabs = [page.current_window_handle]
        page.switch_to.new_window("tab")
        open_page(page, address + "/?view=feed", token=False)  # signed in by the cookie
        tabs.append(page.current_window_handle)
        assert streams(base, host) == 2  # without Web Locks, each tab holds its own stream
        append_raw(writer, "s-1", fault("outside a secure context"))
        deadline = time.monotonic() + LIVE_S
        for tab in tabs:
            page.switch_to.window(tab)
            left = max(0.05, deadline - time.monotonic())
            wait_for(lambda: rows(page) == [3, 2, 1], left, "the new event in every tab")
            assert "outside a secure context" in text_of(page, "feed")
        page.switch_to.window(tabs[0])  # the tab the recorder is in
        assert violations(page) == []


def test_two_servers_on_two_ports_keep_the_page_signed_in_to_each(
    page: Any, writer: Store, migrated_url: str, tmp_path: Path
) -> None:
    other = "c" * 43
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    with (
        LiveServer(migrated_url, first_dir, token_lines=f"{ADMIN}\n") as first,
        LiveServer(migrated_url, second_dir, token_lines=f"{other}\n") as second,
    ):
        open_page(page, first.base + "/?view=feed")
        open_page(page, second.base + "/?view=feed", fragment=other)
        # Cookies ignore ports: each server's is named by its own.
        assert page.get_cookie(f"session_journal_token_{first.port}")["value"] == ADMIN
        assert page.get_cookie(f"session_journal_token_{second.port}")["value"] == other
        for server in (first, second, first):  # signed in by the cookie alone, each time
            open_page(page, server.base + "/?view=sessions", token=False)
            wait_for(lambda: "s-2" in text_of(page, "sessions"), 5, "the sessions")
        assert refusals(first.base) == 0
        other_status = httpx.get(second.base + "/api/status", headers=bearer(other)).json()
        assert other_status["auth_failures"] == 0


def test_a_restart_with_another_token_added_keeps_the_page_signed_in(
    page: Any, writer: Store, migrated_url: str, tmp_path: Path
) -> None:
    added = "c" * 43
    with LiveServer(migrated_url, tmp_path, token_lines=f"{ADMIN}\n") as before:
        open_page(page, before.base + "/?view=feed")
        port = before.port
        assert before.terminate() == 0
        wait_for(lambda: connection(page) == "reconnecting", 10, "the stream lost")
    # The same server again, a token added (a rotation under way): the page's cookie, of the
    # same name, still holds a valid token.
    with LiveServer(migrated_url, tmp_path, port=port, token_lines=f"{added}\n{ADMIN}\n") as after:
        wait_for(lambda: connection(page) == "live", 15, "live again without signing in")
        append_raw(writer, "s-1", fault("after the restart"))
        wait_for(lambda: rows(page) == [3, 2, 1], LIVE_S, "the new event")
        assert text_of(page, "login") == "" and refusals(after.base) == 0


def test_without_a_token_in_the_url_the_page_asks_for_it(
    page: Any, live: LiveServer, tmp_path: Path
) -> None:
    page.get(live.base + "/?view=session&id=s-1")
    wait_for(lambda: connection(page) == "signed out", 10, "signed out")
    assert "needs its token" in text_of(page, "login")
    assert refusals(live.base) == 1  # one request, then nothing until signed in
    time.sleep(REFRESH_S + 1)  # no refresh either (a polling page would lock its address out)
    assert refusals(live.base) == 1
    page.find_element("id", "login-token").send_keys("x" * 43 + "\n")
    wait_for(lambda: "valid token" in text_of(page, "login-error"), 5, "the refusal shown")
    screenshot(page, "login", tmp_path)
    field = page.find_element("id", "login-token")
    field.clear()
    field.send_keys(ADMIN + "\n")
    wait_for(lambda: connection(page) == "live", 10, "live once signed in")
    assert "Which directory?" in text_of(page, "session") and text_of(page, "login") == ""
    assert violations(page) == []


def test_a_stale_token_in_the_url_then_signing_in_goes_live(
    page: Any, live: LiveServer, writer: Store
) -> None:
    page.get(live.base + "/?view=feed#token=" + "x" * 43)  # a link from before a token change
    wait_for(lambda: connection(page) == "signed out", 10, "signed out")
    page.find_element("id", "login-token").send_keys(ADMIN + "\n")
    wait_for(lambda: connection(page) == "live", 10, "live once signed in")
    append_raw(writer, "s-2", fault("after signing in"))
    wait_for(lambda: rows(page)[:1] == [3], LIVE_S, "live events")
    page.get(live.base + "/?view=sessions#token=" + "y" * 43)  # a stale link, a valid cookie
    wait_for(lambda: connection(page) == "live", 10, "live on the earlier cookie")
    assert "The token in the address was refused" in text_of(page, "notice")


def history_urls(driver: Any) -> list[str]:
    """The addresses of the tab's history entries (over the DevTools protocol)."""
    entries = driver.execute_cdp_cmd("Page.getNavigationHistory", {})["entries"]
    return [entry["url"] for entry in entries]


def fresh_tab(driver: Any) -> None:
    """A new tab, its history of its own, with the violation recorder."""
    driver.switch_to.new_window("tab")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": VIOLATION_RECORDER})


def paste_link(driver: Any, fragment: str) -> None:
    """The printed link's fragment pasted into the open tab's address bar: only the fragment
    changes, so the page is not loaded again."""
    driver.execute_script("location.hash = arguments[0];", fragment)


def test_the_printed_link_pasted_into_a_signed_out_tab_signs_it_in(
    page: Any, live: LiveServer, writer: Store
) -> None:
    fresh_tab(page)
    page.get(live.base + "/?view=feed")
    wait_for(lambda: connection(page) == "signed out", 10, "signed out")
    page.execute_script("window.__same_document = true;")
    paste_link(page, f"#token={ADMIN}")
    wait_for(lambda: connection(page) == "live", 10, "live once the link was pasted")
    assert page.execute_script("return window.__same_document;") is True  # never reloaded
    assert rows(page) == [2, 1] and text_of(page, "login") == ""
    assert page.current_url == live.base + "/?view=feed"
    assert page.execute_script("return location.hash;") == ""
    assert [url for url in history_urls(page) if ADMIN in url] == []
    assert page.get_cookie(f"session_journal_token_{live.port}")["value"] == ADMIN
    append_raw(writer, "s-1", fault("after the pasted link"))
    wait_for(lambda: rows(page) == [3, 2, 1], LIVE_S, "live events")
    assert refusals(live.base) == 1  # the signed-out page's one request
    assert violations(page) == []


def test_a_bad_link_then_the_right_one_pasted_into_the_tab_signs_it_in(
    page: Any, live: LiveServer
) -> None:
    stale = "x" * 43
    fresh_tab(page)
    page.get(live.base + "/?view=feed")
    wait_for(lambda: connection(page) == "signed out", 10, "signed out")
    paste_link(page, f"#token={stale}")
    wait_for(
        lambda: text_of(page, "login-error").startswith("The token in the address was refused: "),
        5,
        "the refusal shown",
    )
    assert connection(page) == "signed out" and page.current_url == live.base + "/?view=feed"
    paste_link(page, f"#token={ADMIN}")
    wait_for(lambda: connection(page) == "live", 10, "live once the right link was pasted")
    assert rows(page) == [2, 1] and text_of(page, "login") == ""
    assert page.current_url == live.base + "/?view=feed"
    assert [url for url in history_urls(page) if ADMIN in url or stale in url] == []
    assert refusals(live.base) == 2  # the signed-out page's request and the bad token


def test_a_fresh_load_of_the_printed_link_signs_in_and_drops_the_token(
    page: Any, live: LiveServer
) -> None:
    fresh_tab(page)
    open_page(page, live.base + "/?view=feed")
    assert rows(page) == [2, 1]
    assert page.current_url == live.base + "/?view=feed"
    assert history_urls(page) == ["about:blank", live.base + "/?view=feed"]
    assert refusals(live.base) == 0


def test_a_token_with_plus_and_slash_from_the_printed_link(page: Any, live: LiveServer) -> None:
    open_page(page, live.base + "/?view=feed", token=False, fragment=quote(PLUS, safe=""))
    assert rows(page) == [2, 1]


def test_load_older_reads_each_page_once_and_the_transcript_has_no_holes(
    page: Any, live: LiveServer, writer: Store
) -> None:
    append_raw(writer, "s-2", fault("history"), count=450)  # seqs 3..452
    open_page(page, live.base + "/?view=feed")
    page.execute_script(
        "const b = [...document.querySelectorAll('#feed button')].at(-1); b.click(); b.click();"
    )
    wait_for(lambda: len(rows(page)) == 400, 5, "one older page")
    time.sleep(0.5)
    assert rows(page) == list(range(452, 52, -1))  # each once, newest first
    # Resume (the newest page read again) and Load older at once: the older page, read
    # against rows that are replaced, is dropped rather than leave a hole.
    buttons = "[...document.querySelectorAll('#feed button')]"
    page.execute_script(f"{buttons}[1].click();")  # Pause
    append_raw(writer, "s-2", fault("while paused"), count=5)  # seqs 453..457
    page.execute_script(f"const b = {buttons}; b[1].click(); b.at(-1).click();")
    wait_for(lambda: rows(page)[:1] == [457], 5, "resumed")
    time.sleep(0.5)
    shown = rows(page)
    assert shown == list(range(457, 457 - len(shown), -1))  # no hole

    writer.sessions.save(SessionRecord(id="s-3", project_id="p"))
    chain = RelayChain()
    said = [AgentMessage(message_id=f"m-{n}", text=f"message {n}") for n in range(120)]
    writer.projection.apply("s-3", chain.extend(said[:3], recorded_at_ms=100))
    open_page(page, live.base + "/?view=session&id=s-3", token=False)
    wait_for(lambda: positions(page) == [2, 1, 0], 5, "the transcript")
    writer.projection.apply("s-3", chain.extend(said[3:], recorded_at_ms=200))  # > a page
    wait_for(lambda: positions(page)[:1] == [119], REFRESH_S + 2, "the newest item")
    shown = positions(page)
    assert shown == list(range(119, 119 - len(shown), -1))  # no hole
    older = page.find_element("css selector", "#session > button")
    while len(positions(page)) < 120:
        count = len(positions(page))
        older.click()
        wait_for(lambda c=count: len(positions(page)) > c, 5, "an older page")
    assert positions(page) == list(range(119, -1, -1))


def positions(driver: Any) -> list[int]:
    found: list[int] = driver.execute_script(
        "return [...document.querySelectorAll('#session .transcript li')]"
        ".map((n) => +n.dataset.position);"
    )
    return found


class SlowHistory:
    """The app, with the answers to pages of history (`before_seq`) held back 1.5 s after they
    were read while `hold` is set: a slow network, as the page sees it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.hold = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        slow = self.hold.is_set() and b"before_seq" in scope.get("query_string", b"")

        async def sending(message: Any) -> None:
            if slow and message["type"] == "http.response.start":
                await asyncio.sleep(1.5)
            await send(message)

        await self.app(scope, receive, sending if slow else send)


def test_an_event_that_arrives_while_the_feed_loads_is_shown(page: Any, writer: Store) -> None:
    feed = create_app(writer, WebSettings(tokens={ADMIN: None}))
    slow = SlowHistory(feed)
    with in_thread(page, slow, feed) as base:
        open_page(page, base + "/?view=sessions")
        slow.hold.set()
        page.find_element("id", "nav-feed").click()
        time.sleep(0.5)  # the page of history is read; its answer is on its way
        append_raw(writer, "s-1", fault("while the feed loads"))  # seq 3, on the stream
        wait_for(lambda: rows(page) == [3, 2, 1], 5, "the feed with the event")
        time.sleep(0.5)
        assert rows(page) == [3, 2, 1]


def test_a_failed_request_shows_its_error_and_the_view_recovers(
    page: Any, live: LiveServer, writer: Store
) -> None:
    open_page(page, live.base + "/?view=feed")
    page.execute_cdp_cmd("Network.enable", {})
    page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/sessions*"]})
    page.find_element("id", "nav-sessions").click()
    wait_for(lambda: "The request failed" in text_of(page, "error"), 5, "the error shown")
    assert "No sessions match" not in text_of(page, "sessions")  # never an empty "no results"
    page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/state"]})
    page.get(live.base + "/?view=session&id=s-1")
    wait_for(lambda: "The request failed" in text_of(page, "error"), 5, "the error shown")
    page.execute_script("document.querySelector('#session > button').click();")  # Load older
    page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    time.sleep(REFRESH_S + 1.5)  # a refresh has run
    assert positions(page) == [1, 0]  # each item once
    assert text_of(page, "error") == "" and "Which directory?" in text_of(page, "session")


class CountingSignIns:
    """The app, counting the `POST /api/session` requests it is sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sign_ins = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/api/session"
        ):
            self.sign_ins += 1
        await self.app(scope, receive, send)


COUNTDOWN = re.compile(r"[0-9]+ s\b")
"""A countdown in the page's text ("in 4 s")."""


def test_the_right_link_during_a_lockout_waits_it_out_with_one_countdown_and_signs_in(
    page: Any, writer: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = 5.0
    monkeypatch.setattr(_guard, "FAILED_AUTH_WINDOW_S", window)  # 60 s in production
    feed = create_app(writer, WebSettings(tokens={ADMIN: None}))
    counting = CountingSignIns(feed)
    with in_thread(page, counting, feed) as base:
        wrong = bearer("x" * 43)
        answers = [httpx.get(base + "/api/events", headers=wrong) for _ in range(FAILED_AUTH_LIMIT)]
        assert [answer.status_code for answer in answers] == [401] * FAILED_AUTH_LIMIT
        locked = httpx.get(base + "/api/events", headers=bearer())  # the right token, refused
        assert locked.status_code == 429 and 1 <= int(locked.headers["retry-after"]) <= window + 1
        page.get(base + "/?view=feed#token=" + ADMIN)
        wait = wait_for(lambda: text_of(page, "login-wait"), 5, "the countdown")
        assert "keeps the token it was given and signs in with it in" in wait
        assert page.current_url == base + "/?view=feed"  # the token left the address at once
        seen = []
        while connection(page) != "live":  # one countdown, every time the page is looked at
            shown = page.execute_script("return document.body.innerText;")
            seen.append(COUNTDOWN.findall(shown))
            assert "earlier sign-in" not in shown and "retry in" not in shown
            time.sleep(0.25)
            assert len(seen) < 4 * (window + 5), "not signed in once the lockout ended"
        # One countdown, then none once the wait is over (signing in): never two, never again.
        counts = [len(countdowns) for countdowns in seen]
        assert counts[0] == 1 and set(counts) <= {0, 1}, seen
        assert counts == sorted(counts, reverse=True), seen
        assert len({countdowns[0] for countdowns in seen if countdowns}) > 1  # it counts down
        assert rows(page) == [2, 1] and text_of(page, "login") == ""
        assert COUNTDOWN.findall(page.execute_script("return document.body.innerText;")) == []
        assert page.get_cookie(f"session_journal_token_{base.rpartition(':')[2]}")["value"] == ADMIN
        assert counting.sign_ins == 2  # refused once (429), then once after Retry-After
        assert [url for url in history_urls(page) if ADMIN in url] == []
        assert violations(page) == []
