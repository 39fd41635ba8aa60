"""Where the database is and how it is written: URL resolution and options from the environment."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .errors import InvalidRecord

URL_ENV = "SESSION_JOURNAL_DATABASE_URL"
DEFAULT_URL = "sqlite:///session-journal.db"
SYNCHRONOUS_ENV = "SESSION_JOURNAL_SQLITE_SYNCHRONOUS"
BUSY_TIMEOUT_ENV = "SESSION_JOURNAL_BUSY_TIMEOUT_S"


def resolve_url(url: str | None = None) -> str:
    """The URL given, else `SESSION_JOURNAL_DATABASE_URL`, else the embedded SQLite default. An
    empty URL given (`--url ""`, `-x url=`) is an `InvalidRecord`, not the default: a mistyped
    variable must not send the caller to another database."""
    if url is not None and not url.strip():
        raise InvalidRecord("the database URL is empty")
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


SQLITE_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""The values of SQLite's `PRAGMA synchronous` that `sqlite_synchronous` may take."""
MAX_BUSY_TIMEOUT_S = 3600.0
"""The longest `busy_timeout_s`: one hour."""
MAX_BODY_BYTES_LIMIT = 256 * 1024 * 1024
"""The largest `max_body_bytes` (256 MiB; PostgreSQL's `json` values stop at 1 GB)."""


def _synchronous_level(value: object, name: str) -> str:
    if not isinstance(value, str) or value.upper() not in SQLITE_SYNCHRONOUS_LEVELS:
        raise InvalidRecord(
            f"{name} must be one of {', '.join(SQLITE_SYNCHRONOUS_LEVELS)}, got {value!r}"
        )
    return value.upper()


def _busy_timeout(value: object, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_BUSY_TIMEOUT_S
    ):
        raise InvalidRecord(
            f"{name} must be a finite number of seconds from 0 to {MAX_BUSY_TIMEOUT_S:g}, "
            f"got {value!r}"
        )
    return float(value)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidRecord(f"{name} must be a number of seconds, got {raw!r}") from None


MAX_WINDOW_EVENTS = 1_000_000
"""The largest `follow_window_events`."""
MAX_WINDOW_BYTES = 1024 * 1024 * 1024
"""The largest `follow_window_bytes` (1 GiB)."""


def _bounded_int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRecord(f"{name} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidRecord(f"{name} must be from {low} to {high}, got {value}")
    return value


@dataclass(frozen=True)
class StoreOptions:
    """Tuning of the write path; defaults favour durability.

    `sqlite_synchronous` is SQLite's `PRAGMA synchronous` (`FULL`: a commit survives power loss;
    `NORMAL`: it survives a crash of the process but may be lost with the machine).
    `busy_timeout_s` is how long a SQLite writer waits for another process's write lock.
    `max_body_bytes` bounds one encoded JSON body.
    `follow_window_events` and `follow_window_bytes` bound the followers' shared window of the
    most recent events (`services/tail.py`): followers further behind read the database.
    """

    sqlite_synchronous: str = "FULL"
    busy_timeout_s: float = 60.0
    max_body_bytes: int = 1024 * 1024
    follow_window_events: int = 10_000
    follow_window_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        """Every option is checked here, when the options are built, so a bad value is an
        `InvalidRecord` naming it, never a driver error at the first connection."""
        _synchronous_level(self.sqlite_synchronous, "sqlite_synchronous")
        _busy_timeout(self.busy_timeout_s, "busy_timeout_s")
        size = self.max_body_bytes
        if isinstance(size, bool) or not isinstance(size, int):
            raise InvalidRecord(f"max_body_bytes must be an integer, got {type(size).__name__}")
        if not 1 <= size <= MAX_BODY_BYTES_LIMIT:
            raise InvalidRecord(
                f"max_body_bytes must be from 1 to {MAX_BODY_BYTES_LIMIT}, got {size}"
            )
        _bounded_int(self.follow_window_events, "follow_window_events", 0, MAX_WINDOW_EVENTS)
        _bounded_int(self.follow_window_bytes, "follow_window_bytes", 0, MAX_WINDOW_BYTES)

    @classmethod
    def from_env(cls) -> StoreOptions:
        """Options overridden by `SESSION_JOURNAL_SQLITE_SYNCHRONOUS` and
        `SESSION_JOURNAL_BUSY_TIMEOUT_S`."""
        return cls(
            sqlite_synchronous=_synchronous_level(
                os.environ.get(SYNCHRONOUS_ENV) or "FULL", SYNCHRONOUS_ENV
            ),
            busy_timeout_s=_busy_timeout(_env_float(BUSY_TIMEOUT_ENV, 60.0), BUSY_TIMEOUT_ENV),
        )
