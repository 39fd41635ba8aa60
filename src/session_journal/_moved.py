"""The old paths of the modules that moved in 0.2.0 (see CHANGELOG.md, "Moved"): each old
module is a few lines that call `alias`, so that the old path is the moved module itself (the
same object: its classes, its functions, a test's monkeypatch of it), and warns the first time
it is imported (`DeprecationWarning`, naming the new path). They go in the release after 0.2.0;
new code imports the new paths."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings

MOVED = {
    "session_journal.arguments": "session_journal._arguments",
    "session_journal.backfill": "session_journal.storage.backfill",
    "session_journal.bound": "session_journal.storage.bound",
    "session_journal.clock": "session_journal._clock",
    "session_journal.database": "session_journal.storage.database",
    "session_journal.db": "session_journal.storage.engines",
    "session_journal.driver": "session_journal.storage.driver",
    "session_journal.json_text": "session_journal._json_text",
    "session_journal.maintenance": "session_journal._maintenance",
    "session_journal.models": "session_journal.storage.models",
    "session_journal.repositories": "session_journal.storage.repositories",
    "session_journal.services.tail": "session_journal.follow.window",
    "session_journal.unit_of_work": "session_journal.storage.unit_of_work",
    "session_journal.validation": "session_journal._validation",
    "session_journal.wakeups": "session_journal.follow.wakeups",
    "session_journal.write_path": "session_journal.storage.write_path",
}
"""Each old module path, and where its module lives now."""

SPLIT = {
    "session_journal.unit_of_work": "session_journal.storage.protocols",
    "session_journal.write_path": "session_journal.storage.calls",
    "session_journal.repositories.events": "session_journal.storage.repositories.event_pages",
}
"""The old modules that were split: the moved module keeps the name, these others hold the rest
of what the old module defined (the protocols, the call objects, the page statement), which
the old path gives too."""


def alias(old: str) -> None:
    """Make the old module path `old` (the caller's `__name__`) name its moved module; for a
    package, each of its modules too (`session_journal.repositories.events` is then
    `session_journal.storage.repositories.events`, never a second copy of it).

    Warns with a `DeprecationWarning` that names the new path, at the line that imported the old
    one (the import machinery's own frames are skipped): an import that finds the old path
    already in `sys.modules` runs no code, so a process warns once for each old path."""
    new = MOVED[old]
    warnings.warn(deprecation(old), DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    for found in pkgutil.iter_modules(getattr(module, "__path__", [])):
        sys.modules[f"{old}.{found.name}"] = importlib.import_module(f"{new}.{found.name}")
    for split, rest in SPLIT.items():
        if split == old or split.startswith(old + "."):
            _give_names(importlib.import_module(MOVED[old] + split[len(old) :]), rest)


def deprecation(old: str) -> str:
    """The message of the warning an import of the old module path `old` gives: what to import
    instead (for a split module, also where the rest of what it held went) and when the old path
    goes."""
    instead = f"`{MOVED[old]}`"
    if old in SPLIT:
        instead += f" (or `{SPLIT[old]}`)"
    return (
        f"`{old}` is deprecated, import {instead} instead; the old path goes in the release"
        " after 0.2.0"
    )


def _give_names(module: object, rest: str) -> None:
    """Give `module` (a moved module, which the old path is) the names the module `rest`
    defines that it lacks: what the old module held before it was split."""
    other = importlib.import_module(rest)
    for name, value in vars(other).items():
        defined_there = getattr(value, "__module__", rest) == rest
        if not name.startswith("__") and defined_there and not hasattr(module, name):
            setattr(module, name, value)
