"""The backend markers mean what they say (issue 24): `-m sqlite` is every test that needs no
PostgreSQL server, unit tests included, and `-m postgresql` the PostgreSQL half only; together
they are the whole suite, and no test is in both."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collected(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: nothing collected
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_sqlite_and_postgresql_split_the_suite() -> None:
    everything, sqlite, postgresql = (
        collected(),
        collected("-m", "sqlite"),
        collected("-m", "postgresql"),
    )
    assert sqlite | postgresql == everything
    assert not sqlite & postgresql
    assert any(test.startswith("tests/unit/") for test in sqlite)
    assert not any(test.startswith("tests/unit/") for test in postgresql)
    # The backend fixture's halves: `[sqlite...]` / `[postgresql...]` ids of one test.
    halves = {test for test in everything if re.search(r"\[(.*-)?postgresql[\]-]", test)}
    assert halves and halves <= postgresql
