"""Engines: SQLite pragmas and transaction control, PostgreSQL isolation, driver-error translation
into the `StorageError` tree (`storage_error_type`: which failures are worth a retry).

SQLite: pysqlite's own transaction handling is switched off (it would not emit `BEGIN` before DDL
and would start transactions late). Write transactions belong to the write path
(`write_path.py`), which begins them with `BEGIN IMMEDIATE`; readers begin with a plain `BEGIN`
(the `begin` listener below), their snapshot starting at their first read. WAL lets readers run
while a writer commits.

PostgreSQL: writers run in READ COMMITTED (the `event_sequences` row lock orders them); readers
run in REPEATABLE READ so that every statement of a read sees one snapshot. Event pages are one
statement (page and `latest_seq` together) and run without a transaction (`reading_one_statement`).
"""

from __future__ import annotations

import fcntl
import os
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Engine

from ..config import READER_POOL_OVERFLOW, StoreOptions
from ..errors import (
    DatabaseNotFound,
    IntegrityViolation,
    InvalidRecord,
    MissingDependency,
    PermanentStorageError,
    SessionJournalError,
    StorageError,
    TransientStorageError,
)
from . import driver

POSTGRESQL_EXTRA = "session-journal[postgresql]"
"""What to install for PostgreSQL: the package with psycopg (an optional extra)."""


SUPPORTED_DRIVERS = {"sqlite": ("", "pysqlite"), "postgresql": ("", "psycopg")}
"""The drivers the store drives, by database: sqlite3 (`sqlite:///`, `sqlite+pysqlite:///`) and
psycopg 3 (`postgresql+psycopg://`, and `postgresql://`, taken as psycopg)."""
_USE = "use sqlite:/// or postgresql+psycopg://"


def parse_url(url: str) -> sa.URL:
    """`url` parsed, `InvalidRecord` unless it is a URL of a database and driver the store
    drives (`SUPPORTED_DRIVERS`). Nothing is imported or connected: SQLAlchemy imports a driver
    only when an engine is made, so another driver is refused whether or not it is installed.
    `postgresql://` without a driver is `postgresql+psycopg://` (SQLAlchemy 2.0 would take it
    as psycopg2, 2.1 as psycopg). The messages never show the URL (it may hold a password)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidRecord(
            "invalid database URL: not of the form dialect+driver://user:password@host:port/"
            f"database; {_USE}"
        ) from None
    except ValueError as error:  # the port: SQLAlchemy's int() of what follows the host's ':'
        port = str(error).rpartition(": ")[2]  # "invalid literal for int() ...: 'abc'"
        if "@" in port:  # an unescaped '@' of a password: the "port" holds some of it
            raise InvalidRecord(
                "invalid database URL: its host:port is malformed (a password holding '@', "
                "':' or '/' must be percent-encoded, as %40, %3A, %2F)"
            ) from None
        raise InvalidRecord(
            f"invalid database URL: the port {port} is not a number (an IPv6 host goes in "
            "[brackets])"
        ) from None
    if "\x00" in (parsed.database or ""):
        raise InvalidRecord("invalid database URL: the database name holds a NUL character")
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":  # the scheme of libpq and of many hosting services
        raise InvalidRecord(
            "unsupported database 'postgres': SQLAlchemy names PostgreSQL postgresql; write "
            "postgresql+psycopg:// (or postgresql://) instead of postgres://"
        )
    if backend not in SUPPORTED_DRIVERS:
        raise InvalidRecord(f"unsupported database {backend!r}: {_USE}")
    if driver not in SUPPORTED_DRIVERS[backend]:
        raise InvalidRecord(f"unsupported driver {driver!r}: {_USE}")
    if backend == "postgresql" and not driver:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def check_url(url: str) -> str:
    """`url` if `parse_url` accepts it, as given; `postgresql://...` becomes
    `postgresql+psycopg://...`."""
    parsed = parse_url(url)
    if parsed.drivername == "postgresql+psycopg" and not url.startswith("postgresql+"):
        return parsed.render_as_string(hide_password=False)
    return url


def require_database(url: str) -> None:
    """`DatabaseNotFound` when the URL names a SQLite file that does not exist (connecting would
    create an empty one), also as a SQLite URI (`sqlite:///file:path?mode=rw&uri=true`). Only
    the path is looked at, never the file opened. PostgreSQL never creates a database on
    connect: a missing one is found when connecting."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite":
        return
    path = sqlite_file(parsed)
    if path is not None and not os.path.exists(path):
        raise DatabaseNotFound(
            f"no SQLite database at {os.path.abspath(path)}: check the URL, or create it with "
            "`session-journal db upgrade` (or `Store.open(url, upgrade=True)`)"
        )


