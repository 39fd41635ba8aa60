"""A SQLite-only install (no `postgresql` extra): psycopg is never imported, and a PostgreSQL URL
says which extra to install.

Each scenario runs in a fresh interpreter whose `sitecustomize` refuses to import psycopg, as if it
were not installed, and notes every attempt in a file. SQLite only by nature: no server is
contacted (the PostgreSQL URL fails before it connects).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = '''
import os
import sys


class NoPsycopg:
    """A meta path finder that refuses psycopg, as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c"):
            with open(os.environ["PSYCOPG_ATTEMPTS"], "a") as attempts:
                attempts.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPsycopg())
'''

SQLITE_SCENARIO = """
import sys

import session_journal
from session_journal import ApiEventFilter, SessionRecord, Store

with Store.open(sys.argv[1], upgrade=True) as store:
    store.sessions.save(SessionRecord(id="s", project_id="p"))
    assert store.faults.record_startup_fault("s", "image pull failed")
    page = store.events.load(ApiEventFilter(session_id="s"), after_seq=0, limit=10)
    print([event.event.type for event in page.events])
print("psycopg loaded:", "psycopg" in sys.modules)
"""

POSTGRESQL_SCENARIO = """
import sys

from session_journal import SessionJournalError, Store

try:
    Store.open(sys.argv[1])
except SessionJournalError as error:
    print(type(error).__name__, error)
"""

POSTGRESQL_URL = "postgresql+psycopg://nobody@127.0.0.1:5432/nothing"


class WithoutPsycopg:
    """Runs Python in a fresh interpreter that cannot import psycopg."""

    def __init__(self, directory: Path) -> None:
        shim = directory / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(SHIM)
        self.attempts = directory / "psycopg-attempts.txt"
        path = [str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
            "PSYCOPG_ATTEMPTS": str(self.attempts),
        }
        self.directory = directory

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            env=self.env,
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def attempted(self) -> list[str]:
        return self.attempts.read_text().split() if self.attempts.exists() else []


@pytest.fixture
def without_psycopg(tmp_path: Path) -> WithoutPsycopg:
    return WithoutPsycopg(tmp_path)


def test_sqlite_works_and_never_imports_psycopg(
    without_psycopg: WithoutPsycopg, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    done = without_psycopg.run("-c", SQLITE_SCENARIO, url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['session_fault']\npsycopg loaded: False\n"
    check = without_psycopg.run("-m", "session_journal", "--url", url, "db", "check")
    assert check.returncode == 0, check.stderr
    assert "verdict: up to date" in check.stdout
    assert without_psycopg.attempted() == []


def test_a_postgresql_url_says_which_extra_to_install(without_psycopg: WithoutPsycopg) -> None:
    done = without_psycopg.run("-c", POSTGRESQL_SCENARIO, POSTGRESQL_URL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("MissingDependency PostgreSQL needs psycopg, which cannot be ")
    assert done.stdout.endswith(": install session-journal[postgresql]\n")
    assert without_psycopg.attempted()  # the shim refused it: psycopg is installed here

    check = without_psycopg.run("-m", "session_journal", "--url", POSTGRESQL_URL, "db", "check")
    assert check.returncode == 1
    assert check.stdout == ""
    assert check.stderr.startswith("session-journal: PostgreSQL needs psycopg")
    assert check.stderr.endswith("install session-journal[postgresql]\n")
    assert "Traceback" not in check.stderr
