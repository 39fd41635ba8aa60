"""`session-journal serve`'s refusals, before anything listens: no token on a host other
clients reach, `--no-token` off loopback or beside a token, bad token files. And a loopback
server without a token, which answers without one; the operator page's line `serve` prints
(the token in the URL's fragment only on a terminal)."""

from __future__ import annotations

import os
import pty
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from session_journal import SessionRecord, Store
from session_journal.cli import main
from session_journal.web._serve import is_loopback
from tests.web.client import ADMIN, LiveServer


@pytest.fixture(autouse=True)
def _no_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSION_JOURNAL_WEB_TOKEN", raising=False)


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    assert main(["--url", url, "serve", *arguments]) == 1
    error = capsys.readouterr().err
    assert not (tmp_path / "journal.db").exists()  # refused before the database is opened
    return error


def test_a_token_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "serve needs a token" in refused(tmp_path, capsys, "--host", "0.0.0.0")
    assert "serve needs a token" in refused(tmp_path, capsys)


def test_no_token_only_on_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.1", "example.org"):
        error = refused(tmp_path, capsys, "--host", host, "--no-token")
        assert "only a loopback host" in error, host
    error = refused(tmp_path, capsys, "--no-token", "--allowed-host", "*")
    assert "must check the Host header" in error
    monkeypatch.setenv("SESSION_JOURNAL_WEB_TOKEN", ADMIN)
    assert "give one or the other" in refused(tmp_path, capsys, "--no-token")


def test_bad_tokens_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_JOURNAL_WEB_TOKEN", "short")
    assert "5 characters was refused" in refused(tmp_path, capsys)
    monkeypatch.delenv("SESSION_JOURNAL_WEB_TOKEN")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN} w-1 extra\n")
    assert "line 1: expected 'TOKEN [WORKSPACE]'" in refused(
        tmp_path, capsys, "--token-file", str(tokens)
    )
    tokens.write_text("# nothing\n\n")
    assert "holds no token" in refused(tmp_path, capsys, "--token-file", str(tokens))
    tokens.write_text(f"{ADMIN} not/a/workspace\n")
    assert "workspace" in refused(tmp_path, capsys, "--token-file", str(tokens))
    tokens.write_text(f"{ADMIN} w-1\n{ADMIN}\n")  # the second line would widen it
    assert "listed twice" in refused(tmp_path, capsys, "--token-file", str(tokens))
    missing = str(tmp_path / "missing")
    assert "cannot be read" in refused(tmp_path, capsys, "--token-file", missing)


def test_loopback_names() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost")] == [
        True
    ] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.org")] == [False] * 4


def test_a_loopback_server_without_a_token(migrated_url: str, tmp_path: Path) -> None:
    with LiveServer(migrated_url, tmp_path, "--no-token") as live:
        answer = httpx.get(live.base + "/api/events")
        assert answer.status_code == 200 and answer.json()["latest_seq"] == 0
        assert "page/app.js" in httpx.get(live.base + "/").text  # the operator page
        assert live.terminate() == 0
        assert f"the operator page: {live.base}/\n" in live.output()


def page_lines(migrated_url: str, token_file: Path, *, terminal: bool) -> list[str]:
    """The lines `serve` prints about itself, with its stdout a terminal (a pty) or a file."""
    command = [sys.executable, "-m", "session_journal", "--url", migrated_url, "serve"]
    command += ["--port", "0", "--token-file", str(token_file)]
    if terminal:
        leader, follower = pty.openpty()
        out: Any = follower
    else:
        leader, out = -1, subprocess.PIPE
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, text=True)
    try:
        if terminal:
            os.close(out)
            reader = os.fdopen(leader, "r", errors="replace")
        else:
            reader = process.stdout
        lines = [reader.readline().strip() for _ in range(2)]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        if terminal:
            reader.close()
        else:
            process.stdout.close()  # type: ignore[union-attr]
    return lines


def test_serve_prints_the_page_with_the_token_in_the_fragment_on_a_terminal_only(
    migrated_url: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN}\n{'b' * 43} w-2\n")
    serving, page = page_lines(migrated_url, tokens, terminal=True)
    base = serving.removeprefix("session-journal: serving on ")
    assert page == f"session-journal: the operator page: {base}/#token={ADMIN}"
    serving, page = page_lines(migrated_url, tokens, terminal=False)
    base = serving.removeprefix("session-journal: serving on ")
    assert page == f"session-journal: the operator page: {base}/ (its token: the first of {tokens})"


def test_the_page_hidden_close_delay_is_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    for value in ("0.5", "86401", "nan", "soon"):
        with pytest.raises(SystemExit) as stopped:
            main(["--url", url, "serve", "--no-token", "--page-hidden-close", value])
        assert stopped.value.code == 2
        assert "--page-hidden-close: must be a number of seconds from 1 to 86400" in (
            capsys.readouterr().err
        )
    assert not (tmp_path / "journal.db").exists()


def test_serve_redacts_unless_no_redact(migrated_url: str, tmp_path: Path) -> None:
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionRecord(id="s-1", project_id="p"))
        store.faults.record_startup_fault("s-1", "login with password=hunter2 failed")
    for extra, shown in (((), "password=[REDACTED]"), (("--no-redact",), "password=hunter2")):
        with LiveServer(migrated_url, tmp_path, "--no-token", *extra) as live:
            page = httpx.get(live.base + "/api/events?after_seq=0").json()
        assert [e["event"]["data"]["message"] for e in page["events"]] == [
            f"login with {shown} failed"
        ]


def test_serve_on_a_port_in_use_exits_1_with_one_line_naming_it(migrated_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "session_journal", "--url", migrated_url, "serve"]
        ran = subprocess.run(
            [*command, "--no-token", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr.splitlines() == [
        f"session-journal: serve cannot listen on 127.0.0.1:{port}: address already in use"
    ]
