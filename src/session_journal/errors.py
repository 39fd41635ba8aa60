"""The error tree: every failure a public call reports derives from `SessionJournalError`."""

from __future__ import annotations


class SessionJournalError(Exception):
    """Base of every error raised by session-journal."""


class SchemaOutOfDate(SessionJournalError):
    """The database has no schema or an older revision than this code's head."""


class IncompatibleSchema(SessionJournalError):
    """The database was migrated by newer code that this code may not use."""


class InvalidRecord(SessionJournalError, ValueError):
    """Bad input: a malformed id, record, body or argument. Nothing was written."""


class MigrationFailed(SessionJournalError):
    """A revision failed and was rolled back: the database is at the revision before it."""


class SessionNotFound(SessionJournalError):
    """The session named by a call does not exist."""


class LifecycleConflict(SessionJournalError):
    """A lifecycle operation is already running for the session."""


class NotOperationOwner(SessionJournalError):
    """The caller does not own the session's open checkpoint operation."""


class ChainBroken(SessionJournalError):
    """A relay event's ordinal or digest does not follow the stored chain."""


class StorageError(SessionJournalError):
    """The database failed (unreachable, locked too long, disk full); the driver error is
    chained."""


class StoreClosed(SessionJournalError):
    """The store was closed (`Store.close()`, or leaving its `with` block): every call made on
    it afterwards raises this, and nothing is read or written."""