def _refused_argument(error: Exception) -> InvalidRecord:
    """The refusal of a driver argument in the URL's query that the driver cannot take."""
    return InvalidRecord(f"invalid database URL: a query argument is refused: {error}")


def sqlite_file(parsed: sa.URL) -> str | None:
    """The file SQLite opens for a SQLite URL, or `None` for an in-memory database. Read from
    the filename SQLAlchemy hands to `sqlite3.connect` (`create_connect_args`), as SQLite reads
    it: with `uri=true`, a name that begins with `file:` is a URI (its path percent-decoded,
    `mode=memory` in its query, `:memory:` or an empty path for memory), any other name is the
    file's name as it stands (`a.db?mode=ro` included). The file need not exist."""
    try:
        arguments, options = parsed.get_dialect()().create_connect_args(parsed)
    except (ValueError, TypeError) as error:  # the driver's arguments of the URL's query
        raise _refused_argument(error) from None
    name = str(arguments[0])
    if options.get("uri") and name.startswith("file:"):
        rest = name[len("file:") :].partition("#")[0]
        path, _, query = rest.partition("?")
        if path.startswith("//"):  # an authority: empty or localhost, then the path
            path = "/" + path[2:].partition("/")[2]
        fields = urllib.parse.parse_qs(query, keep_blank_values=True)
        if "memory" in fields.get("mode", []):
            return None
        name = urllib.parse.unquote(path).partition("\x00")[0]  # SQLite stops at a NUL
    return None if name in ("", ":memory:") else name


ROLES = ("writer", "reader", "migrator", "inspector")
"""The engines' roles: the store's `writer` and `reader`; `migrator`, Alembic's (a writer with
SQLite's foreign keys off); `inspector`, the migrations' reads of the schema revision (a reader
without the store's pool size and PostgreSQL timeouts, which are never applied to migrations)."""


def create_engine(
    url: str,
    options: StoreOptions,
    *,
    role: str,
) -> Engine:
    """An engine for `role` (one of `ROLES`). Only the store's own engines, "writer" and
    "reader", take `reader_pool_size` (the reader) and the PostgreSQL `connect_timeout_s` and
    `statement_timeout_s`."""
    if role not in ROLES:
        raise ValueError(f"unknown engine role {role!r}")
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, options, role)
    if parsed.get_backend_name() == "postgresql":
        isolation = "READ COMMITTED" if role in ("writer", "migrator") else "REPEATABLE READ"
        # No ping per checkout: it would add a round trip to every call. A call on a connection
        # the server dropped (say, after a restart) fails once with StorageError, nothing of it
        # committed, and the pool is renewed. Writes are serialised per process, so a writer
        # needs few connections.
        pool: dict[str, Any] = {}
        if role == "writer":
            pool = {"pool_size": 2, "max_overflow": 2}
        elif role == "reader":
            pool = _reader_pool(options)
        if role in ("writer", "reader"):
            pool["connect_args"] = postgresql_connect_args(parsed, options, role)
        try:
            return sa.create_engine(parsed, isolation_level=isolation, **pool)
        except (ValueError, TypeError) as error:  # the driver's arguments of the URL's query
            raise InvalidRecord(
                f"invalid database URL: a query argument is refused: {error}"
            ) from None
        except ImportError as error:  # SQLAlchemy imports the driver here
            raise MissingDependency(
                f"PostgreSQL needs psycopg, which cannot be imported ({error}): "
                f"install {POSTGRESQL_EXTRA}"
            ) from error
    raise AssertionError(f"parse_url let {parsed.drivername!r} through")  # pragma: no cover


