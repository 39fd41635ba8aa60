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
READER_POOL_SIZE_ENV = "SESSION_JOURNAL_READER_POOL_SIZE"
CONNECT_TIMEOUT_ENV = "SESSION_JOURNAL_CONNECT_TIMEOUT_S"
STATEMENT_TIMEOUT_ENV = "SESSION_JOURNAL_STATEMENT_TIMEOUT_S"


def resolve_url(url: str | None = None) -> str:
    """The URL given, else `SESSION_JOURNAL_DATABASE_URL`, else the embedded SQLite default. An
    empty URL given (`--url ""`, `-x url=`) is an `InvalidRecord`, not the default: a mistyped
    variable must not send the caller to another database."""
    if url is not None and not isinstance(url, str):
        raise InvalidRecord(f"the database URL must be a string, got {type(url).__name__}")
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


def _env_number(name: str, kind: type[int] | type[float], allowed: str) -> int | float | None:
    """The variable `name` read as `kind`; `None` when unset or empty. `allowed` says what the
    option takes, for the message of a value that is no such number."""
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise InvalidRecord(f"{name} must be {allowed}, got {raw!r}") from None


DEFAULT_READER_POOL_SIZE = 5
"""The readers' pool size when none is given: SQLAlchemy's default `pool_size`."""
MAX_READER_POOL_SIZE = 1000
"""The largest `reader_pool_size`."""
READER_POOL_OVERFLOW = 10
"""How many reader connections beyond `reader_pool_size` open under load (closed when they are
returned): SQLAlchemy's default `max_overflow`."""
MIN_CONNECT_TIMEOUT_S = 2
"""The shortest `connect_timeout_s` but 0: libpq (and psycopg) wait at least 2 s."""
MAX_CONNECT_TIMEOUT_S = 3600
"""The longest `connect_timeout_s`: one hour."""
MAX_STATEMENT_TIMEOUT_S = 86400.0
"""The longest `statement_timeout_s`: one day."""


def _connect_timeout(value: object, name: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == 0):
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_CONNECT_TIMEOUT_S <= value <= MAX_CONNECT_TIMEOUT_S
    ):
        raise InvalidRecord(f"{name} must be {_CONNECT_TIMEOUTS}, got {value!r}")
    return value


_CONNECT_TIMEOUTS = (
    f"an integer number of seconds from {MIN_CONNECT_TIMEOUT_S} to {MAX_CONNECT_TIMEOUT_S}, "
    "or 0 for no timeout"
)
_STATEMENT_TIMEOUTS = (
    f"a finite number of seconds from 0 to {MAX_STATEMENT_TIMEOUT_S:g} (0: no timeout)"
)


def _statement_timeout(value: object, name: str) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_STATEMENT_TIMEOUT_S
    ):
        raise InvalidRecord(f"{name} must be {_STATEMENT_TIMEOUTS}, got {value!r}")
    return value


@dataclass(frozen=True)
class StoreOptions:
    """Tuning of the write path and the store's connections; defaults favour durability.

    `sqlite_synchronous` is SQLite's `PRAGMA synchronous` (`FULL`: a commit survives power loss;
    `NORMAL`: it survives a crash of the process but may be lost with the machine).
    `busy_timeout_s` is how long a SQLite writer waits for another process's write lock.
    `max_body_bytes` bounds one encoded JSON body.
    `follow_window_events` and `follow_window_bytes` bound the followers' shared window of the
    most recent events (`follow/window.py`): followers further behind read the database.
    `reader_pool_size` is how many reader connections the store keeps open (both backends; up
    to `READER_POOL_OVERFLOW` more open under load and close when returned).

    PostgreSQL only, and only on the store's reader and writer connections, never on the
    migrations' connections: `connect_timeout_s` is how long a connection attempt may take
    (libpq's `connect_timeout`, whole seconds, at least 2; it also bounds each connection
    attempt of the followers' `LISTEN` connection); `None` or 0: no timeout of the package's
    own. `statement_timeout_s` is PostgreSQL's `statement_timeout`, set on every reader and
    writer connection (never on the `LISTEN` connection, which waits as long as the store
    lives): a statement still running after it is cancelled and its call raises
    `TransientStorageError` ("the statement timeout expired"); `None` or 0: no timeout (the
    server's default).
    """

    sqlite_synchronous: str = "FULL"
    busy_timeout_s: float = 60.0
    max_body_bytes: int = 1024 * 1024
    follow_window_events: int = 10_000
    follow_window_bytes: int = 8 * 1024 * 1024
    reader_pool_size: int = DEFAULT_READER_POOL_SIZE
    connect_timeout_s: int | None = None
    statement_timeout_s: float | None = None

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
        _bounded_int(self.reader_pool_size, "reader_pool_size", 1, MAX_READER_POOL_SIZE)
        _connect_timeout(self.connect_timeout_s, "connect_timeout_s")
        _statement_timeout(self.statement_timeout_s, "statement_timeout_s")

    @property
    def statement_timeout_ms(self) -> int:
        """`statement_timeout_s` as PostgreSQL takes it: whole milliseconds, rounded up (a
        timeout below one millisecond stays a timeout); 0 for none."""
        return math.ceil((self.statement_timeout_s or 0) * 1000)

    @classmethod
    def from_env(cls) -> StoreOptions:
        """Options overridden by `SESSION_JOURNAL_SQLITE_SYNCHRONOUS`,
        `SESSION_JOURNAL_BUSY_TIMEOUT_S`, `SESSION_JOURNAL_READER_POOL_SIZE`,
        `SESSION_JOURNAL_CONNECT_TIMEOUT_S` and `SESSION_JOURNAL_STATEMENT_TIMEOUT_S` (an unset
        or empty variable keeps the default). A bad value is an `InvalidRecord` naming the
        variable."""
        pool_size = _env_number(
            READER_POOL_SIZE_ENV, int, f"an integer from 1 to {MAX_READER_POOL_SIZE}"
        )
        connect_timeout = _env_number(CONNECT_TIMEOUT_ENV, int, _CONNECT_TIMEOUTS)
        statement_timeout = _env_number(STATEMENT_TIMEOUT_ENV, float, _STATEMENT_TIMEOUTS)
        return cls(
            sqlite_synchronous=_synchronous_level(
                os.environ.get(SYNCHRONOUS_ENV) or "FULL", SYNCHRONOUS_ENV
            ),
            busy_timeout_s=_busy_timeout(_env_float(BUSY_TIMEOUT_ENV, 60.0), BUSY_TIMEOUT_ENV),
            reader_pool_size=_bounded_int(
                DEFAULT_READER_POOL_SIZE if pool_size is None else pool_size,
                READER_POOL_SIZE_ENV,
                1,
                MAX_READER_POOL_SIZE,
            ),
            connect_timeout_s=_connect_timeout(connect_timeout, CONNECT_TIMEOUT_ENV),
            statement_timeout_s=_statement_timeout(statement_timeout, STATEMENT_TIMEOUT_ENV),
        )
