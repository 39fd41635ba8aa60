"""Importing the parts that do no database I/O loads no database code: every module of
`session_journal.journal` and `session_journal.relay`, the records and event bodies, and the
package itself, whose database-backed names (`Store`, `UnitOfWork`, `SCHEMA_LEVEL`) and
`journal.ProjectIndex` are imported on first use. The checks run in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import session_journal

DATABASE_MODULES = ("sqlalchemy", "psycopg", "alembic")
SOURCE = Path(session_journal.__file__).parent

# The top-level modules without database I/O (the rest of the top level is the database layer).
PURE_TOP_LEVEL = [
    "errors",
    "config",
    "_validation",
    "records",
    "api_events",
    "elicitation",
    "_clock",
    "_json_text",
    "content_blocks",
]


def pure_modules() -> list[str]:
    """`session_journal`, its pure top-level modules, and every module of `journal/` and
    `relay/` (found on disk, so a new module there is checked too)."""
    names = ["session_journal", *(f"session_journal.{name}" for name in PURE_TOP_LEVEL)]
    for package in ("journal", "relay"):
        names.append(f"session_journal.{package}")
        for path in sorted((SOURCE / package).glob("*.py")):
            if path.stem != "__init__":
                names.append(f"session_journal.{package}.{path.stem}")
    return names


def loaded_after(statements: list[str]) -> dict[str, list[str]]:
    """For each statement, run in order in one fresh interpreter: the database modules loaded
    once it has run."""
    script = f"""
import json, sys
loaded = {{}}
for statement in {statements!r}:
    exec(statement, {{}})
    loaded[statement] = sorted(
        name for name in sys.modules if name.partition(".")[0] in {DATABASE_MODULES!r}
    )
print(json.dumps(loaded))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, list[str]] = json.loads(result.stdout)
    return loaded


def test_the_pure_modules_load_no_database_code() -> None:
    # One interpreter for all: each module is checked right after its own import, and a module
    # that loaded database code would be the first one to show it.
    statements = [f"import {module}" for module in pure_modules()]
    assert len(statements) > 20
    assert loaded_after(statements) == {statement: [] for statement in statements}


def test_the_journal_and_its_index_names_load_no_database_code() -> None:
    statements = [
        "from session_journal.journal import IndexRow, IndexSink, JournalWriter, SearchHit",
        "from session_journal.journal.search import MAX_QUERY_CHARS, parse_query",
        "from session_journal.journal.index import MAX_SEARCH_LIMIT, IndexRow, SearchTerm",
        "from session_journal import InvalidRecord, SessionRecord, StorageError, StoreOptions",
    ]
    assert loaded_after(statements) == {statement: [] for statement in statements}


@pytest.mark.parametrize(
    "statement",
    [
        "from session_journal import Store",
        "from session_journal.journal import ProjectIndex",
    ],
)
def test_a_database_backed_name_loads_the_database_layer_on_first_use(statement: str) -> None:
    # The check above can fail: these names do load SQLAlchemy (and the driver-free dialects).
    [loaded] = loaded_after([statement]).values()
    assert "sqlalchemy" in loaded


def test_the_lazy_names_are_the_real_ones() -> None:
    import session_journal.journal as journal
    import session_journal.journal.index as old_index
    from session_journal import SCHEMA_LEVEL, Store, UnitOfWork, migrations
    from session_journal.services.index import ProjectIndex
    from session_journal.storage.unit_of_work import UnitOfWork as UnitOfWorkClass
    from session_journal.store import Store as StoreClass

    assert (Store, UnitOfWork, SCHEMA_LEVEL) == (
        StoreClass,
        UnitOfWorkClass,
        migrations.SCHEMA_LEVEL,
    )
    assert journal.ProjectIndex is ProjectIndex is old_index.ProjectIndex
    for module in (session_journal, journal, old_index):
        assert all(hasattr(module, name) for name in module.__all__), module
        with pytest.raises(AttributeError):
            _ = module.NoSuchName  # type: ignore[attr-defined]
    assert set(session_journal.__all__) <= set(dir(session_journal))


def test_everything_exported_imports_in_a_fresh_interpreter() -> None:
    statements = [
        f"from {module} import *"
        for module in ("session_journal", "session_journal.journal", "session_journal.relay")
    ]
    loaded = loaded_after(statements)
    assert set(loaded) == set(statements)
