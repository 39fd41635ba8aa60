"""Where the database is and how it is written: URL resolution and options from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import InvalidRecord

URL_ENV = "SESSION_JOURNAL_DATABASE_URL"
DEFAULT_URL = "sqlite:///session-journal.db"


def resolve_url(url: str | None = None) -> str:
    """The URL given, else `SESSION_JOURNAL_DATABASE_URL`, else the embedded SQLite default."""
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidRecord(f"{name} must be a number of seconds, got {raw!r}") from None


@dataclass(frozen=True)
class StoreOptions:
    """Tuning of the write path; defaults favour durability.

    `sqlite_synchronous` is SQLite's `PRAGMA synchronous` (`FULL`: a commit survives power loss;
    `NORMAL`: it survives a crash of the process but may be lost with the machine).
    `busy_timeout_s` is how long a SQLite writer waits for another process's write lock.
    `max_body_bytes` bounds one encoded JSON body.
    """

    sqlite_synchronous: str = "FULL"
    busy_timeout_s: float = 60.0
    max_body_bytes: int = 1024 * 1024

    @classmethod
    def from_env(cls) -> StoreOptions:
        """Options overridden by `SESSION_JOURNAL_SQLITE_SYNCHRONOUS` and
        `SESSION_JOURNAL_BUSY_TIMEOUT_S`."""
        return cls(
            sqlite_synchronous=os.environ.get("SESSION_JOURNAL_SQLITE_SYNCHRONOUS", "FULL").upper(),
            busy_timeout_s=_env_float("SESSION_JOURNAL_BUSY_TIMEOUT_S", 60.0),
        )
