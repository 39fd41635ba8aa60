"""The one seam below SQLAlchemy: everything that talks to the DBAPI driver (sqlite3, psycopg)
directly lives here, and nowhere else.

Why go below SQLAlchemy at all: on the hot paths its per-statement and per-transaction machinery
costs about as much as the work. A page of events built from SQLAlchemy `Row`s costs more than
the rows; a single-event append spends as long in `Connection.execute` and `begin()` as in the
statements (`make bench` measures both). The statements are still built with SQLAlchemy Core
and compiled by the connection's dialect (`run`), so the SQL stays in one dialect-aware place;
only execution and transaction control skip SQLAlchemy's layers. SQLAlchemy's own view of the
connection stays right: its autobegun transaction, if any, ends with the same driver call.

Every function here reaches the driver through `_dbapi`, the connection's DBAPI connection:
sqlite3's or psycopg's own `Connection`, or, for a connection of an asyncio engine that a host
application hands to `store.bind` inside `AsyncSession.run_sync`, SQLAlchemy's adapter of
psycopg's `AsyncConnection` (`drivable` says which connections these are).

The rest of the package knows no driver: the SQLite connection setup, the transaction control
and which driver error means what (`error_code`) are here too. psycopg is an optional extra
(`session-journal[postgresql]`) and is never imported here: SQLAlchemy imports it when it makes
a PostgreSQL engine (`_psycopg`), so a SQLite-only process runs without it.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from types import ModuleType
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import AdaptedConnection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from .._compat import positional_order

_BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"  # SQLite writers take the write lock up front


def run(connection: sa.Connection, statement: sa.Executable, params: dict[str, Any]) -> Any:
    """Run a statement of a hot path on the driver's own cursor (in the connection's current
    transaction) and return the cursor. For statements that need no bind or result processing
    (bodies travel as text)."""
    sql, positions, defaults = _compiled(connection.dialect, statement)
    named = defaults | params
    dbapi = _dbapi(connection)
    values: Any
    if positions is not None:  # sqlite3: positional parameters
        cursor, values = dbapi.cursor(), [named[key] for key in positions]
    else:  # psycopg: named parameters; binary results (a tenth faster per page), but for an
        # AsyncConnection, whose adapter's cursors take no options
        adapted = isinstance(dbapi, AdaptedConnection)
        cursor, values = dbapi.cursor() if adapted else dbapi.cursor(binary=True), named
    try:
        cursor.execute(sql, values)
    except BaseException:
        cursor.close()  # a failed statement must not outlive the call in a traceback
        raise
    return cursor


def run_many(
    connection: sa.Connection, statement: sa.Executable, rows: list[dict[str, Any]]
) -> None:
    """Run a statement of a hot path once per row (`executemany`) on the driver's cursor."""
    sql, positions, defaults = _compiled(connection.dialect, statement)
    cursor = _dbapi(connection).cursor()
    if positions is None:  # psycopg: named parameters (pipelined by executemany)
        values: list[Any] = [defaults | row for row in rows]
    else:  # sqlite3: positional parameters
        values = [[(defaults | row)[key] for key in positions] for row in rows]
    try:
        if len(values) == 1:
            cursor.execute(sql, values[0])  # cheaper than executemany of one
        else:
            cursor.executemany(sql, values)
    finally:
        cursor.close()


@lru_cache(maxsize=256)  # the page statements' shapes (filters, 0-8 types) and the rest
def _compiled(
    dialect: Dialect, statement: sa.Executable
) -> tuple[str, tuple[str, ...] | None, dict[str, Any]]:
    """The SQL text, the order of positional parameters (None for named ones) and the values of
    the statement's constant binds."""
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    assert isinstance(compiled, SQLCompiler)
    positions = positional_order(compiled)
    return compiled.string, positions, dict(compiled.construct_params(_check=False))


