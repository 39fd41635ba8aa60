"""`session-journal sessions remove-ended` (by id, or by age with `--ended-before`, in calls of
at most 1,000 sessions, with `--sessions-dir` and `--dry-run`) and `--version`, on both
backends."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from session_journal import SessionState, Store
from session_journal.cli import main
from session_journal.services.sessions import SessionService
from tests.factories import SessionFactory


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def sessions(store: Store, ended: list[str], running: tuple[str, ...] = ()) -> None:
    """Ended (closed) and running sessions, saved in one transaction."""
    with store.unit_of_work() as uow:
        for session_id in [*ended, *running]:
            store.sessions.save(SessionFactory(id=session_id, state=SessionState.RUNNING), uow=uow)
        for session_id in ended:
            closed = SessionFactory(id=session_id, state=SessionState.CLOSED)
            store.sessions.save_lifecycle(closed, uow=uow)
        uow.commit()


def age(url: str, *session_ids: str) -> None:
    """Make the sessions last saved in 2020."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "UPDATE sessions SET updated_at = :old WHERE session_id IN :ids"
                ).bindparams(sa.bindparam("ids", expanding=True)),
                {"old": "2020-01-01 00:00:00+00:00", "ids": list(session_ids)},
            )
    finally:
        engine.dispose()


def stored(url: str) -> list[str]:
    with Store.open(url) as store:
        return [record.id for record in store.sessions.list()]


def test_remove_ended_by_id_with_their_directories(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(migrated_url) as store:
        sessions(store, ["a", "b"], ("r",))
    directory = tmp_path / "sessions"
    for session_id in ("a", "b", "r", "gone"):
        (directory / session_id).mkdir(parents=True)
    url = ("--url", migrated_url)
    assert run(capsys, *url, "sessions", "remove-ended", "a", "b", "--dry-run") == (
        0,
        "would remove 2 session(s)\n",
        "",
    )
    code, out, err = run(capsys, *url, "sessions", "remove-ended", "a", "r")
    assert (code, out) == (1, "")
    assert err == (
        "session-journal: remove ended sessions: 1 session(s) have not ended: 'r' (running); "
        "only closed or error sessions are removed; nothing was removed\n"
    )
    assert run(capsys, *url, "sessions", "remove-ended", "a", "r", "--dry-run")[0] == 1
    assert stored(migrated_url) == ["a", "b", "r"]
    dirs = ("--sessions-dir", str(directory))
    assert run(capsys, *url, "sessions", "remove-ended", "a", "b", "gone", *dirs) == (
        0,
        "removed 2 session(s)\n",
        "",
    )
    assert stored(migrated_url) == ["r"]
    assert sorted(path.name for path in directory.iterdir()) == ["r"]  # `gone`'s too: mended


def test_remove_ended_by_age_in_calls_of_at_most_1000(
    migrated_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = [f"old-{n:04}" for n in range(1001)]
    with Store.open(migrated_url) as store:
        sessions(store, [*old, "recent"], ("running-old",))
    age(migrated_url, *old, "running-old")
    calls: list[int] = []
    remove_ended = SessionService.remove_ended

    def counted(self: SessionService, session_ids: list[str], **kwargs: Any) -> list[str]:
        calls.append(len(session_ids))
        return remove_ended(self, session_ids, **kwargs)

    monkeypatch.setattr(SessionService, "remove_ended", counted)
    url = ("--url", migrated_url)
    assert run(capsys, *url, "sessions", "remove-ended", "--ended-before", "30d", "--dry-run") == (
        0,
        "would remove 1001 session(s)\n",
        "",
    )
    assert calls == []
    assert run(capsys, *url, "sessions", "remove-ended", "--ended-before", "30d") == (
        0,
        "removed 1001 session(s)\n",
        "",
    )
    assert calls == [1000, 1]
    assert stored(migrated_url) == ["recent", "running-old"]  # too recent; not ended


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "give session IDs or --ended-before, one of the two"),
        (["a", "--ended-before", "1d"], "give session IDs or --ended-before, one of the two"),
        (["--ended-before", "soon"], "duration must be a whole number with a unit"),
    ],
)
def test_remove_ended_usage_errors_exit_2(
    migrated_url: str, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--url", migrated_url, "sessions", "remove-ended", *arguments])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "session_journal", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = f"session-journal {importlib.metadata.version('session-journal')}\n"
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_ids_over_several_calls_are_all_checked_before_any_is_removed(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ended = [f"e-{n:04}" for n in range(1001)]
    with Store.open(migrated_url) as store:
        sessions(store, ended, ("zz-running",))  # sorts last: in the second call
    code, out, err = run(
        capsys, "--url", migrated_url, "sessions", "remove-ended", *ended, "zz-running"
    )
    assert (code, out) == (1, "")
    assert "1 session(s) have not ended: 'zz-running' (running)" in err
    assert len(stored(migrated_url)) == 1002  # nothing removed
