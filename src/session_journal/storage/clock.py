"""The database's clock: the one clock of consumers' leases (`store.consumers.acquire`).

Leases expire by the clock the statement reads where it runs, so that replicas on hosts whose
clocks disagree still agree on who holds a consumer: on PostgreSQL the server's
`clock_timestamp()` (the time as the statement runs, not the transaction's start), on SQLite the
host's wall clock read by the statement (`julianday('now')`, one value for the whole statement).
Both are milliseconds since the epoch.

The seam: every statement reads the clock as `COALESCE(:clock_ms, <the database's clock>)`, and
`DATABASE_CLOCK.argument()` gives `clock_ms` — `None` (the database's clock) unless a test pinned
it (`DATABASE_CLOCK.pinned_ms`), so that expiry and clock jumps are tested on both backends with
an injected clock and never by moving the machine's. Nothing else reads a clock for leases.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

CLOCK_PARAMETER = "clock_ms"
"""The name of the clock's parameter in the statements that read it."""


class DatabaseClock:
    """Where the statements' clock comes from: the database's, or a time a test pinned."""

    __slots__ = ("pinned_ms",)

    def __init__(self) -> None:
        self.pinned_ms: int | None = None  # a test's time, milliseconds since the epoch

    def argument(self) -> int | None:
        """The value of `CLOCK_PARAMETER`: `None` (the database's clock), or the pinned time."""
        return self.pinned_ms


DATABASE_CLOCK = DatabaseClock()
"""The process's clock seam (tests pin it; the package never does)."""


def now_ms(dialect_name: str) -> sa.ColumnElement[Any]:
    """The statement's time in milliseconds since the epoch, by the database's clock (see the
    module), or `clock_ms` when given. Its constants are in its text: its one parameter is
    `clock_ms`."""
    pinned = sa.bindparam(CLOCK_PARAMETER, type_=sa.BigInteger)
    actual: sa.ColumnElement[Any]
    if dialect_name == "postgresql":
        since_epoch = sa.extract("epoch", sa.func.clock_timestamp())
        actual = sa.func.floor(since_epoch * sa.literal_column("1000"))
    else:  # SQLite: Julian days, with millisecond precision
        days = sa.func.julianday(sa.literal_column("'now'")) - sa.literal_column("2440587.5")
        actual = days * sa.literal_column("86400000.0")
    return sa.func.coalesce(pinned, sa.cast(actual, sa.BigInteger))