def _dbapi(connection: sa.Connection) -> Any:
    """The DBAPI connection under `connection`, which every function here drives: sqlite3's or
    psycopg's own `Connection`, or SQLAlchemy's adapter of psycopg's `AsyncConnection` (its
    DBAPI methods run the driver's coroutines on the greenlet of `AsyncSession.run_sync`; the
    `AsyncConnection` itself would take each call and return a coroutine that nobody awaits,
    so nothing would be written)."""
    return connection.connection.dbapi_connection


def drivable(connection: sa.Connection) -> str | None:
    """`None` if the functions here can drive the connection (see `_dbapi`); else the type of
    its driver connection, for a refusal that names it. A connection of an asyncio engine is
    drivable only inside `AsyncSession.run_sync` (elsewhere SQLAlchemy raises `MissingGreenlet`
    at its first statement)."""
    dbapi = _dbapi(connection)
    if isinstance(dbapi, sqlite3.Connection):
        return None
    psycopg = _psycopg()
    raw = dbapi.driver_connection if isinstance(dbapi, AdaptedConnection) else dbapi
    if psycopg is not None and isinstance(raw, psycopg.Connection | psycopg.AsyncConnection):
        return None
    kind = type(raw)
    return f"{kind.__module__}.{kind.__qualname__}"


def _psycopg() -> ModuleType | None:
    """psycopg if it is loaded (SQLAlchemy imports it when it makes a PostgreSQL engine), else
    `None`: while it is not loaded, no connection and no error can be psycopg's."""
    return sys.modules.get("psycopg")


# --- SQLite connections ----------------------------------------------------------------------


WAL_RETRY_S = 0.01
"""How long a connection waits between two tries of switching a database file to WAL."""


def configure_sqlite(
    dbapi_connection: sqlite3.Connection, pragmas: Sequence[str], busy_timeout_s: float = 0.0
) -> None:
    """Set up a new SQLite connection: pysqlite's own transaction handling off (it would not
    emit `BEGIN` before DDL and would start transactions late: transactions begin with
    `begin_read` and `begin_write`), then `pragmas`, run outside any transaction.

    A `journal_mode` pragma is tried again for up to `busy_timeout_s`: switching a file that
    is not in WAL mode yet needs it free of writers, and SQLite answers SQLITE_BUSY at once,
    without calling its busy handler, while another client (a host's own Alembic, say) holds
    a write transaction. After the timeout the error is the driver's "database is locked"."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        for pragma in pragmas:
            if "journal_mode" in pragma:
                _retry_while_locked(cursor, pragma, busy_timeout_s)
            else:
                cursor.execute(pragma)
    finally:
        cursor.close()


def _retry_while_locked(cursor: sqlite3.Cursor, statement: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cursor.execute(statement)
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
        time.sleep(WAL_RETRY_S)


def begin_read(connection: sa.Connection) -> None:
    """SQLAlchemy's begin on a SQLite connection of a reader: a plain `BEGIN` unless one is
    open (pysqlite's own transaction handling is off, so SQLAlchemy's begin must say it); the
    snapshot starts at the first read. PostgreSQL begins by itself."""
    dbapi = _dbapi(connection)
    if isinstance(dbapi, sqlite3.Connection) and not dbapi.in_transaction:
        dbapi.execute("BEGIN")


# --- Write transactions (the write path's) ---------------------------------------------------


def begin_write(connection: sa.Connection) -> None:
    """Begin a write transaction unless one is open: on SQLite `BEGIN IMMEDIATE` (the write
    lock, taken now, so a writer waits for it up front instead of failing halfway); psycopg
    begins by itself at the first statement."""
    dbapi = _dbapi(connection)
    if isinstance(dbapi, sqlite3.Connection) and not dbapi.in_transaction:
        dbapi.execute(_BEGIN_IMMEDIATE)


def commit(connection: sa.Connection) -> None:
    """One commit of the transaction, whether or not a statement went through SQLAlchemy.
    Raises, committing nothing, if the transaction was aborted by an error that its code caught
    and went on from: PostgreSQL would answer the COMMIT by rolling back, and psycopg does not
    raise for that."""
    check_transaction(connection)
    if connection.in_transaction():
        connection.commit()  # SQLAlchemy's autobegun transaction: it commits the driver's
    else:
        _dbapi(connection).commit()


def rollback_quietly(connection: sa.Connection) -> None:
    """Roll back a SQLite connection about to be discarded, ignoring errors (it may be broken).
    PostgreSQL needs nothing: the server rolls back when the connection closes."""
    try:
        dbapi = _dbapi(connection)
        if isinstance(dbapi, sqlite3.Connection):
            dbapi.rollback()
    except Exception:
        pass


def abort(connection: sa.Connection) -> None:
    """Roll back the driver's transaction under SQLAlchemy, for a commit that failed before the
    driver was asked (SQLAlchemy then considers its transaction over, and would return the
    connection to its pool with the transaction still open). If even the rollback fails, the
    driver connection is closed and dropped from the pool: a closed connection commits nothing
    (the server rolls back)."""
    try:
        _dbapi(connection).rollback()
    except Exception:
        connection.connection.invalidate()


def commit_in_event(connection: sa.Connection) -> None:
    """Commit the driver's transaction from inside SQLAlchemy's `commit` event, which runs
    before the driver commits, with no event after it: for work that may run only once the
    commit succeeded (`bound`). SQLAlchemy's own commit then finds nothing left to commit, a
    no-op for sqlite3 and psycopg. Raises, committing nothing, if the transaction was aborted
    (as `commit`)."""
    check_transaction(connection)
    _dbapi(connection).commit()


def rollback(connection: sa.Connection) -> None:
    """Roll the transaction back, whether or not a statement went through SQLAlchemy."""
    if connection.in_transaction():
        connection.rollback()
    else:
        _dbapi(connection).rollback()


_SAVEPOINT = "SAVEPOINT batch_call"
_RELEASE = "RELEASE SAVEPOINT batch_call"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT batch_call"


def savepoint(connection: sa.Connection) -> None:
    """Mark where one call of a batch begins. One name for all: the savepoints of a batch are
    kept, so they nest, and `ROLLBACK TO` reaches the latest, the failed call's."""
    _dbapi(connection).execute(_SAVEPOINT).close()


