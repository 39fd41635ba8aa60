"""Which `StorageError` a driver error becomes (no database): every entry of the one table in
`db.py`, with driver errors built by hand as sqlite3 and psycopg raise them."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
import sqlalchemy as sa

import session_journal
from session_journal import (
    DatabaseNotFound,
    IntegrityViolation,
    PermanentStorageError,
    SessionJournalError,
    StorageError,
    TransientStorageError,
)
from session_journal.storage import driver
from session_journal.storage import engines as db_module
from session_journal.storage.engines import (
    is_conflict,
    storage_error,
    storage_error_type,
    translate_errors,
)


def sqlite_error(name: str, kind: type[sqlite3.Error] = sqlite3.OperationalError) -> sqlite3.Error:
    """A sqlite3 error as the module raises it for SQLite's result code `name`."""
    error = kind(f"failed with {name}")
    error.sqlite_errorcode = getattr(sqlite3, name)  # type: ignore[attr-defined]
    error.sqlite_errorname = name  # type: ignore[attr-defined]
    return error


def postgres_error(sqlstate: str) -> psycopg.Error:
    """A psycopg error as it raises it for a server's `sqlstate`."""
    return psycopg.errors.lookup(sqlstate)(f"failed with {sqlstate}")


SQLITE_CASES = [
    ("SQLITE_BUSY", sqlite3.OperationalError, TransientStorageError),  # "database is locked"
    ("SQLITE_BUSY_SNAPSHOT", sqlite3.OperationalError, TransientStorageError),
    ("SQLITE_LOCKED", sqlite3.OperationalError, TransientStorageError),
    ("SQLITE_PROTOCOL", sqlite3.OperationalError, TransientStorageError),
    ("SQLITE_CONSTRAINT_FOREIGNKEY", sqlite3.IntegrityError, IntegrityViolation),
    ("SQLITE_CONSTRAINT_UNIQUE", sqlite3.IntegrityError, IntegrityViolation),
    ("SQLITE_ERROR", sqlite3.OperationalError, PermanentStorageError),  # "no such table"
    ("SQLITE_CORRUPT", sqlite3.DatabaseError, PermanentStorageError),
    ("SQLITE_NOTADB", sqlite3.DatabaseError, PermanentStorageError),
    ("SQLITE_FULL", sqlite3.OperationalError, PermanentStorageError),
    ("SQLITE_READONLY", sqlite3.OperationalError, PermanentStorageError),
    ("SQLITE_CANTOPEN", sqlite3.OperationalError, PermanentStorageError),
    ("SQLITE_IOERR_WRITE", sqlite3.OperationalError, StorageError),  # may or may not recur
]

POSTGRES_CASES = [
    ("08006", TransientStorageError),  # connection_failure
    ("08001", TransientStorageError),  # the client could not connect
    ("40001", TransientStorageError),  # serialization_failure
    ("40P01", TransientStorageError),  # deadlock_detected
    ("55P03", TransientStorageError),  # lock_not_available
    ("57P01", TransientStorageError),  # admin_shutdown
    ("57P02", TransientStorageError),  # crash_shutdown
    ("57P03", TransientStorageError),  # cannot_connect_now
    ("53300", TransientStorageError),  # too_many_connections
    ("23503", IntegrityViolation),  # foreign_key_violation
    ("23505", IntegrityViolation),  # unique_violation
    ("42P01", PermanentStorageError),  # undefined_table
    ("42703", PermanentStorageError),  # undefined_column
    ("22001", PermanentStorageError),  # string_data_right_truncation
    ("25006", PermanentStorageError),  # read_only_sql_transaction
    ("53100", PermanentStorageError),  # disk_full
    ("54023", PermanentStorageError),  # too_many_arguments
    ("3D000", DatabaseNotFound),  # invalid_catalog_name
    ("XX001", PermanentStorageError),  # data_corrupted
    ("XX002", PermanentStorageError),  # index_corrupted
    ("25P02", StorageError),  # in_failed_sql_transaction: the caller's own code swallowed one
    # query_canceled: past `statement_timeout` (or cancelled by request); nothing of the call
    # was committed and a later attempt may finish in time, as one past `lock_timeout`
    ("57014", TransientStorageError),
    ("XX000", StorageError),  # internal_error
]


@pytest.mark.parametrize(("name", "kind", "expected"), SQLITE_CASES)
def test_a_sqlite_error_is_mapped_by_its_primary_result_code(
    name: str, kind: type[sqlite3.Error], expected: type[StorageError]
) -> None:
    error = sqlite_error(name, kind)
    assert driver.error_code(error) == "_".join(name.split("_")[:2])
    assert storage_error_type(error) is expected
    wrapped = sa.exc.OperationalError("INSERT ...", {}, error)  # as SQLAlchemy raises it
    assert storage_error_type(wrapped) is expected


@pytest.mark.parametrize(("sqlstate", "expected"), POSTGRES_CASES)
def test_a_postgresql_error_is_mapped_by_its_sqlstate_or_its_class(
    sqlstate: str, expected: type[StorageError]
) -> None:
    error = postgres_error(sqlstate)
    assert driver.error_code(error) == sqlstate
    assert storage_error_type(error) is expected
    wrapped = sa.exc.DBAPIError("INSERT ...", {}, error)
    assert storage_error_type(wrapped) is expected


def test_every_entry_of_the_table_has_a_case() -> None:
    table = db_module._STORAGE_ERRORS
    codes = ["_".join(name.split("_")[:2]) for name, _, _ in SQLITE_CASES]
    codes += [sqlstate for sqlstate, _ in POSTGRES_CASES] + [driver.CONNECTION_FAILURE]
    covered = {code if code in table else code[:2] for code in codes}
    assert set(table) <= covered, set(table) - covered


