"""Store options are checked when they are built: a bad value is one `InvalidRecord` naming it."""

from __future__ import annotations

import math

import pytest

from session_journal import InvalidRecord, StoreOptions
from session_journal.cli import main


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"follow_window_events": -1},
            "follow_window_events must be from 0 to 1000000, got -1",
        ),
        (
            {"follow_window_events": True},
            "follow_window_events must be an integer, got bool",
        ),
        (
            {"follow_window_bytes": 2**40},
            "follow_window_bytes must be from 0 to 1073741824, got 1099511627776",
        ),
        (
            {"follow_window_bytes": 1.5},
            "follow_window_bytes must be an integer, got float",
        ),
        (
            {"busy_timeout_s": math.nan},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got nan",
        ),
        (
            {"busy_timeout_s": math.inf},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got inf",
        ),
        (
            {"busy_timeout_s": -1},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got -1",
        ),
        (
            {"busy_timeout_s": 1e300},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got 1e+300",
        ),
        (
            {"busy_timeout_s": True},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got True",
        ),
        (
            {"busy_timeout_s": "60"},
            "busy_timeout_s must be a finite number of seconds from 0 to 3600, got '60'",
        ),
        (
            {"sqlite_synchronous": "sometimes"},
            "sqlite_synchronous must be one of OFF, NORMAL, FULL, EXTRA, got 'sometimes'",
        ),
        ({"max_body_bytes": 0}, "max_body_bytes must be from 1 to 268435456, got 0"),
        ({"max_body_bytes": 2**40}, f"max_body_bytes must be from 1 to 268435456, got {2**40}"),
        ({"max_body_bytes": 1.5}, "max_body_bytes must be an integer, got float"),
    ],
)
def test_bad_options_are_refused_when_built(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRecord) as raised:
        StoreOptions(**options)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_good_options_are_kept_as_given() -> None:
    options = StoreOptions(sqlite_synchronous="normal", busy_timeout_s=0, max_body_bytes=1)
    assert (options.sqlite_synchronous, options.busy_timeout_s, options.max_body_bytes) == (
        "normal",
        0,
        1,
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "SESSION_JOURNAL_BUSY_TIMEOUT_S",
            "nan",
            "SESSION_JOURNAL_BUSY_TIMEOUT_S must be a finite number of seconds from 0 to 3600, "
            "got nan",
        ),
        (
            "SESSION_JOURNAL_BUSY_TIMEOUT_S",
            "inf",
            "SESSION_JOURNAL_BUSY_TIMEOUT_S must be a finite number of seconds from 0 to 3600, "
            "got inf",
        ),
        (
            "SESSION_JOURNAL_SQLITE_SYNCHRONOUS",
            "fast",
            "SESSION_JOURNAL_SQLITE_SYNCHRONOUS must be one of OFF, NORMAL, FULL, EXTRA, "
            "got 'fast'",
        ),
    ],
)
def test_bad_settings_from_the_environment_name_their_variable(
    variable: str,
    value: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidRecord) as raised:
        StoreOptions.from_env()
    assert str(raised.value) == message
    assert main(["--url", "sqlite:///never-opened.db", "db", "check"]) == 1
    assert capsys.readouterr().err == f"session-journal: {message}\n"
