"""Revisions are history: none may import the package, whose code changes after them (each
carries a frozen copy of the helpers and types it needs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from session_journal import migrations

REVISIONS = sorted((migrations.script_location() / "versions").glob("*.py"))


def imported_modules(path: Path) -> list[str]:
    """Every module a file imports, at any depth."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


def test_the_revisions_are_found() -> None:
    stems = [path.stem[:4] for path in REVISIONS]
    assert stems[:6] == ["0001", "0002", "0003", "0004", "0005", "0006"]


def test_the_check_sees_a_package_import(tmp_path: Path) -> None:
    revision = tmp_path / "0007_example.py"
    revision.write_text("def upgrade() -> None:\n    from session_journal.models import Base\n")
    assert imported_modules(revision) == ["session_journal.models"]


@pytest.mark.parametrize("path", REVISIONS, ids=lambda path: path.stem)
def test_a_revision_imports_nothing_from_the_package(path: Path) -> None:
    package = [name for name in imported_modules(path) if name.split(".")[0] == "session_journal"]
    assert package == []
