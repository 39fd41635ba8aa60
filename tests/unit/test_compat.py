"""Canaries for `session_journal._compat`, the one module using libraries' internals: each
fails loudly on a release that changes what it reads. Nothing else in `src/` may name one."""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa
from alembic.runtime.migration import MigrationContext

import session_journal
from session_journal import _compat

SRC = Path(session_journal.__file__).parent
INTERNALS = (
    "positiontup",
    "escaped_bind_names",
    "_on_connect_isolation_level",
    "_Connection__savepoint_seq",
    "_migrations_fn",
)


def test_the_compiler_gives_the_positional_order_of_the_binds() -> None:
    engine = sa.create_engine("sqlite://")
    table = sa.table("t", sa.column("a"), sa.column("b"))
    statement = sa.select(table.c.a).where(table.c.b > sa.bindparam("low"), table.c.a < 5)
    compiled = statement.compile(dialect=engine.dialect)
    assert isinstance(compiled, sa.sql.compiler.SQLCompiler)
    order = _compat.positional_order(compiled)
    assert order is not None and order[0] == "low" and len(order) == 2
    assert compiled.string.count("?") == 2


def test_the_dialect_keeps_the_isolation_level_given_to_create_engine() -> None:
    assert _compat.engine_isolation_level(sa.create_engine("sqlite://").dialect) is None
    engine = sa.create_engine("sqlite://", isolation_level="AUTOCOMMIT")
    assert _compat.engine_isolation_level(engine.dialect) == "AUTOCOMMIT"
    with engine.connect() as connection:  # what `bound` reads it for: not in the options
        assert "isolation_level" not in connection.get_execution_options()


def test_a_connection_counts_the_savepoints_it_names() -> None:
    names: list[str] = []
    with sa.create_engine("sqlite://").connect() as connection:
        sa.event.listen(
            connection,
            "savepoint",
            lambda conn, name: names.append(f"sa_savepoint_{_compat.savepoint_count(conn) + 1}"),
        )
        assert _compat.savepoint_count(connection) == 0
        first = connection.begin_nested()
        second = connection.begin_nested()
        assert _compat.savepoint_count(connection) == 2
        assert (
            [first._savepoint, second._savepoint] == names == ["sa_savepoint_1", "sa_savepoint_2"]
        )


def test_alembic_keeps_the_step_function_in_its_public_options() -> None:
    def steps(heads: object, context: object) -> list[object]:
        return []

    with sa.create_engine("sqlite://").connect() as connection:
        context = MigrationContext.configure(connection, opts={"fn": steps})
        assert context.opts["fn"] is steps


def test_no_other_module_reads_an_internal() -> None:
    found = [
        f"{path.relative_to(SRC)}: {name}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_compat.py"
        for name in INTERNALS
        if re.search(rf"\b{re.escape(name)}\b", path.read_text(encoding="utf-8"))
    ]
    assert found == []