def _reader_pool(options: StoreOptions) -> dict[str, Any]:
    """The store's reader pool: `reader_pool_size` connections kept, `READER_POOL_OVERFLOW`
    more under load (SQLAlchemy's `QueuePool`, on both backends)."""
    return {"pool_size": options.reader_pool_size, "max_overflow": READER_POOL_OVERFLOW}


def postgresql_connect_args(url: sa.URL, options: StoreOptions, role: str) -> dict[str, Any]:
    """psycopg's connection arguments for the store's PostgreSQL reader and writer:
    `connect_timeout` (whole seconds) and `statement_timeout` (milliseconds) set at connection
    start-up through libpq's `options`, after the URL's own `options` (a `search_path`, say),
    which are kept. The writer's sessions also default to READ COMMITTED
    (`default_transaction_isolation`): its lone writes run in autocommit, where psycopg sends no
    `BEGIN ISOLATION LEVEL`, and must not take a stricter default of the server, the database,
    the role or the URL (their statements rely on fresh snapshots, as every writer's do)."""
    args: dict[str, Any] = {}
    if options.connect_timeout_s:
        args["connect_timeout"] = options.connect_timeout_s
    settings = []
    if options.statement_timeout_ms:
        settings.append(f"-c statement_timeout={options.statement_timeout_ms}")
    if role == "writer":
        settings.append("-c default_transaction_isolation=read\\ committed")
    if settings:
        given = url.query.get("options", ())
        kept = [given] if isinstance(given, str) else list(given)
        args["options"] = " ".join([*kept, *settings])
    return args


