"""The package's folders are its layers, and an import never goes up. Lowest first:

1. **values** — `errors`, `config`, `records`, `api_events`, `elicitation`, `content_blocks`
   and the private helpers `_values`, `_validation`, `_arguments`, `_clock`, `_json_text`,
   `_compat`: rules and types, no I/O.
2. **domain** — `relay/` (the chain and its projection) and `journal/` (the JSONL files and
   their index rows): no database.
3. **storage** — `storage/`: engines, the driver seam, the write path, caller-owned
   transactions, the unit of work, the repositories and ORM models. It imports values and
   domain, never a service.
4. **follow** — `follow/`: following the log (the commit signal and its wake-up sources, the
   one window, the cursor rules, the sync and async followers), on storage's protocols.
5. **services** — `services/`: one use case per method, on the unit of work's protocols.
6. **entry points** — the package itself, `store` (`Store`), `aio` (`AsyncStore`, with
   `_aio_workers` under it), `cli/` and `__main__`, `migrations` (with `_revision_checks`),
   `_maintenance`, `demo`: they put the layers below together.
7. **web** — `web/` (the HTTP layer): it imports only the public surface, `session_journal`,
   `session_journal.aio` and `session_journal.follow`, never `storage/` or a service.

A module imports modules of its own layer or of a lower one. Exemptions: the journal's facade
re-exports of `ProjectIndex` (`journal` and `journal.index`, where the public API names it),
and the CLI's `serve` sub-command, which imports `web._serve` (the web layer's command), all of
which run on first use or for type checkers only, never when the module is imported; and the old
module paths of `session_journal._moved`, which only users import: no module of the package
imports one.
Every import counts, at module level, under `TYPE_CHECKING` and inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import session_journal
from session_journal._moved import MOVED
from tests.imports import PACKAGE, imports, modules
from tests.unit.test_import_cycles import FACADE_EXPORTS

SOURCE = Path(session_journal.__file__).parent

LAYERS: dict[str, tuple[str, ...]] = {
    "values": (
        "errors",
        "config",
        "records",
        "api_events",
        "elicitation",
        "content_blocks",
        "_values",
        "_validation",
        "_arguments",
        "_clock",
        "_json_text",
        "_compat",
    ),
    "domain": ("relay", "journal"),
    "storage": ("storage",),
    "follow": ("follow",),
    "services": ("services",),
    "entry points": (
        "",
        "store",
        "aio",
        "_aio_workers",
        "cli",
        "__main__",
        "migrations",
        "_maintenance",
        "_revision_checks",
        "demo",
        "_moved",
    ),
    "web": ("web",),
}
ORDER = list(LAYERS)
WEB_MAY_IMPORT = {PACKAGE, f"{PACKAGE}.aio", f"{PACKAGE}.follow"}
FACADES = FACADE_EXPORTS | {
    (f"{PACKAGE}.journal.index", f"{PACKAGE}.services.index"),
    (f"{PACKAGE}.cli._serve", f"{PACKAGE}.web._serve"),  # `serve`, on first use
}


def layer_of(module: str) -> str:
    """The layer of a module of the package (its first name below `session_journal`)."""
    first = module.removeprefix(PACKAGE).removeprefix(".").partition(".")[0]
    for layer, names in LAYERS.items():
        if first in names:
            return layer
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and the docstring")


def violations(root: Path, moved: frozenset[str] = frozenset()) -> list[str]:
    """Every import of the package under `root` that breaks the rules of the docstring."""
    known = modules(root)
    found = []
    for name, path in known.items():
        if name in moved or name == f"{PACKAGE}._moved":
            continue  # an old path only aliases its moved module
        source = layer_of(name)
        for each in imports(name, path, known):
            target = each.target
            where = f"{name}:{each.line} imports {target}"
            if (name, target) in FACADES:
                if each.where == "module":
                    found.append(f"{where} when it is imported: only on first use")
                continue
            if any(target == old or target.startswith(old + ".") for old in moved):
                found.append(f"{where}, an old path (import its new one)")
            elif source == "web":
                if target not in WEB_MAY_IMPORT and layer_of(target) != "web":
                    found.append(f"{where}: web imports only {sorted(WEB_MAY_IMPORT)}")
            elif ORDER.index(layer_of(target)) > ORDER.index(source):
                found.append(f"{where}: {source} may not import {layer_of(target)}")
    return found


def test_no_import_goes_up_a_layer() -> None:
    assert violations(SOURCE, frozenset(MOVED)) == []


def test_every_module_is_in_a_layer() -> None:
    for name in modules(SOURCE):
        if name not in MOVED:
            layer_of(name)


def test_the_check_finds_an_import_that_goes_up(tmp_path: Path) -> None:
    root = tmp_path / PACKAGE
    for folder in ("storage", "services", "web"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "aio.py").write_text("")
    (root / "errors.py").write_text("")
    (root / "services" / "events.py").write_text("from ..errors import X\n")
    (root / "storage" / "tail.py").write_text(
        "def page() -> None:\n    from ..services.events import decode\n"
    )
    (root / "web" / "app.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .. import aio\n"
        "from ..errors import X\n"
        "if TYPE_CHECKING:\n"
        "    from ..storage.tail import Tail\n"
    )
    web_imports = "['session_journal', 'session_journal.aio', 'session_journal.follow']"
    assert violations(root) == [
        "session_journal.storage.tail:2 imports session_journal.services.events: "
        "storage may not import services",
        f"session_journal.web.app:3 imports session_journal.errors: web imports only {web_imports}",
        "session_journal.web.app:5 imports session_journal.storage.tail: "
        f"web imports only {web_imports}",
    ]


def test_the_check_finds_an_import_of_an_old_path(tmp_path: Path) -> None:
    root = tmp_path / PACKAGE
    (root / "storage").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "storage" / "__init__.py").write_text("")
    (root / "storage" / "engines.py").write_text("")
    (root / "db.py").write_text("")  # the old path, an alias
    (root / "store.py").write_text("from .db import create_engine\n")
    assert violations(root, frozenset({f"{PACKAGE}.db"})) == [
        "session_journal.store:1 imports session_journal.db, an old path (import its new one)"
    ]


def test_the_alembic_environment_imports_no_old_path() -> None:
    # env.py ships in the wheel (as `session_journal/_alembic`) and runs in every upgrade.
    env = Path(__file__).parents[2] / "alembic" / "env.py"
    tree = ast.parse(env.read_text(encoding="utf-8"))
    named = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    named |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    old = {
        name
        for name in named
        if name and any(name == path or name.startswith(path + ".") for path in MOVED)
    }
    assert not old, f"alembic/env.py imports old paths: {sorted(old)}"


def old_paths_named(path: Path) -> set[str]:
    """The old module paths (`session_journal._moved`) a file's imports name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {
            name
            for name in names
            if any(name == old or name.startswith(old + ".") for old in MOVED)
        }
    return found


# The two tests of the old paths themselves.
OLD_PATH_TESTS = {"test_moved_paths.py", "test_pickles_across_the_move.py"}


def test_the_tests_and_benchmarks_import_the_new_paths() -> None:
    # So that the aliases can go in the next release without a test noticing only then.
    repo = Path(__file__).parents[2]
    files = [*sorted((repo / "tests").rglob("*.py")), *sorted((repo / "benchmarks").glob("*.py"))]
    named = {
        str(path.relative_to(repo)): sorted(old)
        for path in files
        if path.name not in OLD_PATH_TESTS and (old := old_paths_named(path))
    }
    assert named == {}
