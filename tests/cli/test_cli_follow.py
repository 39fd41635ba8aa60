"""`events --follow`: Ctrl-C always ends it cleanly; --interval and --limit are bounded."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

import pytest

from session_journal import Store
from session_journal.cli import main
from tests.factories import SessionFactory
from tests.reliability.harness import rounds

# Four followers in `make test`; `make reliability` runs as many as its rounds (20 and more).
FOLLOWERS = rounds(4)


@pytest.mark.reliability
@pytest.mark.slow
def test_ctrl_c_ends_every_follower_cleanly(migrated_url: str) -> None:
    # Followers polling every 10 ms, each sent Ctrl-C twice in a row at its own moment
    # of the poll-and-sleep cycle: each exits 0 promptly, with nothing on stderr.
    env = os.environ | {"SESSION_JOURNAL_DATABASE_URL": migrated_url}
    command = [sys.executable, "-m", "session_journal", "events", "--follow", "--interval", "0.01"]
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a"))
        followers = [
            subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(FOLLOWERS)
        ]
        try:
            # A follower that printed an event is inside its loop, with its handler in place.
            waiting = {follower.stdout: follower for follower in followers if follower.stdout}
            deadline = time.monotonic() + 120
            while waiting and time.monotonic() < deadline:
                store.faults.record_startup_fault("a", "while following")
                ready, _, _ = select.select(list(waiting), [], [], 0.5)
                for stream in ready:
                    assert stream.readline()
                    del waiting[stream]
            assert not waiting, f"{len(waiting)} follower(s) never printed"
            for n, follower in enumerate(followers):
                time.sleep(0.003 * n)
                follower.send_signal(signal.SIGINT)
                follower.send_signal(signal.SIGINT)
            results = [follower.communicate(timeout=60) for follower in followers]
        finally:
            for follower in followers:
                if follower.poll() is None:
                    follower.kill()
                    follower.wait()
    assert [follower.returncode for follower in followers] == [0] * FOLLOWERS
    assert [err for _, err in results] == [""] * FOLLOWERS


def test_the_interrupt_handler_only_sets_a_flag(
    migrated_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A signal handler runs wherever the main thread is, maybe holding a lock it would then
    # wait for forever: the follower's handler must call nothing at all (no Event.set()).
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a"))
    handlers: list[Any] = []
    installed: list[int] = []
    previous = [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)]

    def record(signum: int, handler: Any) -> Any:
        handlers.append(handler)
        installed.append(signum)
        return signal.getsignal(signum)  # the real handler is never replaced

    monkeypatch.setattr(signal, "signal", record)
    calls: list[str] = []
    finished = threading.Event()

    def interrupt() -> None:
        deadline = time.monotonic() + 60
        while not handlers and time.monotonic() < deadline:
            time.sleep(0.01)

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                calls.append(frame.f_code.co_qualname)
            elif event == "c_call" and arg is not sys.setprofile:
                calls.append(arg.__qualname__)

        sys.setprofile(profile)
        try:
            handlers[0](signal.SIGINT, None)
        finally:
            sys.setprofile(None)
        if not finished.wait(20):  # the loop ignored the flag: end it with an event
            with Store.open(migrated_url) as store:
                store.faults.record_startup_fault("a", "the flag was ignored")

    thread = threading.Thread(target=interrupt)
    thread.start()
    try:
        code = main(
            ["--url", migrated_url, "events", "--follow", "--interval", "0.05", "--limit", "1"]
        )
    finally:
        finished.set()
        thread.join()
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "", "")
    assert calls == ["Interrupt.__call__"]
    assert installed == [signal.SIGINT, signal.SIGTERM] * 2  # SIGTERM stops it alike
    assert handlers[1] is handlers[0]
    assert handlers[2:] == previous  # restored when the loop ended


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--interval", "-1", "must be a number of seconds from 0.01 to 3600, got '-1'"),
        ("--interval", "0", "must be a number of seconds from 0.01 to 3600, got '0'"),
        ("--interval", "0.001", "must be a number of seconds from 0.01 to 3600, got '0.001'"),
        ("--interval", "nan", "must be a number of seconds from 0.01 to 3600, got 'nan'"),
        ("--interval", "inf", "must be a number of seconds from 0.01 to 3600, got 'inf'"),
        ("--interval", "1e300", "must be a number of seconds from 0.01 to 3600, got '1e300'"),
        ("--interval", "3600.5", "must be a number of seconds from 0.01 to 3600, got '3600.5'"),
        ("--interval", "soon", "must be a number of seconds from 0.01 to 3600, got 'soon'"),
        ("--limit", "-5", "must be an integer from 1 to 1000000000, got '-5'"),
        ("--limit", "0", "must be an integer from 1 to 1000000000, got '0'"),
        ("--limit", "1000000001", "must be an integer from 1 to 1000000000, got '1000000001'"),
        ("--limit", "2.5", "must be an integer from 1 to 1000000000, got '2.5'"),
    ],
)
def test_bad_interval_and_limit_are_usage_errors(
    option: str, value: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["events", "--follow", option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"session-journal events: error: argument {option}: {expected}"
    assert "Traceback" not in err


def test_the_bounds_of_interval_and_limit_are_accepted(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a"))
        for _ in range(3):
            store.faults.record_startup_fault("a", "fault")
    for limit, printed in [("1", 1), ("1000000000", 3)]:
        assert main(["--url", migrated_url, "events", "--limit", limit, "--interval", "3600"]) == 0
        assert len(capsys.readouterr().out.splitlines()) == printed
    assert (
        main(
            ["--url", migrated_url, "events", "--after", "1", "--limit", "1", "--interval", "0.01"]
        )
        == 0
    )
    assert len(capsys.readouterr().out.splitlines()) == 1