def transaction_aborted(connection: sa.Connection) -> bool:
    """Without a round trip: whether the transaction is aborted (on PostgreSQL, by a database
    error that the code running in it caught and went on from; its `COMMIT` would roll back)."""
    dbapi = _dbapi(connection)
    psycopg = _psycopg()
    return (
        psycopg is not None
        and not isinstance(dbapi, sqlite3.Connection)
        and dbapi.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    )


def check_transaction(connection: sa.Connection) -> None:
    """Without a round trip: raise if the transaction is aborted (`transaction_aborted`)."""
    if transaction_aborted(connection):
        psycopg = _psycopg()
        assert psycopg is not None
        raise psycopg.errors.InFailedSqlTransaction(
            "current transaction is aborted by an error the call caught; its work is undone"
        )


def rollback_to_savepoint(connection: sa.Connection) -> None:
    """Undo what the call did since its savepoint (and end the savepoint)."""
    dbapi = _dbapi(connection)
    dbapi.execute(_ROLLBACK_TO).close()
    dbapi.execute(_RELEASE).close()


_NESTED = "SAVEPOINT service_call"
_NESTED_RELEASE = "RELEASE SAVEPOINT service_call"
_NESTED_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT service_call"


def nested_savepoint(connection: sa.Connection) -> None:
    """Mark where a service call made inside a unit of work (`uow=`) begins."""
    _dbapi(connection).execute(_NESTED).close()


def release_nested(connection: sa.Connection) -> None:
    """Keep the work of a service call made inside a unit of work (end its savepoint: a unit
    of work may hold many such calls, and PostgreSQL caches only 64 open subtransactions)."""
    _dbapi(connection).execute(_NESTED_RELEASE).close()


