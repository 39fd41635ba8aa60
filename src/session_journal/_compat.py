"""Every use of a library's internals, in one place (issue 24). Each function reads one thing
that the library keeps but does not publish; `tests/unit/test_compat.py` holds a canary for each,
which fails loudly on a release that changes it. `pyproject.toml` bounds these libraries
(`sqlalchemy<2.2`); nothing here writes to a library's state."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler


def positional_order(compiled: SQLCompiler) -> tuple[str, ...] | None:
    """The names of a compiled statement's binds in the order of its positional parameters
    (None for a named paramstyle). SQLAlchemy's compiler keeps them as `positiontup`; the
    driver seam (`driver.run`) needs them to call the DBAPI cursor itself. A statement whose
    bind names SQLAlchemy had to escape (`escaped_bind_names`) is refused: its names differ."""
    if compiled.escaped_bind_names:
        raise AssertionError(f"a bind name was escaped: {compiled.escaped_bind_names}")
    order = compiled.positiontup
    return None if order is None else tuple(order)


def engine_isolation_level(dialect: Dialect) -> str | None:
    """The isolation level given to `create_engine(isolation_level=...)`, if any: the dialect
    keeps it as `_on_connect_isolation_level` (no public accessor; a Connection's
    `get_execution_options()` holds only a level set on it or its engine's options)."""
    level = getattr(dialect, "_on_connect_isolation_level", None)
    return level if isinstance(level, str) else None


def savepoint_count(connection: sa.Connection) -> int | None:
    """How many savepoints SQLAlchemy has named on this Connection (`sa_savepoint_<n>`): the
    name-mangled `Connection.__savepoint_seq`. The `savepoint` event gets `name=None` for a
    savepoint SQLAlchemy names itself after the event; the next name is `count + 1`."""
    count: Any = getattr(connection, "_Connection__savepoint_seq", None)
    return count if isinstance(count, int) else None
