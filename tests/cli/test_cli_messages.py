"""One clear line for what the command line refuses: bad bytes, missing files, unknown revisions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import Store
from session_journal.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_search_query_that_is_not_utf8_is_one_line(migrated_url: str) -> None:
    Store.open(migrated_url, upgrade=True).close()
    env = os.environ | {"SESSION_JOURNAL_DATABASE_URL": migrated_url}
    for query, expected in [
        (b"fox \xff", "byte 0xff at position 4"),
        (b"caf\xc3", "byte 0xc3 at position 3"),
    ]:
        finished = subprocess.run(
            [sys.executable.encode(), b"-m", b"session_journal", b"search", query],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert (finished.returncode, finished.stdout) == (1, b"")
        assert finished.stderr.decode() == (
            f"session-journal: search query is not valid UTF-8: {expected}\n"
        )


def test_a_lone_surrogate_from_the_library_is_one_line(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Store.open(migrated_url, upgrade=True).close()
    code, out, err = run(capsys, "--url", migrated_url, "search", "fox \ud800")
    assert (code, out) == (1, "")
    assert err == (
        "session-journal: search query 'fox \\ud800' contains a lone surrogate at position 4\n"
    )


def test_search_bounds_are_one_line(migrated_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    Store.open(migrated_url, upgrade=True).close()
    code, out, err = run(capsys, "--url", migrated_url, "search", " ".join(["fox"] * 33))
    assert (code, out) == (1, "")
    assert err.startswith("session-journal: search query 'fox fox")
    assert err.endswith(" has 33 words, over the limit of 32\n")
    for limit in ["0", "1001", "-5"]:
        with pytest.raises(SystemExit) as exit_info:
            main(["--url", migrated_url, "search", "fox", "--limit", limit])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"session-journal search: error: argument --limit: must be an integer from 1 to "
            f"1000, got '{limit}'"
        )


def test_journal_commands_on_a_directory_without_events_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    expected = f"directory . has no events.jsonl (looked for {tmp_path / 'events.jsonl'})"
    assert run(capsys, "journal", "verify", ".") == (1, "", f"session-journal: {expected}\n")
    assert run(capsys, "journal", "stats", ".") == (1, "", f"session-journal: {expected}\n")
    code, _, err = run(capsys, "journal", "verify", "missing")
    assert (code, err) == (1, "session-journal: cannot read missing: No such file or directory\n")


def test_upgrading_to_an_unknown_revision_migrates_nothing(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for revision in ["nope", "", "@", "nope+1", "base"]:
        assert run(capsys, "--url", url, "db", "upgrade", revision) == (
            1,
            "",
            f"session-journal: unknown revision {revision!r}: expected head or a revision of "
            "this code (head 0015_recorded_at_index); nothing was migrated\n",
        )
    assert run(capsys, "--url", url, "db", "current") == (0, "none (empty database)\n", "")
    shown = sa.make_url(url).render_as_string(hide_password=True)
    assert run(capsys, "--url", url, "db", "upgrade", "0002")[:2] == (
        0,
        f"database {shown} at 0002_startup_cleanup\n",
    )
    assert run(capsys, "--url", url, "db", "upgrade", "+1")[:2] == (
        0,
        f"database {shown} at 0003_checkpoint_operations\n",
    )