def rollback_nested(connection: sa.Connection) -> None:
    """Undo a service call made inside a unit of work, and end its savepoint."""
    dbapi = _dbapi(connection)
    dbapi.execute(_NESTED_ROLLBACK_TO).close()
    dbapi.execute(_NESTED_RELEASE).close()


# --- Lone writes (the write path's short path, `lone.py`) ------------------------------------


class Prepared:
    """A statement of a lone write, compiled once (per engine: the write path keeps its lone
    statements) and run on a `LoneCursor` with its arguments given as a tuple in the order of
    its parameters (`order`: checked here when given, else the compiled order), with no cache
    lookup or SQLAlchemy object per run. Its constants are written in its text
    (`literal_column`), not bound."""

    __slots__ = ("order", "sql")

    def __init__(
        self, dialect: Dialect, statement: sa.Executable, order: tuple[str, ...] | None = None
    ) -> None:
        if not dialect.positional:  # psycopg: compiled for positional parameters (`%s`), which
            dialect = _positional(type(dialect))  # it takes as a plain tuple
        sql, positions, _ = _compiled(dialect, statement)
        if positions is None or (order is not None and tuple(positions) != order):
            raise ValueError(f"the parameters of {sql!r} are {positions}, not {order}")
        self.sql = sql
        self.order: tuple[str, ...] = tuple(positions)

    def arguments(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """`values`, by parameter name, as the tuple of its parameters in their order."""
        return tuple([values[name] for name in self.order])


def _positional(kind: type[Dialect]) -> Dialect:
    """A dialect of `kind` that compiles positional parameters (`%s`: DBAPI's "format")."""
    made: Dialect = kind(paramstyle="format")  # type: ignore[call-arg]
    return made


class LoneCursor:
    """The driver cursor on which the write path runs lone writes: one per write connection,
    kept with it (a cursor made per write costs psycopg more than its statement's client side)
    and closed before it. `begin` and `commit` are the lone write's transaction, made on the
    driver connection, not through SQLAlchemy's execution options (with those the write path
    would discard the connection after the call, see `WritePath._keep`)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def begin(self) -> None:
        """Begin the lone write's transaction."""
        raise NotImplementedError

    def commit(self) -> None:
        """Commit the lone write that succeeded. One that failed is not ended here: the write
        path discards its connection."""
        raise NotImplementedError

    def first(self, statement: Prepared, args: tuple[Any, ...] = ()) -> Any:
        """Run the statement; its first row (`None` if it returned none)."""
        cursor = self._cursor
        cursor.execute(statement.sql, args)
        return cursor.fetchone()

    def run(self, statement: Prepared, args: tuple[Any, ...] = ()) -> None:
        """Run the statement, reading nothing back."""
        self._cursor.execute(statement.sql, args)

    def close(self) -> None:
        """Close the cursor, before its connection is used otherwise (a batch, a unit-of-work
        block), closed or discarded: on SQLite a statement it still held would keep a closed
        connection alive (see `write_path._discard_connection`)."""
        self._cursor.close()


class _SqliteLoneCursor(LoneCursor):
    __slots__ = ()

    def begin(self) -> None:
        """`BEGIN IMMEDIATE`: the write lock, up front."""
        self._cursor.execute(_BEGIN_IMMEDIATE)

    def commit(self) -> None:
        """`COMMIT` (pysqlite's own transaction handling is off)."""
        self._cursor.execute("COMMIT")


class _PsycopgLoneCursor(LoneCursor):
    __slots__ = ("_connection",)

    def __init__(self, cursor: Any) -> None:
        super().__init__(cursor)
        self._connection = cursor.connection

    def begin(self) -> None:
        """Nothing is sent: the connection is in autocommit (a client-side switch, made here
        unless the last lone write left it so), so the write's one statement is its own
        transaction, begun and committed with it in one round trip. `close` switches it back
        before the connection is used otherwise."""
        if not self._connection.autocommit:
            self._connection.autocommit = True

    def commit(self) -> None:
        """Nothing: the statement committed by itself."""

    def close(self) -> None:
        """Close the cursor and take the connection out of autocommit (for a batch, or the
        pool's reset)."""
        try:
            self._cursor.close()
        finally:
            if self._connection.autocommit:
                self._connection.autocommit = False


def lone_cursor(connection: sa.Connection) -> LoneCursor:
    """A `LoneCursor` on the write path's connection (see `_dbapi`)."""
    dbapi = _dbapi(connection)
    if isinstance(dbapi, sqlite3.Connection):
        return _SqliteLoneCursor(dbapi.cursor())
    return _PsycopgLoneCursor(dbapi.cursor())


class LoopConnection:
    """PostgreSQL: a psycopg `AsyncConnection` of its own, in autocommit, on which an asyncio
    event loop runs lone writes without a thread hand-off (`loop_writes.py`): each statement is
    its own transaction, begun and committed with it in one round trip. Made with the writer
    engine's connection arguments (`connect`), so it starts as the write path's connections do
    (the URL's `options`, `statement_timeout`, READ COMMITTED). One cursor, kept with it."""

    __slots__ = ("_connection", "_cursor")

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._cursor = connection.cursor()

    @classmethod
    async def connect(cls, engine: sa.Engine, connect_args: dict[str, Any]) -> LoopConnection:
        """A new connection to `engine`'s database (`Dialect.create_connect_args` of its URL,
        then `connect_args`, as the engine's own connections are made), in autocommit."""
        psycopg = _psycopg()
        assert psycopg is not None, "a PostgreSQL engine imported psycopg"
        _, params = engine.dialect.create_connect_args(engine.url)
        params.update(connect_args)
        connection = await psycopg.AsyncConnection.connect(autocommit=True, **params)
        return cls(connection)

    async def first(self, statement: Prepared, args: tuple[Any, ...]) -> Any:
        """Run the statement; its first row (`None` if it returned none)."""
        cursor = self._cursor
        await cursor.execute(statement.sql, args)
        return await cursor.fetchone()

    def discard(self) -> None:
        """Close it at once, without a round trip (libpq's `finish`): after a failure or a
        cancellation, whose statement may still be running on the server (which ends it), or
        once the store closed. Never while a statement of it is awaited elsewhere."""
        self._connection.pgconn.finish()


def prepare_for_wakeups(driver_connection: Any) -> None:
    """A driver connection of a wake-up source: every statement commits by itself (sqlite3,
    with its own transaction handling off, does already). On PostgreSQL it also has no
    `statement_timeout` (the store's `statement_timeout_s`, which its reader connections
    start with): the `LISTEN` connection waits for notifications as long as the store lives."""
    psycopg = _psycopg()
    if psycopg is not None and isinstance(driver_connection, psycopg.Connection):
        driver_connection.autocommit = True
        driver_connection.execute("SET statement_timeout = 0")


# --- Reads of one statement ---------------------------------------------------------------


class Pooled:
    """A driver connection checked out of an engine's pool, with its dialect: what the
    functions here need of a `sa.Connection` (`dialect`, and `connection.dbapi_connection`,
    see `_dbapi`), without building one for a read of one statement (`pooled`)."""

    __slots__ = ("connection", "dialect")

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self.connection = connection
        self.dialect = dialect


@contextmanager
def pooled(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection of `engine`'s pool for statements run by `run` only, without a
    transaction (a lone statement sees one snapshot by itself: psycopg's connection is in
    autocommit for the block, which saves the BEGIN and COMMIT round trips; pysqlite, with its
    own transaction handling off, runs a lone statement in autocommit already), returned to the
    pool afterwards (whose reset on return, a rollback, invalidates a connection the server
    ended). Typed as a `sa.Connection`
    for the repositories, whose reads of one statement use only `run` (the hot path's seam)."""
    fairy = engine.raw_connection()
    dbapi: Any = fairy.dbapi_connection
    psycopg = _psycopg()
    autocommit = psycopg is not None and isinstance(dbapi, psycopg.Connection)
    try:
        if autocommit:
            dbapi.autocommit = True
        yield cast(sa.Connection, Pooled(fairy, engine.dialect))
    finally:
        if autocommit and fairy.is_valid:  # also after an interrupt: the pool gets it back
            try:
                dbapi.autocommit = False
            except Exception as reset:  # a statement still running, or the connection died
                fairy.invalidate(reset)
        fairy.close()


# --- Driver errors ---------------------------------------------------------------------------


def is_driver_error(error: BaseException) -> bool:
    """Whether `error` is an error of a DBAPI driver (sqlite3's or psycopg's), raised bare by a
    statement sent straight to the driver."""
    psycopg = _psycopg()
    return isinstance(error, sqlite3.Error) or (
        psycopg is not None and isinstance(error, psycopg.Error)
    )


CONNECTION_FAILURE = "08006"
"""The SQLSTATE `error_code` gives psycopg's own connection failures, which carry none."""
CONNECT_TIMEOUT = "08001"
"""The SQLSTATE (sqlclient_unable_to_establish_sqlconnection) `error_code` gives psycopg's own
failure to connect within `connect_timeout` (it reports no SQLSTATE for it)."""
NO_SUCH_DATABASE = "3D000"
"""The SQLSTATE (invalid_catalog_name) `error_code` gives a server's refusal of a connection to
a database it does not have (psycopg reports no SQLSTATE for it)."""
TOO_MANY_PARAMETERS = "54023"
"""The SQLSTATE (too_many_arguments) `error_code` gives psycopg's refusal of a statement with
more parameters than the protocol carries."""
# What a server's FATAL refusal of a connection says when trying again later may succeed; any
# other FATAL refusal (no such database, no such role, a password refused) stays one.
_PASSING_FATAL = (
    "starting up",
    "shutting down",
    "too many clients",
    "remaining connection slots",
    "recovery mode",
    "terminating connection",
)


def error_code(error: BaseException) -> str | None:
    """What the database said of the driver error behind `error` (`error` itself, or the one
    SQLAlchemy wrapped), as a code: SQLite's primary result code ("SQLITE_BUSY", also for an
    extended code such as SQLITE_BUSY_SNAPSHOT), PostgreSQL's SQLSTATE ("40P01"). psycopg's own
    connection failures (refused, lost, closed: an `OperationalError` the server sent no
    SQLSTATE for) are `CONNECTION_FAILURE` (`CONNECT_TIMEOUT` when `connect_timeout` expired),
    unless the server refused the connection for good
    (a FATAL message: `NO_SUCH_DATABASE` for a database it does not have, `None` for anything
    else, such as a role it does not know); its refusal of a statement
    with too many parameters is `TOO_MANY_PARAMETERS`. `None` for anything else."""
    if isinstance(error, sa.exc.DBAPIError) and error.orig is not None:
        error = error.orig
    if isinstance(error, sqlite3.Error):
        name = getattr(error, "sqlite_errorname", None)  # only errors SQLite itself reported
        # The primary codes' names are one word; an extended code's adds `_WHAT` to its primary.
        return "_".join(name.split("_")[:2]) if isinstance(name, str) else None
    psycopg = _psycopg()
    if psycopg is None or not isinstance(error, psycopg.Error):
        return None
    if error.sqlstate:
        return str(error.sqlstate)
    if not isinstance(error, psycopg.OperationalError):
        return None
    timeout = getattr(psycopg.errors, "ConnectionTimeout", None)  # psycopg 3.2 and later
    if timeout is not None and isinstance(error, timeout):
        return CONNECT_TIMEOUT
    message = str(error)
    if "number of parameters" in message:  # refused by the client: the same call always is
        return TOO_MANY_PARAMETERS
    if "FATAL:" in message and 'database "' in message and "does not exist" in message:
        return NO_SUCH_DATABASE
    if "FATAL:" in message and not any(text in message for text in _PASSING_FATAL):
        return None  # the server refused the connection for good: no such role, a password
    return CONNECTION_FAILURE