def _sqlite_engine(url: sa.URL, options: StoreOptions, role: str) -> Engine:
    synchronous = options.sqlite_synchronous.upper()  # checked when the options were built
    if sqlite_file(url) is None:
        raise InvalidRecord("an in-memory SQLite database cannot be shared; give a file path")
    pool = _reader_pool(options) if role == "reader" else {}
    try:
        engine = sa.create_engine(url, connect_args={"timeout": options.busy_timeout_s}, **pool)
    except (ValueError, TypeError) as error:  # the driver's arguments of the URL's query
        raise _refused_argument(error) from None
    foreign_keys = "OFF" if role == "migrator" else "ON"
    pragmas = (
        "PRAGMA journal_mode=WAL",
        # Set outside a transaction, where it takes effect (it is a no-op inside one).
        f"PRAGMA foreign_keys={foreign_keys}",
        f"PRAGMA busy_timeout={int(options.busy_timeout_s * 1000)}",
        f"PRAGMA synchronous={synchronous}",
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        driver.configure_sqlite(dbapi_connection, pragmas, options.busy_timeout_s)

    # pysqlite's own transaction handling is off: SQLAlchemy's begin must say BEGIN. The write
    # path begins the writer's transactions itself (`driver.begin_write`).
    if role in ("reader", "inspector"):
        event.listen(engine, "begin", driver.begin_read)
    elif role == "migrator":
        event.listen(engine, "begin", driver.begin_write)
    return engine


# --- The one rule for the SQLite database file -----------------------------------------------
# Nothing in this package opens, copies, locks or stats-and-reopens the SQLite database file or
# its `-wal`/`-shm` files with plain file calls: only SQLite does. SQLite's locks are POSIX
# (fcntl) locks, which belong to the process, not the descriptor, so closing *any* descriptor of
# the file drops *every* lock the process holds on it ("How To Corrupt An SQLite Database File",
# section 2.2). Another process then believes it is the last user, checkpoints and deletes the
# WAL under our open connections, and later commits land in an unlinked file: acknowledged events
# are lost. Cross-process coordination of our own (the migration lock) uses a separate file.

MIGRATION_LOCK_SUFFIX = ".migrate-lock"


def migration_lock_path(url: str) -> str:
    """The lock file that serialises migrations of a SQLite database: beside it, never it
    (the same file for a plain path and a SQLite URI of that path)."""
    database = sqlite_file(sa.make_url(url))
    if database is None:
        raise InvalidRecord("an in-memory SQLite database cannot be shared; give a file path")
    return os.path.abspath(database) + MIGRATION_LOCK_SUFFIX


@contextmanager
def sqlite_migration_lock(url: str) -> Iterator[None]:
    """Hold an exclusive `flock` on the database's migration lock file (created if needed and
    never deleted, so every process locks the same inode) for the block. Concurrent upgrades of
    one SQLite database run one after the other; SQLite's own locks do not last across the
    per-revision transactions."""
    descriptor = os.open(migration_lock_path(url), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the flock; this descriptor is not the database's


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Re-raise driver and SQLAlchemy errors as `StorageError`, chained, naming the action; a
    statement on a connection of an asyncio engine outside `run_sync` as `InvalidRecord`."""
    try:
        yield
    except SessionJournalError:
        raise
    except (exc.MissingGreenlet, exc.StatementError) as error:
        if isinstance(error, exc.StatementError) and not isinstance(
            error.orig, exc.MissingGreenlet
        ):
            if not is_database_error(error):
                raise
            raise storage_error(action, error) from error
        # A bound connection of an asyncio engine, outside AsyncSession.run_sync.
        raise InvalidRecord(
            f"{action}: the connection is of an asyncio engine, which the store can drive "
            "only inside AsyncSession.run_sync: call it there "
            "(await session.run_sync(lambda sync_session: ...))"
        ) from error
    except Exception as error:
        if not is_database_error(error):
            raise
        # Driver errors arrive bare from statements sent straight to the driver (BEGIN on
        # SQLite, the page fetch): "database is locked" after the busy timeout, for one.
        raise storage_error(action, error) from error


def storage_error(action: str, error: BaseException, *, shared: bool = False) -> StorageError:
    """The `StorageError` (of the subclass `storage_error_type` gives) that reports `error` as
    the failure of `action`, chained to it. `shared`: the failure ended the work of several
    callers at once (a batch of the write path); a constraint violation is then no one caller's
    own, and each of them gets a plain `StorageError`."""
    kind = storage_error_type(error)
    if shared and issubclass(kind, IntegrityViolation):
        kind = StorageError
    detail = error_detail(error)
    code = driver.error_code(error)
    if code == QUERY_CANCELED:
        detail = f"{_cancel_reason(detail)} ({detail})"
    elif code == driver.CONNECT_TIMEOUT:
        detail = f"the connect timeout expired (StoreOptions.connect_timeout_s) ({detail})"
    failure = kind(f"{action} failed: {detail}")
    failure.__cause__ = error
    return failure


# What a database failure means to its caller, in one place: worth a retry (transient), not
# (permanent), or a constraint that the caller's own statements broke. Keyed by what the database
# said (`driver.error_code`): SQLite's primary result codes (sqlite.org/rescode.html), PostgreSQL's
# SQLSTATEs, a code or else its two-character class (the errcodes appendix of its manual).
# Anything else (an I/O error, say, which may or may not recur) stays a plain `StorageError`.
_STORAGE_ERRORS: dict[str, type[StorageError]] = {
    "SQLITE_BUSY": TransientStorageError,  # locked by another connection past the busy timeout
    "SQLITE_LOCKED": TransientStorageError,  # a table locked by a connection of this process
    "SQLITE_PROTOCOL": TransientStorageError,  # a lost race for a WAL lock
    "SQLITE_CONSTRAINT": IntegrityViolation,
    "SQLITE_ERROR": PermanentStorageError,  # no such table or column: a damaged schema
    "SQLITE_CORRUPT": PermanentStorageError,  # a damaged database file
    "SQLITE_NOTADB": PermanentStorageError,  # the file is no database
    "SQLITE_FULL": PermanentStorageError,  # the disk is full
    "SQLITE_READONLY": PermanentStorageError,  # a read-only database
    "SQLITE_CANTOPEN": PermanentStorageError,  # the file cannot be opened (no such directory)
    "08": TransientStorageError,  # connection exception: refused, lost (`driver.error_code`)
    "40": TransientStorageError,  # transaction rollback: a deadlock, a serialization failure
    "55P03": TransientStorageError,  # lock_not_available: locked past `lock_timeout`
    "57014": TransientStorageError,  # query_canceled: past `statement_timeout`, or cancelled
    "57P01": TransientStorageError,  # admin_shutdown: the server is shutting down
    "57P02": TransientStorageError,  # crash_shutdown
    "57P03": TransientStorageError,  # cannot_connect_now: the server is starting up
    "53300": TransientStorageError,  # too_many_connections
    "23": IntegrityViolation,  # integrity constraint violation
    "42": PermanentStorageError,  # undefined table or column (a damaged schema), privileges
    "22": PermanentStorageError,  # data exception: a value the column cannot hold
    "25006": PermanentStorageError,  # read_only_sql_transaction: a read-only database
    "53100": PermanentStorageError,  # disk_full
    "3D000": DatabaseNotFound,  # invalid_catalog_name: no such database
    "54": PermanentStorageError,  # program limit exceeded: too many parameters, too complex
    "XX001": PermanentStorageError,  # data_corrupted
    "XX002": PermanentStorageError,  # index_corrupted
}

QUERY_CANCELED = "57014"
"""PostgreSQL's SQLSTATE of a statement cancelled: its `statement_timeout` expired
(`StoreOptions.statement_timeout_s`), or someone cancelled it (`pg_cancel_backend`)."""


def _cancel_reason(detail: str) -> str:
    """What a cancelled statement's message means, in words. The server says which of the two
    it was only in its message (in English unless `lc_messages` says otherwise)."""
    if "statement timeout" in detail:
        return "the statement timeout expired (StoreOptions.statement_timeout_s)"
    return (
        "the statement was cancelled: its statement timeout expired, or it was cancelled by request"
    )


_CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def storage_error_type(error: BaseException) -> type[StorageError]:
    """The `StorageError` subclass that reports the database error `error` (see the table
    above); SQLAlchemy's own verdicts count too: a connection it found lost, a pool that had
    no connection to give within its timeout, are transient."""
    code = driver.error_code(error)
    if code is not None:
        kind = _STORAGE_ERRORS.get(code) or _STORAGE_ERRORS.get(code[:2])
        if kind is not None:
            return kind
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return TransientStorageError
    if isinstance(error, exc.TimeoutError):
        return TransientStorageError
    return StorageError


def is_conflict(error: BaseException) -> bool:
    """Whether the database rolled back the statement of `error` to end a deadlock or a
    serialization conflict (PostgreSQL's 40P01, 40001): run again, it is expected to pass."""
    return driver.error_code(error) in _CONFLICTS


def is_database_error(error: BaseException) -> bool:
    """Whether `error` comes from SQLAlchemy or a driver (what `translate_errors` translates)."""
    return isinstance(error, exc.SQLAlchemyError) or driver.is_driver_error(error)


def error_detail(error: BaseException) -> str:
    """The first line of what the driver said (SQLAlchemy wraps it as `orig`), else the
    error's repr for anything that is not a database error."""
    if is_database_error(error):
        text = str(getattr(error, "orig", None) or error)
        return text.splitlines()[0] if text else type(error).__name__
    return str(error) if isinstance(error, SessionJournalError) else repr(error)
