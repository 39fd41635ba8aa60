"""Scenario: `session-journal events`, `search`, `sessions remove-ended` and `db prune` run as
real processes with hostile argument values: negative and huge numbers, non-finite intervals,
over-long queries, ids that are paths, and bytes that are not UTF-8 (Python hands them to the
program as lone surrogates).

This proves, on SQLite and PostgreSQL, for each case: the command ends (within a generous
bound), never prints a traceback, and exits as the README says: 0 with nothing on stderr,
1 with exactly one `session-journal: ...` line on stderr, or 2 (argparse's usage error). Values
that must be refused exit 1 or 2.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from session_journal import Store
from tests.factories import SessionFactory

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

NOT_UTF8 = b"\xff\xfe\xc3\x28"
REFUSED = {1, 2}
ANY = {0, 1, 2}
# For all the commands together. Generous: a healthy command ends in a second or two; a
# `--follow` that accepted a bad interval would poll until killed.
TIMEOUT_S = 45.0

CASES: dict[str, tuple[list[str | bytes], set[int]]] = {
    "negative-cursor": (["events", "--after", "-1"], REFUSED),
    "cursor-over-bigint": (["events", "--after", "99999999999999999999"], REFUSED),
    "negative-limit": (["events", "--limit", "-5"], REFUSED),
    "session-not-utf8": (["events", "--session", NOT_UTF8], REFUSED),
    "interval-nan": (["events", "--follow", "--interval", "nan"], REFUSED),
    "interval-negative": (["events", "--follow", "--interval", "-1"], REFUSED),
    "query-not-utf8": (["search", b"fix " + NOT_UTF8], ANY),
    "query-over-1000-chars": (["search", "t" * 1001], REFUSED),
    "remove-id-traversal": (["sessions", "remove-ended", "../etc", "--dry-run"], REFUSED),
    "remove-id-not-utf8": (["sessions", "remove-ended", NOT_UTF8], REFUSED),
    "remove-age-past-epoch": (["sessions", "remove-ended", "--ended-before", "9" * 30 + "w"], ANY),
    "remove-age-negative": (["sessions", "remove-ended", "--ended-before", "-3d"], REFUSED),
    "prune-age-past-epoch": (["db", "prune", "--older-than", "9" * 30 + "w", "--dry-run"], ANY),
}


def test_hostile_arguments_never_end_in_a_traceback(
    store: Store, migrated_url: str, tmp_path: Path
) -> None:
    store.sessions.save(SessionFactory(id="session-1"))
    store.faults.record_startup_fault("session-1", "image pull failed")
    command = [Path(sys.executable).with_name("session-journal"), "--url", migrated_url]

    running = {
        name: subprocess.Popen(
            [*command, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        for name, (argv, _) in CASES.items()
    }
    results: dict[str, tuple[int | str, str]] = {}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for name, process in running.items():
            try:
                _, stderr = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                _, stderr = process.communicate()
                results[name] = ("still running", stderr.decode(errors="replace"))
                continue
            results[name] = (process.returncode, stderr.decode(errors="replace"))
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    wrong = {}
    for name, (code, stderr) in results.items():
        allowed = CASES[name][1]
        lines = stderr.splitlines()
        fine = (
            code in allowed
            and "Traceback" not in stderr
            and (code != 0 or not lines)
            and (code != 1 or (len(lines) == 1 and lines[0].startswith("session-journal: ")))
        )
        if not fine:
            wrong[name] = (code, stderr[-600:])
    assert not wrong, "\n".join(
        f"{name}: {code}\n{stderr}" for name, (code, stderr) in wrong.items()
    )
