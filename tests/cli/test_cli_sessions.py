"""`session-journal sessions remove-ended` (by id, or by age with `--ended-before`, in calls of
at most 1,000 sessions, with `--sessions-dir` and `--dry-run`) and `--version`, on both
backends."""

from __future__ import annotations

import importlib.metadata
import json
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
    assert run(capsys, *url, "sessions", "remove-ended", "b", "a", "gone", "--dry-run") == (
        0,
        "would remove a\nwould remove b\nwould remove 2 session(s)\n",
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
        "".join(f"would remove {session_id}\n" for session_id in old)
        + "would remove 1001 session(s)\n",
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
    err = capsys.readouterr().err
    assert err.startswith("usage: session-journal sessions remove-ended [-h]")  # its own usage
    assert message in err.splitlines()[-1]
    if message.startswith("give"):
        assert err.splitlines()[-1] == f"session-journal sessions remove-ended: error: {message}"


def created(url: str, **created_at: str) -> None:
    """Set when each session's row was created (ties on the database's resolution avoided)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for session_id, moment in created_at.items():
                connection.execute(
                    sa.text(
                        "UPDATE sessions SET created_at = :at, updated_at = :at "
                        "WHERE session_id = :id"
                    ),
                    {"at": f"{moment}+00:00", "id": session_id},
                )
    finally:
        engine.dispose()


def test_sessions_list_newest_first_as_a_table_or_json_lines(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(migrated_url) as store:
        sessions(store, ["old-closed"], ("running-1", "running-2"))
        store.sessions.save(SessionFactory(id="elsewhere", workspace_id="w-2", project_id="p-9"))
    created(
        migrated_url,
        **{
            "old-closed": "2026-01-01 00:00:00",
            "running-1": "2026-01-02 00:00:00",
            "running-2": "2026-01-03 00:00:00",
            "elsewhere": "2026-01-04 00:00:00",
        },
    )
    url = ("--url", migrated_url)
    code, out, err = run(capsys, *url, "sessions", "list", "--workspace", "default", "--limit", "2")
    assert (code, err) == (0, "")
    *table, more = out.splitlines()
    assert table == [
        "ID         WORKSPACE  PROJECT    STATE    CREATED               UPDATED",
        "running-2  default    project-1  running  2026-01-03T00:00:00Z  2026-01-03T00:00:00Z",
        "running-1  default    project-1  running  2026-01-02T00:00:00Z  2026-01-02T00:00:00Z",
    ]
    assert more.startswith("next page: --before ")
    cursor = more.removeprefix("next page: --before ")
    code, out, err = run(capsys, *url, "sessions", "list", "--before", cursor, "--json")
    assert (code, err) == (0, "")
    (only,) = (json.loads(text) for text in out.splitlines())
    assert (only["session"]["id"], only["session"]["state"]) == ("old-closed", "closed")
    assert only["created_at"].startswith("2026-01-01T00:00:00")
    code, out, _ = run(capsys, *url, "sessions", "list", "--state", "running", "--json")
    assert [json.loads(text)["session"]["id"] for text in out.splitlines()] == [
        "elsewhere",
        "running-2",
        "running-1",
    ]
    code, out, _ = run(capsys, *url, "sessions", "list", "--workspace", "w-2", "--json")
    assert [json.loads(text)["session"]["id"] for text in out.splitlines()] == ["elsewhere"]
    code, out, _ = run(capsys, *url, "sessions", "list", "--json", "--limit", "1")
    newest, cursor_line = (json.loads(text) for text in out.splitlines())
    assert newest["session"]["id"] == "elsewhere" and list(cursor_line) == ["next_before"]
    assert run(capsys, *url, "sessions", "list", "--workspace", "none") == (
        0,
        "ID  WORKSPACE  PROJECT  STATE  CREATED  UPDATED\n",
        "",
    )
    with pytest.raises(SystemExit) as exited:
        main([*url, "sessions", "list", "--state", "sleeping"])
    assert exited.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(
            "session-journal sessions list: error: argument --state: invalid choice: 'sleeping'"
        )
    )


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