def test_a_psycopg_connection_failure_without_a_sqlstate_is_transient() -> None:
    # What psycopg raises itself when the server goes away mid-call or refuses the connection.
    for message in ("server closed the connection unexpectedly", "connection refused"):
        error = psycopg.OperationalError(message)
        assert error.sqlstate is None
        assert driver.error_code(error) == driver.CONNECTION_FAILURE
        assert storage_error_type(error) is TransientStorageError
    assert storage_error_type(psycopg.InterfaceError("bad use")) is StorageError


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('connection failed: FATAL:  database "gone" does not exist', DatabaseNotFound),
        ('connection failed: FATAL:  role "nobody" does not exist', StorageError),
        ("connection failed: FATAL:  password authentication failed", StorageError),
        ("connection failed: FATAL:  the database system is starting up", TransientStorageError),
        ("connection failed: FATAL:  sorry, too many clients already", TransientStorageError),
        ("FATAL:  terminating connection due to administrator command", TransientStorageError),
        (
            "sending query and params failed: number of parameters must be between 0 and 65535",
            PermanentStorageError,
        ),
    ],
)
def test_a_psycopg_refusal_for_good_is_not_transient(
    message: str, expected: type[StorageError]
) -> None:
    # Retrying a connection to a database or role that does not exist would never end.
    assert storage_error_type(psycopg.OperationalError(message)) is expected


def test_sqlalchemy_verdicts_count_when_the_driver_gives_no_code() -> None:
    closed = sqlite3.ProgrammingError("Cannot operate on a closed database.")  # no result code
    assert driver.error_code(closed) is None
    lost = sa.exc.OperationalError("SELECT 1", {}, closed, connection_invalidated=True)
    assert storage_error_type(lost) is TransientStorageError
    assert storage_error_type(sa.exc.OperationalError("SELECT 1", {}, closed)) is StorageError
    pool = sa.exc.TimeoutError("QueuePool limit of size 2 overflow 2 reached")
    assert storage_error_type(pool) is TransientStorageError
    assert storage_error_type(sa.exc.ResourceClosedError("closed")) is StorageError
    assert storage_error_type(RuntimeError("not a database error")) is StorageError


def test_a_storage_error_names_the_action_and_chains_the_driver_error() -> None:
    error = sqlite_error("SQLITE_BUSY")
    failure = storage_error("record startup fault of 's'", error)
    assert type(failure) is TransientStorageError
    assert str(failure) == "record startup fault of 's' failed: failed with SQLITE_BUSY"
    assert failure.__cause__ is error


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (
            psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
            TransientStorageError,
            "load failed: the statement timeout expired (StoreOptions.statement_timeout_s) "
            "(canceling statement due to statement timeout)",
        ),
        (
            psycopg.errors.QueryCanceled("canceling statement due to user request"),
            TransientStorageError,
            "load failed: the statement was cancelled: its statement timeout expired, or it was "
            "cancelled by request (canceling statement due to user request)",
        ),
        (
            psycopg.errors.ConnectionTimeout("connection timeout expired"),
            TransientStorageError,
            "load failed: the connect timeout expired (StoreOptions.connect_timeout_s) "
            "(connection timeout expired)",
        ),
    ],
)
def test_a_timeout_says_which_timeout_expired(
    error: psycopg.Error, kind: type[StorageError], message: str
) -> None:
    failure = storage_error("load", sa.exc.OperationalError("SELECT ...", {}, error))
    assert (type(failure), str(failure)) == (kind, message)


def test_a_violation_that_ends_several_callers_work_is_no_one_callers_own() -> None:
    violation = postgres_error("23503")
    assert type(storage_error("write", violation)) is IntegrityViolation
    assert type(storage_error("write", violation, shared=True)) is StorageError
    lost = postgres_error("57P01")  # the database's failure: the same for every caller
    assert type(storage_error("write", lost, shared=True)) is TransientStorageError
    full = sqlite_error("SQLITE_FULL")
    assert type(storage_error("write", full, shared=True)) is PermanentStorageError


def test_translate_errors_raises_the_subclass_chained() -> None:
    error = sqlite_error("SQLITE_CONSTRAINT_UNIQUE", sqlite3.IntegrityError)
    with (
        pytest.raises(IntegrityViolation, match=r"^save session failed: ") as raised,
        translate_errors("save session"),
    ):
        raise sa.exc.IntegrityError("INSERT ...", {}, error)
    assert isinstance(raised.value.__cause__, sa.exc.IntegrityError)
    with pytest.raises(KeyError), translate_errors("save session"):
        raise KeyError("not a database error: passed on")


def test_only_deadlocks_and_serialization_failures_are_conflicts() -> None:
    assert is_conflict(postgres_error("40P01"))
    assert is_conflict(postgres_error("40001"))
    assert is_conflict(sa.exc.OperationalError("UPDATE ...", {}, postgres_error("40P01")))
    assert not is_conflict(postgres_error("55P03"))
    assert not is_conflict(sqlite_error("SQLITE_BUSY"))
    assert not is_conflict(RuntimeError("no"))


def test_the_tree_keeps_except_storage_error_working_and_is_exported() -> None:
    assert issubclass(TransientStorageError, StorageError)
    assert issubclass(PermanentStorageError, StorageError)
    assert issubclass(IntegrityViolation, PermanentStorageError)
    assert not issubclass(TransientStorageError, PermanentStorageError)
    assert issubclass(StorageError, SessionJournalError)
    for name in ("TransientStorageError", "PermanentStorageError", "IntegrityViolation"):
        assert name in session_journal.__all__
        assert getattr(session_journal, name).__doc__
