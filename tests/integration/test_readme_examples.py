"""The README's Python examples run, in order, against a store on each backend."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from session_journal import SessionRecord, Store

README = Path(__file__).resolve().parents[2] / "README.md"
# Blocks that show a signature, not code to run.
SIGNATURES = ("store = Store.open(url=None, *, upgrade=False, options=None)",)


def examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [block for block in blocks if not block.startswith(SIGNATURES)]


def test_the_readme_has_examples() -> None:
    assert len(examples()) >= 4


def test_the_readme_examples_run(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with Store.open(url, upgrade=True) as store:
        # The first example opens (and closes) its own store on SQLite; the others use the
        # store of the test's backend, with the first example's session, as a reader who runs
        # them in one session would.
        store.sessions.save(SessionRecord(id="session-1", project_id="project-1"))
        namespace: dict[str, object] = {}
        for number, block in enumerate(examples(), start=1):
            namespace["store"] = store
            exec(compile(block, f"README example {number}", "exec"), namespace)
    assert "session-1" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "journal.db")
