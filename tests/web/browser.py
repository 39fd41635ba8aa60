"""Headless Chromium from Debian's packages, driven by Selenium through Debian's chromedriver
(both paths given: nothing is looked up or downloaded), for the operator page's tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSECURE_HOST = "journal.test"
"""A name the browser resolves to 127.0.0.1 (its host resolver's rules: no DNS is asked), so
that a page served on loopback is not a secure context, as on a LAN address over plain HTTP."""
SCREENSHOTS_ENV = "SESSION_JOURNAL_SCREENSHOTS"
"""Where the tests write their PNG of each view (`make screenshots`: docs/img/operator-page)."""
ARGUMENTS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1280,860",
    f"--host-resolver-rules=MAP {INSECURE_HOST} 127.0.0.1",
)
# Recorded in the page's own world before its scripts run (injected over the DevTools protocol,
# which the page's policy does not govern): every policy violation the page causes.
VIOLATION_RECORDER = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__violations.push(`${event.violatedDirective}: ${event.blockedURI} ${event.sample}`);
});
"""

T = TypeVar("T")


def browser_problem() -> str | None:
    """Why no browser test can run here, or `None`."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        return f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
    return None


def open_browser() -> Any:
    """A headless Chromium (`--headless=new --no-sandbox`), its console logged, with the
    violation recorder in every page; skipped without the browser outside CI, failed in CI."""
    problem = browser_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests need Debian's Chromium here: {problem}")
        pytest.skip(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ARGUMENTS:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(10)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": VIOLATION_RECORDER})
    return driver


def wait_for(condition: Callable[[], T], timeout: float, what: str) -> T:
    """`condition()`'s first truthy value within `timeout` seconds (AssertionError naming
    `what` otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception as error:  # a page still drawing: ask again
            value, last = None, error
        else:
            last = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what} (last error: {last})")
        time.sleep(0.02)


def text_of(driver: Any, element_id: str) -> str:
    """The text an element shows (`''` when it is hidden)."""
    value: str = driver.execute_script(
        "const node = document.getElementById(arguments[0]);"
        "return node && !node.hidden ? node.textContent : '';",
        element_id,
    )
    return value


def violations(driver: Any) -> list[str]:
    """The policy violations of the page shown, recorded since it loaded."""
    found: list[str] = driver.execute_script("return window.__violations || ['no recorder'];")
    return found


def set_hidden(driver: Any, hidden: bool) -> None:
    """Every tab of the browser's window hidden (the window minimized over the DevTools
    protocol) or shown again."""
    window = driver.execute_cdp_cmd("Browser.getWindowForTarget", {})["windowId"]
    state = "minimized" if hidden else "normal"
    driver.execute_cdp_cmd(
        "Browser.setWindowBounds", {"windowId": window, "bounds": {"windowState": state}}
    )


def screenshot(driver: Any, name: str, fallback: Path) -> Path:
    """A PNG of the page shown, in `$SESSION_JOURNAL_SCREENSHOTS` (else `fallback`)."""
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or fallback)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
    return path
