"""Store options are checked when they are built: a bad value is one `InvalidRecord` naming it."""

from __future__ import annotations

import math
import re

import pytest

from session_journal import InvalidRecord, StoreOptions
from session_journal.cli import main
from session_journal.config import SQLITE_SYNCHRONOUS_LEVELS
from tests.docs import page


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
        ({"reader_pool_size": 0}, "reader_pool_size must be from 1 to 1000, got 0"),
        ({"reader_pool_size": 1001}, "reader_pool_size must be from 1 to 1000, got 1001"),
        ({"reader_pool_size": 5.0}, "reader_pool_size must be an integer, got float"),
        ({"reader_pool_size": None}, "reader_pool_size must be an integer, got NoneType"),
        *(
            (
                {"connect_timeout_s": value},
                "connect_timeout_s must be an integer number of seconds from 2 to 3600, "
                f"or 0 for no timeout, got {value!r}",
            )
            for value in (1, -1, 3601, 2.5, 10.0, True, "10")
        ),
        *(
            (
                {"statement_timeout_s": value},
                "statement_timeout_s must be a finite number of seconds from 0 to 86400 "
                f"(0: no timeout), got {value!r}",
            )
            for value in (-0.5, math.nan, math.inf, 86400.5, False, "5")
        ),
    ],
)
def test_bad_options_are_refused_when_built(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRecord) as raised:
        StoreOptions(**options)  # type: ignore[arg-type]
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("options", "kept"),
    [
        ({}, (5, None, None, 0)),
        (
            {"reader_pool_size": 1, "connect_timeout_s": 2, "statement_timeout_s": 0.25},
            (1, 2, 0.25, 250),
        ),
        (
            {"reader_pool_size": 1000, "connect_timeout_s": 3600, "statement_timeout_s": 86400},
            (1000, 3600, 86400, 86_400_000),
        ),
        ({"connect_timeout_s": 0, "statement_timeout_s": 0}, (5, 0, 0, 0)),
        ({"statement_timeout_s": 0.0001}, (5, None, 0.0001, 1)),  # rounded up: still a timeout
    ],
)
def test_connection_options_are_kept_and_the_statement_timeout_is_whole_milliseconds(
    options: dict[str, object], kept: tuple[object, ...]
) -> None:
    built = StoreOptions(**options)  # type: ignore[arg-type]
    assert (
        built.reader_pool_size,
        built.connect_timeout_s,
        built.statement_timeout_s,
        built.statement_timeout_ms,
    ) == kept


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
        (
            "SESSION_JOURNAL_READER_POOL_SIZE",
            "many",
            "SESSION_JOURNAL_READER_POOL_SIZE must be an integer from 1 to 1000, got 'many'",
        ),
        (
            "SESSION_JOURNAL_READER_POOL_SIZE",
            "0",
            "SESSION_JOURNAL_READER_POOL_SIZE must be from 1 to 1000, got 0",
        ),
        (
            "SESSION_JOURNAL_READER_POOL_SIZE",
            "5000",
            "SESSION_JOURNAL_READER_POOL_SIZE must be from 1 to 1000, got 5000",
        ),
        (
            "SESSION_JOURNAL_CONNECT_TIMEOUT_S",
            "2.5",
            "SESSION_JOURNAL_CONNECT_TIMEOUT_S must be an integer number of seconds from 2 to "
            "3600, or 0 for no timeout, got '2.5'",
        ),
        (
            "SESSION_JOURNAL_CONNECT_TIMEOUT_S",
            "1",
            "SESSION_JOURNAL_CONNECT_TIMEOUT_S must be an integer number of seconds from 2 to "
            "3600, or 0 for no timeout, got 1",
        ),
        (
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S",
            "soon",
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S must be a finite number of seconds from 0 to "
            "86400 (0: no timeout), got 'soon'",
        ),
        (
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S",
            "-1",
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S must be a finite number of seconds from 0 to "
            "86400 (0: no timeout), got -1.0",
        ),
        (
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S",
            "nan",
            "SESSION_JOURNAL_STATEMENT_TIMEOUT_S must be a finite number of seconds from 0 to "
            "86400 (0: no timeout), got nan",
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


def test_the_connection_options_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SESSION_JOURNAL_READER_POOL_SIZE", "12")
    monkeypatch.setenv("SESSION_JOURNAL_CONNECT_TIMEOUT_S", "7")
    monkeypatch.setenv("SESSION_JOURNAL_STATEMENT_TIMEOUT_S", "2.5")
    options = StoreOptions.from_env()
    assert (options.reader_pool_size, options.connect_timeout_s, options.statement_timeout_s) == (
        12,
        7,
        2.5,
    )
    for variable in (
        "SESSION_JOURNAL_READER_POOL_SIZE",
        "SESSION_JOURNAL_CONNECT_TIMEOUT_S",
        "SESSION_JOURNAL_STATEMENT_TIMEOUT_S",
    ):
        monkeypatch.setenv(variable, "")  # empty: the default, as unset
    options = StoreOptions.from_env()
    assert (options.reader_pool_size, options.connect_timeout_s, options.statement_timeout_s) == (
        5,
        None,
        None,
    )


def test_the_docs_name_every_accepted_synchronous_level_and_what_off_gives_up() -> None:
    shown = page("configuration.md")
    [row] = [line for line in shown.splitlines() if line.startswith("| `SESSION_JOURNAL_SQLITE_")]
    named = re.findall(r"`([A-Z]+)`", row.split("|")[3])
    assert sorted(set(named)) == sorted(SQLITE_SYNCHRONOUS_LEVELS)
    assert "`OFF` syncs nothing" in row and "corrupt the database" in row
