"""Reading the package's imports from its source with `ast`, as Python would run them: every
import counts, at module level, under `if TYPE_CHECKING:` and inside functions (the import-cycle
and layering tests read the graph from here)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "session_journal"


@dataclass(frozen=True)
class Import:
    """One import statement of `source`, the module it names, and where it runs."""

    source: str
    target: str
    line: int
    where: str  # "module", "type-checking", "function" or "lazy" (a package's __getattr__)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` (its directory), by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """The imports of module `name` that name a module of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node, where in _walk(tree.body, "module", path.name == "__init__.py"):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            # `from a import b` imports the module `a.b` when there is one, else takes a name
            # from `a` (whose package imports ran first anyway).
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield Import(name, target, node.lineno, where)


def _walk(
    body: list[ast.stmt], where: str, in_init: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, where
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lazy = where == "module" and in_init and node.name == "__getattr__"
            yield from _walk(node.body, "lazy" if lazy else "function", in_init)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.body, "type-checking", in_init)
            yield from _walk(node.orelse, where, in_init)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    statements = [c for c in children if isinstance(c, ast.stmt)]
                    nested = [c for c in children if not isinstance(c, ast.stmt)]
                    yield from _walk(statements, where, in_init)
                    for child in nested:  # except handlers and match cases hold a body
                        yield from _walk(getattr(child, "body", []), where, in_init)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
