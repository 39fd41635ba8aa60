"""The package's modules import each other without a cycle, counting every import: at module
level, under `if TYPE_CHECKING:` and inside functions. A cycle kept working by moving one of
its imports under `TYPE_CHECKING` or into a function is still a cycle here.

The graph is read from the source with `ast`, as Python would run it: importing
`a.b.c` from module `m` imports the packages `a` and `a.b` first (running their `__init__`),
except the ones `m` is inside (those are already being imported when `m` runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import session_journal
from tests.imports import PACKAGE, Import, imports, modules

SOURCE = Path(session_journal.__file__).parent

# The one import allowed to close a cycle: `session_journal.journal` re-exports `ProjectIndex`
# because the public API names it there, while the service imports the database layer, whose
# repositories import the journal's `search` module. `journal/__init__.py` imports it only in
# its PEP 562 `__getattr__` (so on first use, after the package is initialised) and for type
# checkers; the test below fails if it ever becomes an import that runs with the package.
FACADE_EXPORTS = {("session_journal.journal", "session_journal.services.index")}


def edges(found: Import) -> Iterator[tuple[str, str]]:
    """The modules an import runs, in order: each package on the way to the target (the ones
    the importing module is inside excepted), then the target."""
    parts = found.target.split(".")
    for end in range(1, len(parts) + 1):
        module = ".".join(parts[:end])
        if module != found.source and not found.source.startswith(module + "."):
            yield found.source, module


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[Import]]:
    """The graph of every import of the package under `root` (the facade exports left out),
    and the imports behind the facade exports."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    facade = []
    for name, path in known.items():
        for found in imports(name, path, known):
            if (found.source, found.target) in FACADE_EXPORTS:
                facade.append(found)
                continue
            for source, target in edges(found):
                graph[source].add(target)
    return graph, facade


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules along it (the first repeated at the end)."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph.get(module, ())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done and (cycle := visit(target)) is not None:
                return cycle
        on_path.discard(path.pop())
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph, _ = import_graph(SOURCE)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_facade_exports_stay_lazy() -> None:
    _, facade = import_graph(SOURCE)
    # Present (else the exemption is stale and must go) and never run with the package.
    assert {(found.source, found.target) for found in facade} == FACADE_EXPORTS
    assert {found.where for found in facade} <= {"lazy", "type-checking"}, facade


def test_the_graph_sees_imports_hidden_in_functions_and_type_checking(tmp_path: Path) -> None:
    # The cycle the index once had: a repository importing the index's module under
    # TYPE_CHECKING and inside a method, while that module imports the unit of work.
    root = tmp_path / PACKAGE
    (root / "repositories").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "unit_of_work.py").write_text("from .repositories import Repository\n")
    (root / "repositories" / "__init__.py").write_text("from .rows import Repository\n")
    (root / "repositories" / "rows.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..index import Row\n"
        "class Repository:\n"
        "    def search(self) -> None:\n"
        "        from ..index import Hit\n"
    )
    (root / "index.py").write_text("from .unit_of_work import UnitOfWork\n")
    graph, _ = import_graph(root)
    assert find_cycle(graph) == [
        "session_journal.index",
        "session_journal.unit_of_work",
        "session_journal.repositories",
        "session_journal.repositories.rows",
        "session_journal.index",
    ]
    (root / "repositories" / "rows.py").write_text(
        "class Repository:\n    def search(self) -> None:\n        from ..index import Hit\n"
    )
    graph, _ = import_graph(root)
    assert find_cycle(graph) is not None  # the function-level import alone still closes it
    (root / "repositories" / "rows.py").write_text("class Repository: ...\n")
    graph, _ = import_graph(root)
    assert find_cycle(graph) is None
